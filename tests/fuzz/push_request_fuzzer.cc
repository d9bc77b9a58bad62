// Fuzz target: a push as a shard receives it, from the bytes on the wire to
// the aggregation core (proto parse, PayloadFromProto's validation, the
// core's checks, second rounds included), and a reply as a worker receives
// it (UpdateFromProto). Promises, whatever the bytes:
//   - nothing crashes, and every push's callback runs exactly once;
//   - a push that is refused changes nothing: afterwards a fresh dense round
//     of two workers still answers with exactly their sum, and the second
//     round of the primed step still sums exactly.
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/compressor_registry.h"
#include "common/error_feedback.h"
#include "proto/aggregator.pb.h"
#include "proto/payload_convert.h"
#include "server/aggregation_core.h"
#include "google/protobuf/stubs/logging.h"
#include "tests/fuzz/fuzz_target.h"

namespace sketchfuse {
namespace {

constexpr uint64_t kPrimedStep = 100;
constexpr uint64_t kCheckStep = 1ull << 62;
const char kSketch[] = "count_sketch:method=estimate,k=10,rows=3,seed=2";

std::vector<float> Ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 37) % 101) - 50.0f * scale;
  return v;
}

Payload Encoded(const std::string& spec, const std::vector<float>& g) {
  return *(*CompressorRegistry::Default().Create(spec))->Encode(g, {});
}

// A core with a dense, a sketch (second round) and a top-k group, whose
// sketch round of kPrimedStep has finished; returns its candidates.
std::unique_ptr<AggregationCore> PrimedCore(std::vector<uint32_t>* candidates) {
  AggregationConfig config;
  config.job = "job";
  config.world_size = 2;
  GroupSpec sketch{1, 1000, kSketch};
  sketch.rounds = 2;
  config.groups = {{0, 64, "dense"}, sketch, {2, 200, "topk:k=5", 5}};
  std::unique_ptr<AggregationCore> core = *AggregationCore::Create(config);
  absl::StatusOr<RoundResult> answer = absl::UnknownError("none");
  for (uint32_t w = 0; w < 2; ++w) {
    core->Push({"job", kPrimedStep, 1}, w, Encoded(kSketch, Ramp(1000, 1.0f + w)), absl::Now(),
               [&](absl::StatusOr<RoundResult> r) { answer = std::move(r); });
  }
  FuzzCheck(answer.ok(), "priming the sketch round");
  *candidates = answer->update->indices;
  return core;
}

v1::PushRequest Request(uint64_t step, uint32_t group, uint32_t round, uint32_t worker, const Payload& p) {
  v1::PushRequest request;
  request.mutable_round()->set_job("job");
  request.mutable_round()->set_step(step);
  request.mutable_round()->set_group(group);
  request.mutable_round()->set_round(round);
  request.set_worker(worker);
  PayloadToProto(p, request.mutable_payload());
  return request;
}

Payload ExactAt(const std::vector<uint32_t>& indices, const std::vector<float>& g) {
  Payload p;
  p.kind = PayloadKind::kCandidateValues;
  p.dim = g.size();
  for (uint32_t i : indices) p.values.push_back(g[i]);
  return p;
}

}  // namespace

std::vector<std::string> FuzzSeeds() {
  std::vector<uint32_t> candidates;
  PrimedCore(&candidates);
  std::vector<v1::PushRequest> requests = {
      Request(3, 0, 0, 0, Encoded("dense", Ramp(64, 0.5f))),
      Request(3, 1, 0, 1, Encoded(kSketch, Ramp(1000, 2.0f))),
      Request(4, 2, 0, 0, Encoded("topk:k=5", Ramp(200, 1.0f))),
      Request(kPrimedStep, 1, 1, 0, ExactAt(candidates, Ramp(1000, 1.0f))),
      Request(kPrimedStep, 1, 1, 1, ExactAt(candidates, Ramp(1000, 2.0f))),
  };
  std::vector<std::string> seeds;
  for (const v1::PushRequest& r : requests) seeds.push_back(r.SerializeAsString());
  v1::PushReply reply;
  Update u;
  u.dim = 10;
  u.indices = {1, 4};
  u.values = {0.5f, -2.0f};
  UpdateToProto(u, reply.mutable_update());
  seeds.push_back(reply.SerializeAsString());
  return seeds;
}

