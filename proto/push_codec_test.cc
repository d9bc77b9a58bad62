// The push codec against protobuf's own serializer and parser (the
// reference) on random messages of many sizes, split into gRPC slices at
// random places, in every encoding protobuf accepts; and on hostile bytes.
#include "proto/push_codec.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/bf16.h"
#include "common/error_feedback.h"
#include "common/sketch_hash.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/aggregator.grpc.pb.h"
#include "proto/payload_convert.h"

namespace sketchfuse {
namespace {

using google::protobuf::io::CodedOutputStream;
using google::protobuf::io::StringOutputStream;
using google::protobuf::util::MessageDifferencer;

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// `bytes` as a buffer of slices cut at random places (some of one byte).
grpc::ByteBuffer Sliced(const std::string& bytes, std::mt19937_64& rng) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t left = bytes.size() - at;
    size_t n = std::uniform_int_distribution<size_t>(1, 4)(rng) == 1 ? 1 : std::uniform_int_distribution<size_t>(1, left)(rng);
    n = std::min(n, left);
    slices.emplace_back(bytes.data() + at, n);
    at += n;
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

Payload RandomPayload(PayloadKind kind, uint64_t dim, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  Payload p;
  p.kind = kind;
  p.dim = dim;
  switch (kind) {
    case PayloadKind::kDense:
      p.values.resize(dim);
      break;
    case PayloadKind::kSparse:
      for (uint32_t i = 0; i < dim; ++i) {
        if (rng() % 7 == 0) p.indices.push_back(i);
      }
      p.values.resize(p.indices.size());
      break;
    case PayloadKind::kSketch:
      p.sketch = {static_cast<uint32_t>(1 + rng() % 5), static_cast<uint32_t>(1 + rng() % 300), rng()};
      p.values.resize(p.sketch.num_cells());
      break;
    case PayloadKind::kCandidateValues:
      p.values.resize(1 + rng() % dim);
      break;
  }
  for (float& v : p.values) v = normal(rng);
  return p;
}

v1::RoundKey Round(uint64_t step, uint32_t round_number) {
  v1::RoundKey round;
  round.set_job("job-ü");
  round.set_step(step);
  round.set_group(static_cast<uint32_t>(step % 5));
  round.set_round(round_number);
  return round;
}

void ExpectSamePayload(const Payload& a, const Payload& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.dim, b.dim);
  EXPECT_EQ(a.indices, b.indices);
  // Bit-exact (NaNs included): floats travel as their bytes.
  ASSERT_EQ(a.values.size(), b.values.size());
  if (!a.values.empty()) {
    EXPECT_EQ(std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(float)), 0);
  }
  EXPECT_EQ(a.sketch, b.sketch);
}

constexpr PayloadKind kKinds[] = {PayloadKind::kDense, PayloadKind::kSparse, PayloadKind::kSketch,
                                  PayloadKind::kCandidateValues};
constexpr uint64_t kDims[] = {1, 2, 3, 100, 4097, 1 << 18};

TEST(PushCodecTest, PushMethodIsTheServicesPush) {
  EXPECT_EQ(std::string(kPushMethod), std::string("/") + v1::Aggregator::service_full_name() + "/Push");
}

TEST(PushCodecTest, EncodedRequestsAreWhatProtobufSerializes) {
  std::mt19937_64 rng(1);
  for (PayloadKind kind : kKinds) {
    for (uint64_t dim : kDims) {
      auto payload = std::make_shared<const Payload>(RandomPayload(kind, dim, rng));
      const grpc::ByteBuffer encoded = EncodePushRequest(Round(dim, dim % 2 == 0 ? 1 : 0), 3, payload);
      v1::PushRequest parsed;
      ASSERT_TRUE(parsed.ParseFromString(Flatten(encoded))) << dim;
      v1::PushRequest expected;
      *expected.mutable_round() = Round(dim, dim % 2 == 0 ? 1 : 0);
      expected.set_worker(3);
      PayloadToProto(*payload, expected.mutable_payload());
      EXPECT_TRUE(MessageDifferencer::Equals(parsed, expected)) << PayloadKindName(kind) << " dim " << dim;
      // And as many bytes as protobuf's serialization (the fields come in
      // another order: those before the values first).
      EXPECT_EQ(Flatten(encoded).size(), expected.ByteSizeLong());
    }
  }
}

