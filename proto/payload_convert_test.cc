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

// Ascending indices travel as gaps (payload.proto's index_gaps): about a
// byte an index where they lie close, against up to five for the index
// itself. A message with plain indices (another sender) reads the same.
TEST(PayloadConvertTest, IndicesTravelAsGapsAndEitherFormIsRead) {
  Payload p;
  p.kind = PayloadKind::kSparse;
  p.dim = 1 << 24;
  for (uint32_t i = 0; i < 1000; ++i) p.indices.push_back(10'000'000 + 7 * i);
  p.values.assign(p.indices.size(), 0.5f);
  v1::Payload message;
  PayloadToProto(p, &message);
  EXPECT_EQ(message.indices_size(), 0);
  ASSERT_EQ(message.index_gaps_size(), 1000);
  EXPECT_EQ(message.index_gaps(0), 10'000'000u);
  EXPECT_EQ(message.index_gaps(1), 7u);
  v1::Payload plain = message;
  plain.clear_index_gaps();
  plain.mutable_indices()->Add(p.indices.begin(), p.indices.end());
  // 4 bytes an index for the plain varints of ~10^7, 1 for the gaps of 7.
  EXPECT_EQ(plain.ByteSizeLong() - message.ByteSizeLong(), 3 * 999u);
  for (const v1::Payload* form : {&message, &plain}) {
    v1::Payload wire;
    ASSERT_TRUE(wire.ParseFromString(form->SerializeAsString()));
    absl::StatusOr<Payload> back = PayloadFromProto(wire);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->indices, p.indices);
  }
  Update u;
  u.dim = 100;
  u.indices = {0, 1, 99};
  u.values = {1, 2, 3};
  v1::Update update;
  UpdateToProto(u, &update);
  EXPECT_EQ(std::vector<uint32_t>(update.index_gaps().begin(), update.index_gaps().end()),
            std::vector<uint32_t>({0, 1, 98}));
  absl::StatusOr<Update> back = UpdateFromProto(update);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->indices, u.indices);
  // Indices that do not ascend go as they are, and are refused on arrival.
  u.indices = {5, 3, 4};
  UpdateToProto(u, &update);
  EXPECT_EQ(update.index_gaps_size(), 0);
  EXPECT_EQ(update.indices_size(), 3);
  EXPECT_EQ(UpdateFromProto(update).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PayloadConvertTest, BadGapsAreRefusedByName) {
  v1::Update update;
  update.set_dim(100);
  auto refused = [&](const std::vector<uint32_t>& gaps, const std::string& fragment) {
    update.clear_index_gaps();
    update.clear_values();
    for (uint32_t g : gaps) {
      update.add_index_gaps(g);
      update.add_values(1);
    }
    absl::Status s = UpdateFromProto(update).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << fragment;
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s;
  };
  refused({3, 4, 0}, "update index_gaps[2] = 0: every gap after the first is at least 1");
  refused({0xFFFFFFFFu, 1}, "update index_gaps[1] takes the index to 4294967296, past 2^32 - 1");
  refused({60, 50}, "indices[1] = 110 is out of range");  // the sum past the dim
  update.add_indices(1);
  refused({3}, "update gives both indices and index_gaps");
  // A first gap of 0 is index 0.
  v1::Update zero;
  zero.set_dim(3);
  zero.add_index_gaps(0);
  zero.add_values(1);
  absl::StatusOr<Update> back = UpdateFromProto(zero);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->indices, std::vector<uint32_t>({0}));
  // The same checks on payloads.
  v1::Payload payload;
  payload.set_kind(v1::Payload::SPARSE);
  payload.set_dim(10);
  payload.add_index_gaps(2);
  payload.add_index_gaps(0);
  payload.add_values(1);
  payload.add_values(1);
  absl::Status s = PayloadFromProto(payload).status();
  EXPECT_NE(s.message().find("payload index_gaps[1] = 0"), std::string::npos) << s;
}

}  // namespace
}  // namespace sketchfuse
