// Builds the aggregation scheme a joined job's run names, on its route (the
// registry's entry says which): the centralized PsScheme, the decentralized
// CollectiveScheme or the HybridScheme. The worker daemon and the tests
// build schemes only through here.
#ifndef SKETCHFUSE_WORKER_SCHEMES_SCHEME_FACTORY_H_
#define SKETCHFUSE_WORKER_SCHEMES_SCHEME_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "proto/coordinator.pb.h"
#include "proto/rpc_channel.h"
#include "worker/collective/collective.h"
#include "worker/rpc/grpc_ps_transport.h"
#include "worker/rpc/ps_transport.h"
#include "worker/schemes/aggregation_scheme.h"
#include "worker/schemes/hybrid_scheme.h"

namespace sketchfuse {

// What a scheme needs besides the joined job.
struct SchemeEnvironment {
  // The centralized route's channels to the shards and its retry policy.
  RpcChannelOptions rpc;
  RetryPolicy retry;
  // Makes the centralized route's transport; empty: gRPC with `rpc` and
  // `retry` (GrpcTransports). Tests of failover give a loopback's.
  TransportFactory transport;
  // The decentralized and hybrid routes' group (not owned; it must outlive
  // the scheme and have the job's world size).
  Collective* collective = nullptr;
  HybridOptions hybrid;
};

struct BuiltScheme {
  std::unique_ptr<AggregationScheme> scheme;
  // The centralized route's transport (its fault and retry counts), or null.
  const PsTransport* transport = nullptr;
};

// True when the scheme's route needs a collective group (decentralized and
// hybrid); false for a centralized or unknown scheme.
bool NeedsCollective(const std::string& scheme);

// The scheme of joined.job().run(). INVALID_ARGUMENT for an unknown scheme,
// a run whose scheme, compressor, second round or device do not go together
// (worker/schemes/scheme_registry.h CheckRunScheme), a missing collective
// where the route needs one, or a job that does not fit its shard map or
// collective.
absl::StatusOr<BuiltScheme> MakeScheme(const v1::JoinReply& joined, SchemeEnvironment environment);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_SCHEMES_SCHEME_FACTORY_H_