TEST(PushCodecTest, DecodesProtobufsRequestsSplitAnywhere) {
  std::mt19937_64 rng(2);
  for (PayloadKind kind : kKinds) {
    for (uint64_t dim : kDims) {
      const Payload payload = RandomPayload(kind, dim, rng);
      v1::PushRequest message;
      *message.mutable_round() = Round(dim, 1);
      message.set_worker(static_cast<uint32_t>(dim));
      PayloadToProto(payload, message.mutable_payload());
      const std::string bytes = message.SerializeAsString();
      for (int split = 0; split < 3; ++split) {
        absl::StatusOr<PushRequestParts> parts = DecodePushRequest(Sliced(bytes, rng));
        ASSERT_TRUE(parts.ok()) << parts.status();
        EXPECT_TRUE(MessageDifferencer::Equals(parts->round, message.round()));
        EXPECT_EQ(parts->worker, dim);
        ExpectSamePayload(parts->payload, payload);
      }
    }
  }
}

// Writes the request's fields the way another encoder may: unpacked repeated
// fields, fields out of order, the payload split over two occurrences
// (protobuf merges them), unknown fields of every wire type.
std::string UnusualEncoding(const v1::PushRequest& message, std::mt19937_64& rng) {
  const v1::Payload& p = message.payload();
  auto encode_payload_part = [&](int from, int to) {
    std::string out;
    StringOutputStream stream(&out);
    CodedOutputStream o(&stream);
    o.WriteTag((99 << 3) | 5);  // unknown fixed32
    o.WriteLittleEndian32(7);
    // The indices as they came: gaps (field 6), which the two parts
    // concatenate, or plain (field 3).
    const bool gaps = p.index_gaps_size() > 0;
    const int index_field = gaps ? 6 : 3;
    const int index_count = gaps ? p.index_gaps_size() : p.indices_size();
    for (int i = from; i < to; ++i) {
      if (i < index_count) {
        const uint32_t index = gaps ? p.index_gaps(i) : p.indices(i);
        if (rng() % 2) {
          o.WriteTag((index_field << 3) | 0);  // unpacked index
          o.WriteVarint32(index);
        } else {
          std::string packed;
          StringOutputStream ps(&packed);
          {
            CodedOutputStream po(&ps);
            po.WriteVarint32(index);
          }
          o.WriteTag((index_field << 3) | 2);
          o.WriteVarint32(packed.size());
          o.WriteString(packed);
        }
      }
      o.WriteTag((4 << 3) | 5);  // unpacked value
      float v = p.values(i);
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      o.WriteLittleEndian32(bits);
    }
    o.WriteTag((2 << 3) | 0);
    o.WriteVarint64(p.dim());
    o.WriteTag((1 << 3) | 0);
    o.WriteVarint32(p.kind());
    if (p.has_sketch()) {
      const std::string shape = p.sketch().SerializeAsString();
      o.WriteTag((5 << 3) | 2);
      o.WriteVarint32(shape.size());
      o.WriteString(shape);
    }
    o.WriteTag((50 << 3) | 3);  // an unknown group holding a varint
    o.WriteTag((51 << 3) | 0);
    o.WriteVarint32(1);
    o.WriteTag((50 << 3) | 4);
    return out;
  };
  std::string out;
  StringOutputStream stream(&out);
  CodedOutputStream o(&stream);
  const int half = p.values_size() / 2;
  for (const std::string& part : {encode_payload_part(0, half), encode_payload_part(half, p.values_size())}) {
    o.WriteTag((3 << 3) | 2);
    o.WriteVarint32(part.size());
    o.WriteString(part);
  }
  o.WriteTag((77 << 3) | 1);  // unknown fixed64
  o.WriteLittleEndian64(1);
  o.WriteTag((2 << 3) | 0);
  o.WriteVarint32(message.worker());
  const std::string round = message.round().SerializeAsString();
  o.WriteTag((1 << 3) | 2);
  o.WriteVarint32(round.size());
  o.WriteString(round);
  o.WriteTag((78 << 3) | 2);  // unknown bytes
  o.WriteVarint32(3);
  o.WriteString("abc");
  o.Trim();
  return out;
}

