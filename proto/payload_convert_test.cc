#include "proto/payload_convert.h"

#include "common/compressor_registry.h"
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

}  // namespace
}  // namespace sketchfuse
