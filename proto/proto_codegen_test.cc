// The generated code works: messages round-trip through the wire format, and
// the generated gMock stub stands in for the Aggregator service.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/aggregator.grpc.pb.h"
#include "proto/aggregator_mock.grpc.pb.h"
#include "proto/payload.pb.h"

namespace sketchfuse {
namespace {

TEST(ProtoCodegenTest, PayloadRoundTripsThroughTheWireFormat) {
  v1::Payload payload;
  payload.set_kind(v1::Payload::SKETCH);
  payload.set_dim(1000);
  payload.mutable_sketch()->set_rows(5);
  payload.mutable_sketch()->set_cols(2);
  payload.mutable_sketch()->set_seed(7);
  for (int i = 0; i < 10; ++i) payload.add_values(0.5f * i);
  const std::string wire = payload.SerializeAsString();
  v1::Payload parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  EXPECT_EQ(parsed.kind(), v1::Payload::SKETCH);
  EXPECT_EQ(parsed.sketch().seed(), 7u);
  EXPECT_EQ(parsed.values_size(), 10);
  EXPECT_FLOAT_EQ(parsed.values(9), 4.5f);
  // Packed floats: 4 bytes each plus a few bytes of framing.
  EXPECT_LT(wire.size(), 10 * 4 + 24u);
}

TEST(ProtoCodegenTest, MalformedBytesAreRejected) {
  v1::Payload parsed;
  EXPECT_FALSE(parsed.ParseFromString(std::string("\xff\xff\xff\xff\x0f", 5)));
}

TEST(ProtoCodegenTest, GeneratedMockStubServesPush) {
  v1::MockAggregatorStub stub;
  v1::PushReply canned;
  canned.set_contributors(4);
  canned.mutable_update()->add_indices(3);
  EXPECT_CALL(stub, Push(::testing::_, ::testing::_, ::testing::_))
      .WillOnce(::testing::DoAll(::testing::SetArgPointee<2>(canned),
                                 ::testing::Return(::grpc::Status::OK)));
  ::grpc::ClientContext context;
  v1::PushRequest request;
  request.mutable_round()->set_job("job");
  v1::PushReply reply;
  ASSERT_TRUE(stub.Push(&context, request, &reply).ok());
  EXPECT_EQ(reply.contributors(), 4u);
  EXPECT_EQ(reply.update().indices(0), 3u);
}

}  // namespace
}  // namespace sketchfuse