TEST(PushCodecTest, DecodesEveryEncodingProtobufAcceptsAsProtobufDoes) {
  std::mt19937_64 rng(3);
  for (PayloadKind kind : kKinds) {
    for (uint64_t dim : {1, 5, 100, 2000}) {
      v1::PushRequest message;
      *message.mutable_round() = Round(dim, 0);
      message.set_worker(9);
      PayloadToProto(RandomPayload(kind, dim, rng), message.mutable_payload());
      const std::string bytes = UnusualEncoding(message, rng);
      v1::PushRequest reference;
      ASSERT_TRUE(reference.ParseFromString(bytes));
      absl::StatusOr<Payload> expected = PayloadFromProto(reference.payload());
      ASSERT_TRUE(expected.ok()) << expected.status();
      absl::StatusOr<PushRequestParts> parts = DecodePushRequest(Sliced(bytes, rng));
      ASSERT_TRUE(parts.ok()) << PayloadKindName(kind) << " " << dim << ": " << parts.status();
      EXPECT_TRUE(MessageDifferencer::Equals(parts->round, reference.round()));
      EXPECT_EQ(parts->worker, reference.worker());
      ExpectSamePayload(parts->payload, *expected);
    }
  }
}

// Whatever the codec accepts, protobuf reads the same way: over every
// truncation and over random byte changes of valid requests. (The codec may
// refuse more: see push_codec.h.)
TEST(PushCodecTest, NeverAcceptsWhatProtobufReadsDifferently) {
  std::mt19937_64 rng(4);
  // Protobuf logs each job name that is not UTF-8; the test checks the
  // outcome instead.
  google::protobuf::LogHandler* previous = google::protobuf::SetLogHandler(nullptr);
  int accepted = 0, refused = 0;
  for (PayloadKind kind : kKinds) {
    v1::PushRequest message;
    *message.mutable_round() = Round(11, 0);
    message.set_worker(1);
    PayloadToProto(RandomPayload(kind, 40, rng), message.mutable_payload());
    const std::string bytes = message.SerializeAsString();
    std::vector<std::string> variants;
    for (size_t cut = 0; cut < bytes.size(); ++cut) variants.push_back(bytes.substr(0, cut));
    for (int i = 0; i < 3000; ++i) {
      std::string v = bytes;
      for (int flips = 1 + rng() % 3; flips > 0; --flips) v[rng() % v.size()] = static_cast<char>(rng());
      variants.push_back(v);
    }
    for (const std::string& v : variants) {
      absl::StatusOr<PushRequestParts> parts = DecodePushRequest(Sliced(v, rng));
      if (!parts.ok()) {
        ++refused;
        // A flipped hash family number makes a well-formed sketch of another family.
        EXPECT_TRUE(parts.status().code() == absl::StatusCode::kInvalidArgument ||
                    parts.status().code() == absl::StatusCode::kFailedPrecondition)
            << parts.status();
        EXPECT_FALSE(parts.status().message().empty());
        continue;
      }
      ++accepted;
      v1::PushRequest reference;
      ASSERT_TRUE(reference.ParseFromString(v)) << "the codec accepted bytes protobuf refuses";
      absl::StatusOr<Payload> expected = PayloadFromProto(reference.payload());
      ASSERT_TRUE(expected.ok()) << expected.status();
      EXPECT_TRUE(MessageDifferencer::Equals(parts->round, reference.round()));
      EXPECT_EQ(parts->worker, reference.worker());
      ExpectSamePayload(parts->payload, *expected);
    }
  }
  google::protobuf::SetLogHandler(previous);
  // Both outcomes were exercised.
  EXPECT_GT(accepted, 100);
  EXPECT_GT(refused, 100);
}

absl::Status DecodeBytes(const std::string& bytes) {
  std::mt19937_64 rng(5);
  return DecodePushRequest(Sliced(bytes, rng)).status();
}

// A request whose payload field holds `payload_bytes`.
std::string WithPayloadBytes(const std::string& payload_bytes) {
  std::string out;
  StringOutputStream stream(&out);
  {
    CodedOutputStream o(&stream);
    o.WriteTag((3 << 3) | 2);
    o.WriteVarint32(payload_bytes.size());
    o.WriteString(payload_bytes);
  }
  return out;
}

void ExpectRefused(const std::string& bytes, const std::string& fragment) {
  absl::Status s = DecodeBytes(bytes);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << fragment;
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s;
}