// What the inputs reached, printed at exit by the driver's runs (for the
// figures in docs/RELIABILITY.md).
struct Reach {
  uint64_t inputs = 0, parsed = 0, valid_payload = 0, accepted = 0;
  std::map<std::string, uint64_t> refusals;
  ~Reach() {
    if (inputs == 0 || std::getenv("SKETCHFUSE_FUZZ_STATS") == nullptr) return;
    std::printf("push_request_fuzzer: %llu inputs, %llu parsed as a PushRequest, %llu with a valid payload, "
                "%llu accepted by the core\n",
                static_cast<unsigned long long>(inputs), static_cast<unsigned long long>(parsed),
                static_cast<unsigned long long>(valid_payload), static_cast<unsigned long long>(accepted));
    for (const auto& [code, count] : refusals) {
      std::printf("  refused %s: %llu\n", code.c_str(), static_cast<unsigned long long>(count));
    }
  }
};
Reach reach;

}  // namespace sketchfuse

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sketchfuse;
  // Protobuf logs every malformed string it meets; the inputs are meant to be malformed.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  // A worker reading a hostile reply: a status or a valid update, no crash.
  v1::PushReply reply;
  if (reply.ParseFromArray(data, static_cast<int>(size))) {
    absl::StatusOr<Update> update = UpdateFromProto(reply.update());
    if (update.ok()) FuzzCheck(ValidateUpdate(*update, update->dim).ok(), "UpdateFromProto let an invalid update by");
  }

  std::vector<uint32_t> candidates;
  std::unique_ptr<AggregationCore> core = PrimedCore(&candidates);
  int calls = 0, pushes = 0;
  bool first_answer = true;  // of the fuzzed push (which may be answered last, by FailAllRounds)
  v1::PushRequest request;
  bool fuzzed_check_round = false;
  ++reach.inputs;
  if (request.ParseFromArray(data, static_cast<int>(size))) {
    ++reach.parsed;
    absl::StatusOr<Payload> payload = PayloadFromProto(request.payload());
    if (!payload.ok()) ++reach.refusals["by PayloadFromProto"];
    if (payload.ok()) {
      ++reach.valid_payload;
      const RoundKey key{request.round().job(), request.round().step(), request.round().group(),
                         request.round().round()};
      fuzzed_check_round = key.step == kCheckStep || key.step == kPrimedStep;
      ++pushes;
      core->Push(key, request.worker(), *std::move(payload), absl::Now(), [&](absl::StatusOr<RoundResult> r) {
        ++calls;
        if (!first_answer) return;
        first_answer = false;
        if (r.ok()) {
          ++reach.accepted;
        } else if (r.status().code() != absl::StatusCode::kCancelled) {
          ++reach.refusals[absl::StatusCodeToString(r.status().code())];
        } else {
          ++reach.accepted;  // accepted, waiting for the other worker when the input ended
        }
      });
    }
  }
  if (!fuzzed_check_round) {
    // Nothing the input did reaches a fresh round: two workers' dense pushes
    // sum exactly, and the primed step's second round sums exactly.
    const std::vector<float> a = Ramp(64, 0.5f), b = Ramp(64, 0.25f);
    absl::StatusOr<RoundResult> dense = absl::UnknownError("none");
    core->Push({"job", kCheckStep, 0}, 0, Encoded("dense", a), absl::Now(), [&](auto) { ++calls; });
    core->Push({"job", kCheckStep, 0}, 1, Encoded("dense", b), absl::Now(), [&](absl::StatusOr<RoundResult> r) {
      ++calls;
      dense = std::move(r);
    });
    pushes += 2;
    FuzzCheck(dense.ok(), "a good round failed after a fuzzed push");
    for (size_t i = 0; i < a.size(); ++i) FuzzCheck(dense->update->values[i] == a[i] + b[i], "a good round's sum");
    const std::vector<float> g0 = Ramp(1000, 1.0f), g1 = Ramp(1000, 2.0f);
    absl::StatusOr<RoundResult> exact = absl::UnknownError("none");
    core->Push({"job", kPrimedStep, 1, true}, 0, ExactAt(candidates, g0), absl::Now(), [&](auto) { ++calls; });
    core->Push({"job", kPrimedStep, 1, true}, 1, ExactAt(candidates, g1), absl::Now(),
               [&](absl::StatusOr<RoundResult> r) {
                 ++calls;
                 exact = std::move(r);
               });
    pushes += 2;
    FuzzCheck(exact.ok(), "the second round failed after a fuzzed push");
    for (size_t j = 0; j < candidates.size(); ++j) {
      FuzzCheck(exact->update->values[j] == g0[candidates[j]] + g1[candidates[j]], "the second round's sum");
    }
  }
  core->FailAllRounds(absl::CancelledError("fuzz input done"));
  FuzzCheck(calls == pushes, "a push's callback did not run exactly once");
  return 0;
}
