// absl::Status <-> grpc::Status. The two share the canonical codes, so the
// conversion keeps the code and the message.
#ifndef SKETCHFUSE_PROTO_GRPC_STATUS_H_
#define SKETCHFUSE_PROTO_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace sketchfuse {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_PROTO_GRPC_STATUS_H_