TEST(PushCodecTest, MalformedRequestsAreRefusedNamingTheField) {
  // kind DENSE, dim 2, then values of 7 bytes.
  ExpectRefused(WithPayloadBytes(std::string("\x08\x01\x10\x02\x22\x07", 6) + std::string(7, '\0')),
                "values has 7 bytes, not a multiple of 4");
  // values claiming 64 bytes with 8 present.
  ExpectRefused(WithPayloadBytes(std::string("\x08\x01\x10\x02\x22\x40", 6) + std::string(8, '\0')),
                "values claims 64 bytes but 8 are left");
  // dim sent as a length-delimited field.
  ExpectRefused(WithPayloadBytes(std::string("\x08\x01\x12\x00", 4)), "dim (field 2) has wire type 2, not 0");
  // An index over 32 bits.
  ExpectRefused(WithPayloadBytes(std::string("\x08\x02\x10\x02\x18\x80\x80\x80\x80\x10", 10)),
                "indices = 4294967296 does not fit 32 bits");
  // A varint of eleven bytes.
  ExpectRefused(std::string("\x10") + std::string(10, '\xff') + "\x01", "worker is cut off or longer than ten bytes");
  // Field number 0; wire type 7; a group left open.
  ExpectRefused(std::string("\x00\x01", 2), "field number 0");
  ExpectRefused(std::string("\x57", 1), "invalid wire type 7");
  ExpectRefused(std::string("\xa3\x06", 2), "group 100 is not closed");
  // A round that is not a RoundKey.
  ExpectRefused(std::string("\x0a\x02\x0a\x05", 4), "round is not a RoundKey");
  // Well-formed bytes, invalid payloads.
  ExpectRefused(WithPayloadBytes(std::string("\x08\x07", 2)), "payload: payload kind 7 is not DENSE");
  ExpectRefused(WithPayloadBytes(std::string("\x08\x01\x10\x03\x22\x04", 6) + std::string(4, '\0')), "payload: ");
  ExpectRefused("", "payload: payload kind 0");
}

TEST(PushCodecTest, SketchesOfAnotherHashFamilyAreRefused) {
  std::mt19937_64 rng(9);
  const Payload sketch = RandomPayload(PayloadKind::kSketch, 4097, rng);
  v1::PushRequest message;
  *message.mutable_round() = Round(1, 0);
  PayloadToProto(sketch, message.mutable_payload());
  ASSERT_TRUE(DecodeBytes(message.SerializeAsString()).ok());
  for (uint32_t family : {0u, kSketchHashFamily + 1}) {
    message.mutable_payload()->mutable_sketch()->set_hash_family(family);
    absl::Status s = DecodeBytes(message.SerializeAsString());
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << family;
    EXPECT_NE(s.message().find(absl::StrCat("payload: the sketch payload uses Count-Sketch hash family ", family)),
              std::string::npos) << s;
  }
}

TEST(PushCodecTest, RepliesRoundTripThroughProtobuf) {
  std::mt19937_64 rng(6);
  for (uint64_t dim : kDims) {
    for (bool dense : {true, false}) {
      Payload random = RandomPayload(dense ? PayloadKind::kDense : PayloadKind::kSparse, dim, rng);
      auto update = std::make_shared<Update>();
      update->dense = dense;
      update->dim = dim;
      update->indices = random.indices;
      update->values = random.values;
      const grpc::ByteBuffer encoded = EncodePushReply(update, 4);
      v1::PushReply parsed;
      ASSERT_TRUE(parsed.ParseFromString(Flatten(encoded)));
      v1::PushReply expected;
      UpdateToProto(*update, expected.mutable_update());
      expected.set_contributors(4);
      expected.set_sketch_hash_family(kSketchHashFamily);
      EXPECT_TRUE(MessageDifferencer::Equals(parsed, expected));
      absl::StatusOr<PushReplyParts> back = DecodePushReply(Sliced(expected.SerializeAsString(), rng), dim);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(back->contributors, 4u);
      EXPECT_EQ(back->sketch_hash_family, kSketchHashFamily);
      EXPECT_EQ(back->update.dense, dense);
      EXPECT_EQ(back->update.dim, dim);
      EXPECT_EQ(back->update.indices, update->indices);
      EXPECT_EQ(back->update.values, update->values);
    }
  }
}

