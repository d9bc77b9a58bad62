// The wire codec of the Push RPC (v1.Aggregator/Push in aggregator.proto),
// straight between gRPC's byte buffers and common/'s plain types.
//
// Why not the generated messages: a push of a 16 MiB group went through
// seven copies of its values on the way there and back (serialize, parse,
// proto to Payload, Update to proto, serialize, parse, proto to Update).
// Here an encoded message references the values where they lie (the buffer
// holds a reference to them, so they live as long as gRPC needs them), and a
// decode copies them once, from gRPC's receive slices into the Payload or
// Update.
//
// The bytes are the protobuf encoding of v1.PushRequest and v1.PushReply, so
// any other client or server of the service (grpcurl, another language)
// interoperates. Decoding accepts what protobuf's parser accepts for these
// messages: fields in any order, repeated fields packed or not, a message
// field given twice (merged), unknown fields (skipped). It is stricter in
// two respects: a known field with the wrong wire type is refused, not kept
// as an unknown field, and so is a message that gives indices both plain
// and as index_gaps, or values both as float32 and as bf16_values (protobuf
// keeps both; PayloadFromProto refuses them too). Every malformed input gets
// INVALID_ARGUMENT naming the field and the problem. What is allocated is
// bounded by the bytes present: bf16_values decode straight into floats,
// twice their bytes; a push's indices (varints of one byte or more, 4 bytes
// decoded) are refused while decoding past one per float value the payload
// carries (counted ahead, without decoding), as each comes with one, and
// gaps become indices in place, so they take at most what their values'
// bytes take; a reply's indices are refused past its group's dim. A push of
// B bytes so decodes into at most 2 B (a sketch's bf16 cells; a sparse
// payload's entries, 5 bytes each on the wire at least, into 1.6 B), beside
// the B gRPC holds: at most three times its size in all.
#ifndef SKETCHFUSE_PROTO_PUSH_CODEC_H_
#define SKETCHFUSE_PROTO_PUSH_CODEC_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/payload.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/aggregator.pb.h"

namespace sketchfuse {

// The method a codec-encoded push is called with (grpc::GenericStub).
inline constexpr char kPushMethod[] = "/sketchfuse.v1.Aggregator/Push";

// v1.PushRequest, with the payload as its plain type.
struct PushRequestParts {
  v1::RoundKey round;
  uint32_t worker = 0;
  Payload payload;
};

// v1.PushReply, with the update as its plain type.
struct PushReplyParts {
  Update update;
  uint32_t contributors = 0;
  uint32_t sketch_hash_family = 0;
};

// The encoded request. `payload`'s values are not copied: the buffer keeps
// `payload` alive until gRPC (and every copy of the buffer) is done with it,
// so it must not be modified meanwhile. Indices (as gaps where they ascend)
// and the small fields are encoded into a header of their own, and so are
// a sketch's cells where bfloat16 holds them exactly (bf16_values: 2 bytes
// each, copied; payload_convert.h SendsAsBf16).
grpc::ByteBuffer EncodePushRequest(const v1::RoundKey& round, uint32_t worker,
                                   std::shared_ptr<const Payload> payload);

// The request in `buffer`, with its payload checked by ValidatePayload.
// INVALID_ARGUMENT naming the field for a malformed encoding or payload;
// FAILED_PRECONDITION for a sketch of another hash family.
absl::StatusOr<PushRequestParts> DecodePushRequest(const grpc::ByteBuffer& buffer);

// The encoded reply, stamped with this build's kSketchHashFamily; `update`
// is referenced, not copied, as above.
grpc::ByteBuffer EncodePushReply(std::shared_ptr<const Update> update, uint32_t contributors);

// Which dims a reply's update may have.
enum class ReplyDim {
  // Exactly the group's: every update and candidate list.
  kGroup,
  // The group's, or a dense vector of fewer values: a low-rank method's
  // factor rounds answer with their factors' length, which the compressor
  // then checks exactly (LowRankRounds). For a push of candidate values.
  kFactorsAtMostGroup,
};

// The reply in `buffer` to a push of a group of `group_dim` elements, with
// its update checked by ValidateAnswer (an update, or the candidate list of
// a first round). INVALID_ARGUMENT naming the field for a malformed one,
// for a dim that `dims` does not allow, and, while decoding, for more
// indices than the group has elements (a reply cannot make the worker
// allocate past its group); FAILED_PRECONDITION (CheckSketchHashFamily) for
// a reply from a shard of another sketch hash family, whose sums of
// sketches cannot be ours.
absl::StatusOr<PushReplyParts> DecodePushReply(const grpc::ByteBuffer& buffer, uint64_t group_dim,
                                               ReplyDim dims = ReplyDim::kGroup);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_PROTO_PUSH_CODEC_H_
