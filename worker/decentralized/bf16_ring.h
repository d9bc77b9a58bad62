// A ring allreduce with bfloat16 values on the wire and float32 accumulation,
// over the Collective interface's point-to-point exchanges (Gloo has no
// bfloat16 type, and its float16 allreduce accumulates in float16).
//
// bfloat16 (common/bf16.h) keeps float32's 8-bit exponent: every finite
// gradient keeps its order of magnitude (no loss scaling), at a relative
// precision of 2^-8.
//
// NOTE: stateless; the Collective's own rules on threads apply.
#ifndef SKETCHFUSE_WORKER_DECENTRALIZED_BF16_RING_H_
#define SKETCHFUSE_WORKER_DECENTRALIZED_BF16_RING_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/bf16.h"
#include "worker/collective/collective.h"

namespace sketchfuse {

// data[i] = sum over ranks of data[i], the same bits on every rank.
// Ring reduce-scatter over P chunks, then a ring allgather: in each of the
// 2 (P - 1) rounds a rank sends one chunk of bfloat16 values to rank + 1 and
// receives one from rank - 1 (SendRecv with tag tag_of_round(round), round
// = 0 .. 2 P - 3; the algorithms pass PointToPointTag). In the reduce-scatter
// what it receives is added into its float32 values. Each rank then rounds
// the chunk it completed once to bfloat16, and every rank (the owner
// too) takes those values, so the results agree bit for bit.
// Error: a sum's partial sums are rounded at most P times (P - 1 hops and
// the final rounding), so |result - exact| <= P * kBf16UnitRoundoff *
// sum over ranks of |data[i]| (plus float32 rounding).
// With one rank nothing is sent and data is unchanged. Every rank must pass
// the same data.size(). Bytes sent (bytes_sent()): 2 (P - 1) messages of
// about 2 n / P bytes plus the Collective's 8-byte length each. Errors: the
// collective's; DATA_LOSS for a message of the wrong length.
absl::Status RingAllReduceSumBf16(Collective& collective, absl::Span<float> data,
                                  const std::function<uint32_t(int round)>& tag_of_round);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_DECENTRALIZED_BF16_RING_H_