TEST(PushCodecTest, MalformedRepliesAreRefused) {
  std::mt19937_64 rng(7);
  // A sparse update whose index is outside its dim.
  v1::PushReply reply;
  reply.mutable_update()->set_dim(4);
  reply.mutable_update()->add_indices(9);
  reply.mutable_update()->add_values(1);
  absl::Status s = DecodePushReply(Sliced(reply.SerializeAsString(), rng), 4).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("update: "), std::string::npos) << s;
  std::string bytes = reply.SerializeAsString();
  bytes.pop_back();
  s = DecodePushReply(Sliced(bytes, rng), 4).status();
  EXPECT_NE(s.message().find("malformed PushReply: update claims 11 bytes but 10 are left"), std::string::npos) << s;
  // Indices without values: a candidate list, whose indices must ascend
  // within the dim too.
  v1::PushReply listed;
  listed.mutable_update()->set_dim(10);
  listed.mutable_update()->add_indices(7);
  listed.mutable_update()->add_indices(3);
  s = DecodePushReply(Sliced(listed.SerializeAsString(), rng), 10).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("update: candidate indices[1] = 3 is out of range or not ascending"), std::string::npos)
      << s;
  // Values for some indices but not all: neither an update nor a list.
  v1::PushReply short_values;
  short_values.mutable_update()->set_dim(10);
  short_values.mutable_update()->add_indices(3);
  short_values.mutable_update()->add_indices(7);
  short_values.mutable_update()->add_values(1);
  s = DecodePushReply(Sliced(short_values.SerializeAsString(), rng), 10).status();
  EXPECT_NE(s.message().find("sparse update has 2 indices but 1 values"), std::string::npos) << s;
}

// A push of candidate values may be a low-rank method's factor round, whose
// answer is a dense vector of the factors' length, below the group's dim;
// every other reply holds the group's dim, and a factor answer is dense.
TEST(PushCodecTest, AFactorRoundsAnswerMayBeShorterThanTheGroupAndDenseOnly) {
  std::mt19937_64 rng(8);
  v1::PushReply factors;
  factors.set_sketch_hash_family(kSketchHashFamily);
  factors.mutable_update()->set_dense(true);
  factors.mutable_update()->set_dim(3);
  for (float v : {1.0f, 2.0f, 3.0f}) factors.mutable_update()->add_values(v);
  absl::StatusOr<PushReplyParts> back =
      DecodePushReply(Sliced(factors.SerializeAsString(), rng), 10, ReplyDim::kFactorsAtMostGroup);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->update.values, (std::vector<float>{1, 2, 3}));
  absl::Status s = DecodePushReply(Sliced(factors.SerializeAsString(), rng), 10).status();
  EXPECT_NE(s.message().find("update: dim 3 is not the group's 10"), std::string::npos) << s;
  s = DecodePushReply(Sliced(factors.SerializeAsString(), rng), 2, ReplyDim::kFactorsAtMostGroup).status();
  EXPECT_NE(s.message().find("dim 3 is not the group's 2 (nor a dense answer of factors below it)"),
            std::string::npos)
      << s;
  v1::PushReply sparse;
  sparse.set_sketch_hash_family(kSketchHashFamily);
  sparse.mutable_update()->set_dim(3);
  sparse.mutable_update()->add_indices(1);
  sparse.mutable_update()->add_values(1);
  s = DecodePushReply(Sliced(sparse.SerializeAsString(), rng), 10, ReplyDim::kFactorsAtMostGroup).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("nor a dense answer"), std::string::npos) << s;
}

// The codec writes ascending indices as gaps, as protobuf's side does
// (payload_convert.h): a candidate list of 1000 indices ~10^7 at gaps of 15
// costs a byte an index, not four.
TEST(PushCodecTest, AscendingIndicesTravelAsGaps) {
  std::mt19937_64 rng(12);
  auto listed = std::make_shared<Update>();
  listed->dim = 1 << 24;
  for (uint32_t i = 0; i < 1000; ++i) listed->indices.push_back(10'000'000 + 15 * i);
  const grpc::ByteBuffer encoded = EncodePushReply(listed, 2);
  v1::PushReply parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(encoded)));
  EXPECT_EQ(parsed.update().indices_size(), 0);
  EXPECT_EQ(parsed.update().index_gaps_size(), 1000);
  // 4 bytes for the first gap, 1 for each other one, and at most 20 of
  // framing (tags, lengths, dim, contributors, hash family).
  EXPECT_LE(encoded.Length(), 4 + 999 + 20u);
  absl::StatusOr<PushReplyParts> back = DecodePushReply(Sliced(Flatten(encoded), rng), listed->dim);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->update.indices, listed->indices);

  auto sparse = std::make_shared<Payload>();
  sparse->kind = PayloadKind::kSparse;
  sparse->dim = listed->dim;
  sparse->indices = listed->indices;
  sparse->values.assign(1000, -0.25f);
  const grpc::ByteBuffer request = EncodePushRequest(Round(sparse->dim, 0), 1, sparse);
  absl::StatusOr<PushRequestParts> parts = DecodePushRequest(Sliced(Flatten(request), rng));
  ASSERT_TRUE(parts.ok()) << parts.status();
  ExpectSamePayload(parts->payload, *sparse);
}

