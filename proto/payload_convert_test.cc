#include "proto/payload_convert.h"

#include "absl/strings/str_cat.h"
#include "common/compressor_registry.h"
#include "common/error_feedback.h"
#include "common/sketch_hash.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

TEST(PayloadConvertTest, EveryKindRoundTrips) {
  std::vector<float> g(5000);
  for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>((i * 37) % 101) - 50.0f;
  for (const char* spec : {"dense", "topk:k=20", "count_sketch:k=20"}) {
    Payload p = *(*CompressorRegistry::Default().Create(spec))->Encode(g, {});
    v1::Payload message;
    PayloadToProto(p, &message);
    v1::Payload wire;
    ASSERT_TRUE(wire.ParseFromString(message.SerializeAsString()));
    absl::StatusOr<Payload> back = PayloadFromProto(wire);
    ASSERT_TRUE(back.ok()) << spec << ": " << back.status();
    EXPECT_EQ(back->kind, p.kind);
    EXPECT_EQ(back->dim, p.dim);
    EXPECT_EQ(back->indices, p.indices);
    EXPECT_EQ(back->values, p.values);
    EXPECT_EQ(back->sketch, p.sketch);
  }
}

TEST(PayloadConvertTest, MalformedMessagesAreRefusedByName) {
  v1::Payload message;
  EXPECT_NE(PayloadFromProto(message).status().message().find("kind 0"), std::string::npos);
  message.set_kind(v1::Payload::SPARSE);
  message.set_dim(10);
  message.add_indices(4);
  message.add_indices(2);
  message.add_values(1);
  message.add_values(1);
  absl::Status s = PayloadFromProto(message).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("indices[1] = 2 is not above"), std::string::npos) << s;
  message.set_kind(v1::Payload::SKETCH);
  message.clear_indices();
  EXPECT_EQ(PayloadFromProto(message).status().code(), absl::StatusCode::kInvalidArgument);
}

// Sketches carry the sender's hash family; one hashed by another family (an
// older or newer build, or a message that leaves the field out) would add up
// to garbage, so it is refused by name.
TEST(PayloadConvertTest, SketchesOfAnotherHashFamilyAreRefused) {
  std::vector<float> g(3000, 0.25f);
  const Payload p = *(*CompressorRegistry::Default().Create("count_sketch:k=20"))->Encode(g, {});
  v1::Payload message;
  PayloadToProto(p, &message);
  EXPECT_EQ(message.sketch().hash_family(), kSketchHashFamily);
  for (uint32_t family : {0u, kSketchHashFamily - 1, kSketchHashFamily + 1, 0xFFFFFFFFu}) {
    v1::Payload foreign = message;
    foreign.mutable_sketch()->set_hash_family(family);
    absl::Status s = PayloadFromProto(foreign).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << family;
    EXPECT_NE(s.message().find(absl::StrCat("the sketch payload uses Count-Sketch hash family ", family, family == 0 ? " (" : ";")),
              std::string::npos) << s;
  }
  v1::Payload unnumbered = message;
  unnumbered.mutable_sketch()->clear_hash_family();
  EXPECT_NE(PayloadFromProto(unnumbered).status().message().find("before hash families were numbered"),
            std::string::npos);
  // Dense and sparse payloads carry no hash and no family.
  Payload dense = *(*CompressorRegistry::Default().Create("dense"))->Encode(g, {});
  PayloadToProto(dense, &message);
  EXPECT_FALSE(message.has_sketch());
  EXPECT_TRUE(PayloadFromProto(message).ok());
}

TEST(PayloadConvertTest, UpdatesRoundTripAndBadOnesAreRefused) {
  Update u;
  u.dim = 10;
  u.indices = {1, 5};
  u.values = {0.5f, -2.0f};
  v1::Update message;
  UpdateToProto(u, &message);
  absl::StatusOr<Update> back = UpdateFromProto(message);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->indices, u.indices);
  EXPECT_EQ(back->values, u.values);
  message.add_indices(20);
  message.add_values(1);
  EXPECT_EQ(UpdateFromProto(message).status().code(), absl::StatusCode::kInvalidArgument);
}

// A shard's answer may be a candidate list (the first answer of a two-round
// group): AnswerFromProto takes it, UpdateFromProto (an update to apply)
// does not; both refuse indices out of order.
TEST(PayloadConvertTest, AnAnswerMayListCandidatesWithoutValues) {
  v1::Update listed;
  listed.set_dim(50);
  listed.add_indices(4);
  listed.add_indices(40);
  absl::StatusOr<Update> answer = AnswerFromProto(listed);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_TRUE(IsCandidateList(*answer));
  EXPECT_EQ(answer->indices, std::vector<uint32_t>({4, 40}));
  EXPECT_EQ(UpdateFromProto(listed).status().code(), absl::StatusCode::kInvalidArgument);
  listed.add_indices(40);
  EXPECT_EQ(AnswerFromProto(listed).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sketchfuse