TEST(PushCodecTest, BadGapsAreRefusedNamingTheField) {
  std::mt19937_64 rng(13);
  v1::PushReply reply;
  reply.mutable_update()->set_dim(50);
  reply.mutable_update()->add_index_gaps(4);
  reply.mutable_update()->add_index_gaps(0);
  absl::Status s = DecodePushReply(Sliced(reply.SerializeAsString(), rng), 50).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("update index_gaps[1] = 0"), std::string::npos) << s;
  reply.mutable_update()->set_index_gaps(1, 1);
  reply.mutable_update()->add_indices(2);
  s = DecodePushReply(Sliced(reply.SerializeAsString(), rng), 50).status();
  EXPECT_NE(s.message().find("update gives both indices and index_gaps"), std::string::npos) << s;

  v1::PushRequest request;
  *request.mutable_round() = Round(50, 0);
  v1::Payload* p = request.mutable_payload();
  p->set_kind(v1::Payload::SPARSE);
  p->set_dim(50);
  p->add_index_gaps(0xFFFFFFFFu);
  p->add_index_gaps(5);
  p->add_values(1);
  p->add_values(1);
  s = DecodePushRequest(Sliced(request.SerializeAsString(), rng)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("payload index_gaps[1] takes the index to 4294967300, past 2^32 - 1"),
            std::string::npos)
      << s;
}

// Indices without their values (packed 1-byte gaps, each decoded to 4
// bytes) are refused while decoding, past one per value the payload
// carries (counted ahead): a push cannot make the shard allocate more for
// its indices than its values' own bytes.
TEST(PushCodecTest, IndicesPastWhatTheirValuesCouldCarryAreRefusedWhileDecoding) {
  std::mt19937_64 rng(17);
  v1::PushRequest request;
  *request.mutable_round() = Round(50, 0);
  v1::Payload* p = request.mutable_payload();
  p->set_kind(v1::Payload::SPARSE);
  p->set_dim(4000000);
  for (int i = 0; i < 300000; ++i) p->add_index_gaps(1);
  p->add_values(1);
  absl::Status s = DecodePushRequest(Sliced(request.SerializeAsString(), rng)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("index_gaps holds more than 1 values, the most this message allows (one per value it "
                             "carries)"),
            std::string::npos)
      << s;
  // The same as plain indices.
  p->clear_index_gaps();
  for (int i = 0; i < 300000; ++i) p->add_indices(i);
  s = DecodePushRequest(Sliced(request.SerializeAsString(), rng)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("indices holds more than"), std::string::npos) << s;
  // With a value each, as many indices decode.
  p->clear_indices();
  for (int i = 0; i < 300000; ++i) {
    p->add_index_gaps(i == 0 ? 0 : 1);
    if (i > 0) p->add_values(1);
  }
  absl::StatusOr<PushRequestParts> parts = DecodePushRequest(Sliced(request.SerializeAsString(), rng));
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(parts->payload.indices.size(), 300000u);
  // Values counted wherever they stand, packed or not: before the indices,
  // after them, in another occurrence of the payload (merged).
  v1::PushRequest later;
  *later.mutable_round() = Round(50, 0);
  later.mutable_payload()->set_kind(v1::Payload::SPARSE);
  later.mutable_payload()->set_dim(100);
  for (uint32_t i = 0; i < 10; ++i) later.mutable_payload()->add_index_gaps(i == 0 ? 3 : 1);
  std::string bytes = later.SerializeAsString();
  v1::PushRequest values;
  for (int i = 0; i < 10; ++i) values.mutable_payload()->add_values(0.5f);
  bytes += values.SerializeAsString();  // merged: the values' field after the gaps
  parts = DecodePushRequest(Sliced(bytes, rng));
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(parts->payload.indices, (std::vector<uint32_t>{3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  // bfloat16 values are a sketch's cells: they license no indices (a
  // sparse payload's entries are 5 bytes on the wire at least, 3 with them).
  v1::PushRequest bf16;
  bf16.mutable_payload()->set_bf16_values(std::string(20, '\0'));  // ten bfloat16 zeros
  s = DecodePushRequest(Sliced(later.SerializeAsString() + bf16.SerializeAsString(), rng)).status();
  EXPECT_NE(s.message().find("index_gaps holds more than 0 values"), std::string::npos) << s;
  // A malformed tail does not lift the bound: a request the count ahead
  // cannot read licenses no index, so its first index is refused.
  std::string tail = request.SerializeAsString();
  tail += std::string("\x1a\x05\x12", 3);  // a payload field claiming 5 bytes, 1 there
  s = DecodePushRequest(Sliced(tail, rng)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("index_gaps holds more than 0 values"), std::string::npos) << s;
}

// A shard's reply cannot make the worker allocate past its group: a reply
// of another dim is refused, and its indices (a candidate list carries no
// values) are refused while decoding past the group's elements.
TEST(PushCodecTest, ARepliesIndicesAreBoundedByTheGroupsSize) {
  std::mt19937_64 rng(19);
  v1::PushReply reply;
  reply.set_sketch_hash_family(kSketchHashFamily);
  reply.mutable_update()->set_dim(1000);
  for (int i = 0; i < 1000; ++i) reply.mutable_update()->add_index_gaps(i == 0 ? 0 : 1);
  absl::StatusOr<PushReplyParts> whole = DecodePushReply(Sliced(reply.SerializeAsString(), rng), 1000);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->update.indices.size(), 1000u);
  absl::Status s = DecodePushReply(Sliced(reply.SerializeAsString(), rng), 999).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("index_gaps holds more than 999 values, the most this message allows (one per element "
                             "of the group)"),
            std::string::npos)
      << s;
  // A reply claiming a huge dim with a million 1-byte gaps: refused at the
  // group's size, not decoded to four million bytes.
  reply.mutable_update()->set_dim(uint64_t{1} << 40);
  for (int i = 0; i < 1000000; ++i) reply.mutable_update()->add_index_gaps(1);
  s = DecodePushReply(Sliced(reply.SerializeAsString(), rng), 5000).status();
  EXPECT_NE(s.message().find("holds more than 5000 values"), std::string::npos) << s;
  reply.mutable_update()->clear_index_gaps();
  s = DecodePushReply(Sliced(reply.SerializeAsString(), rng), 5000).status();
  EXPECT_NE(s.message().find("update: dim 1099511627776 is not the group's 5000"), std::string::npos) << s;
}

// A sketch whose cells bfloat16 holds exactly (a table count_sketch
// rounded with table=bf16) goes at 2 bytes a cell, as protobuf serializes
// it through PayloadToProto, and decodes to the same floats.
TEST(PushCodecTest, ValuesBfloat16HoldsTravelAtTwoBytes) {
  std::mt19937_64 rng(14);
  auto table = std::make_shared<Payload>(RandomPayload(PayloadKind::kSketch, 5000, rng));
  const size_t float_bytes = EncodePushRequest(Round(1, 0), 2, table).Length();
  auto rounded = std::make_shared<Payload>(*table);
  RoundToBf16(absl::MakeSpan(rounded->values));
  const grpc::ByteBuffer encoded = EncodePushRequest(Round(1, 0), 2, rounded);
  // 2 bytes a value fewer, give or take a byte of each of the two lengths.
  EXPECT_GE(float_bytes - encoded.Length() + 2, 2 * table->values.size());
  EXPECT_LE(float_bytes - encoded.Length(), 2 * table->values.size() + 2);
  v1::PushRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(encoded)));
  v1::PushRequest expected;
  *expected.mutable_round() = Round(1, 0);
  expected.set_worker(2);
  PayloadToProto(*rounded, expected.mutable_payload());
  EXPECT_TRUE(MessageDifferencer::Equals(parsed, expected));
  EXPECT_EQ(parsed.payload().values_size(), 0);
  EXPECT_EQ(parsed.payload().bf16_values().size(), 2 * rounded->values.size());
  absl::StatusOr<PushRequestParts> back = DecodePushRequest(Sliced(Flatten(encoded), rng));
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSamePayload(back->payload, *rounded);
  // Other kinds go as float32 whatever their values, so their bytes never
  // depend on them: a dense group of ones, which bfloat16 holds exactly.
  auto ones = std::make_shared<Payload>();
  ones->kind = PayloadKind::kDense;
  ones->dim = 100;
  ones->values.assign(100, 1.0f);
  v1::PushRequest dense;
  ASSERT_TRUE(dense.ParseFromString(Flatten(EncodePushRequest(Round(1, 0), 2, ones))));
  EXPECT_EQ(dense.payload().values_size(), 100);
  EXPECT_TRUE(dense.payload().bf16_values().empty());
}

TEST(PushCodecTest, BadBf16ValuesAreRefusedNamingTheField) {
  std::mt19937_64 rng(15);
  v1::PushRequest request;
  *request.mutable_round() = Round(1, 0);
  v1::Payload* p = request.mutable_payload();
  p->set_kind(v1::Payload::DENSE);
  p->set_dim(2);
  p->set_bf16_values(std::string("\x80\x3f\x00", 3));
  absl::Status s = DecodePushRequest(Sliced(request.SerializeAsString(), rng)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("payload bf16_values has 3 bytes, not two a value"), std::string::npos) << s;
  p->set_bf16_values(std::string("\x80\x3f", 2));
  p->add_values(1);
  s = DecodePushRequest(Sliced(request.SerializeAsString(), rng)).status();
  EXPECT_NE(s.message().find("payload gives both values and bf16_values"), std::string::npos) << s;
  // Two bf16 values for a dense group of 2: 1.0 and 1.0.
  p->clear_values();
  p->set_bf16_values(std::string("\x80\x3f\x80\x3f", 4));
  absl::StatusOr<PushRequestParts> parts = DecodePushRequest(Sliced(request.SerializeAsString(), rng));
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(parts->payload.values, std::vector<float>({1.0f, 1.0f}));
}

// The first answer of a two-round group lists its candidates without the
// estimates (the workers need only the indices): it decodes as a candidate
// list, and costs 4 bytes a candidate less than the answer with values.
TEST(PushCodecTest, ACandidateListTravelsWithoutValues) {
  std::mt19937_64 rng(11);
  auto listed = std::make_shared<Update>();
  listed->dim = 5000;
  for (uint32_t i = 0; i < 5000; i += 50) listed->indices.push_back(i);
  auto with_values = std::make_shared<Update>(*listed);
  with_values->values.assign(listed->indices.size(), 1.5f);
  const grpc::ByteBuffer encoded = EncodePushReply(listed, 3);
  // The values, their field's tag and length, and a longer submessage length.
  const size_t saved = EncodePushReply(with_values, 3).Length() - encoded.Length();
  EXPECT_GE(saved, 4 * listed->indices.size());
  EXPECT_LE(saved, 4 * listed->indices.size() + 6);
  absl::StatusOr<PushReplyParts> back = DecodePushReply(Sliced(Flatten(encoded), rng), listed->dim);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(IsCandidateList(back->update));
  EXPECT_EQ(back->update.indices, listed->indices);
  EXPECT_TRUE(back->update.values.empty());
}

// A shard of another build answers with sums decoded by another hash family:
// the worker refuses them by name instead of applying them.
TEST(PushCodecTest, RepliesOfAnotherHashFamilyAreRefused) {
  std::mt19937_64 rng(10);
  v1::PushReply reply;
  reply.mutable_update()->set_dim(4);
  reply.mutable_update()->add_indices(2);
  reply.mutable_update()->add_values(1);
  reply.set_contributors(2);
  for (uint32_t family : {0u, kSketchHashFamily + 1}) {
    reply.set_sketch_hash_family(family);
    absl::Status s = DecodePushReply(Sliced(reply.SerializeAsString(), rng), 4).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << family;
    EXPECT_NE(s.message().find(absl::StrCat("the shard's reply uses Count-Sketch hash family ", family)),
              std::string::npos) << s;
  }
  reply.set_sketch_hash_family(kSketchHashFamily);
  EXPECT_TRUE(DecodePushReply(Sliced(reply.SerializeAsString(), rng), 4).ok());
}

TEST(PushCodecTest, TheBufferKeepsTheValuesAliveAndDoesNotCopyThem) {
  std::mt19937_64 rng(8);
  auto payload = std::make_shared<Payload>(RandomPayload(PayloadKind::kDense, 1000, rng));
  const float* values = payload->values.data();
  std::weak_ptr<Payload> watch = payload;
  auto buffer = std::make_unique<grpc::ByteBuffer>(EncodePushRequest(Round(1, 0), 0, std::move(payload)));
  EXPECT_FALSE(watch.expired());
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer->Dump(&slices).ok());
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(static_cast<const void*>(slices[1].begin()), static_cast<const void*>(values));
  slices.clear();
  grpc::ByteBuffer copy = *buffer;  // a copy shares the slices
  buffer.reset();
  EXPECT_FALSE(watch.expired());
  copy.Clear();
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace sketchfuse
