// The wire format reader and writer against protobuf's own CodedOutputStream
// (the reference), on random fields of every wire type, in buffers split
// into slices at random places; and on cut-off and hostile bytes.
#include "proto/wire_format.h"

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace wire {
namespace {

using google::protobuf::io::CodedOutputStream;
using google::protobuf::io::StringOutputStream;

// `bytes` as a buffer of slices cut at random places (some empty).
grpc::ByteBuffer Sliced(const std::string& bytes, std::mt19937& rng) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t n = std::min<size_t>(bytes.size() - at, rng() % 7);
    slices.emplace_back(bytes.data() + at, n);
    at += n;
  }
  if (slices.empty()) slices.emplace_back("", 0);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

TEST(WireFormatTest, VarintsMatchProtobufAndReadBackAcrossSlices) {
  std::mt19937 rng(1);
  const std::vector<uint64_t> values = {0, 1, 127, 128, 300, (1u << 21) - 1, 1u << 21, UINT32_MAX,
                                        uint64_t{1} << 63, std::numeric_limits<uint64_t>::max()};
  std::string ours, reference;
  for (uint64_t v : values) PutVarint(v, &ours);
  {
    StringOutputStream stream(&reference);
    CodedOutputStream out(&stream);
    for (uint64_t v : values) out.WriteVarint64(v);
  }
  EXPECT_EQ(ours, reference);
  for (int trial = 0; trial < 20; ++trial) {
    SliceReader reader(Sliced(ours, rng));
    for (uint64_t v : values) {
      uint64_t got = 0;
      ASSERT_TRUE(reader.ReadVarint(&got));
      EXPECT_EQ(got, v);
    }
    EXPECT_EQ(reader.position(), reader.size());
  }
}

TEST(WireFormatTest, VarintsOverTenBytesOrCutOffAreRefused) {
  std::mt19937 rng(2);
  uint64_t v = 0;
  SliceReader eleven(Sliced(std::string(10, '\xff') + '\x01', rng));
  EXPECT_FALSE(eleven.ReadVarint(&v));
  SliceReader too_big(Sliced(std::string(9, '\xff') + '\x02', rng));  // past 2^64
  EXPECT_FALSE(too_big.ReadVarint(&v));
  SliceReader cut(Sliced("\x80\x80", rng));
  EXPECT_FALSE(cut.ReadVarint(&v));
  SliceReader empty(Sliced("", rng));
  EXPECT_FALSE(empty.ReadVarint(&v));
}

// A random message of fields 1 (varint), 2 (bytes), 3 (packed uint32), 4
// (floats, packed or not), 5 (submessage of a varint), written by protobuf,
// with unknown fields of every wire type (groups included) between them.
struct Expected {
  std::vector<uint64_t> varints;
  std::vector<std::string> bytes;
  std::vector<uint32_t> indices;
  std::vector<float> floats;
  std::vector<uint64_t> nested;
};

std::string RandomMessage(std::mt19937& rng, Expected* expected) {
  std::string message;
  StringOutputStream stream(&message);
  CodedOutputStream out(&stream);
  const int fields = 1 + rng() % 12;
  for (int f = 0; f < fields; ++f) {
    switch (rng() % 7) {
      case 0: {
        const uint64_t v = (uint64_t{rng()} << 32 | rng()) >> (rng() % 64);
        out.WriteTag(1 << 3 | kVarint);
        out.WriteVarint64(v);
        expected->varints.push_back(v);
        break;
      }
      case 1: {
        std::string b(rng() % 40, 'x');
        for (char& c : b) c = static_cast<char>(rng());
        out.WriteTag(2 << 3 | kLengthDelimited);
        out.WriteVarint32(static_cast<uint32_t>(b.size()));
        out.WriteString(b);
        expected->bytes.push_back(b);
        break;
      }
      case 2: {
        std::string packed;
        {
          StringOutputStream s(&packed);
          CodedOutputStream o(&s);
          for (int i = rng() % 20; i > 0; --i) {
            const uint32_t v = rng() >> (rng() % 32);
            o.WriteVarint32(v);
            expected->indices.push_back(v);
          }
        }
        out.WriteTag(3 << 3 | kLengthDelimited);
        out.WriteVarint32(static_cast<uint32_t>(packed.size()));
        out.WriteString(packed);
        break;
      }
      case 3: {
        if (rng() % 2) {
          const float v = static_cast<float>(rng()) / 7.0f;
          out.WriteTag(4 << 3 | kFixed32);
          uint32_t bits;
          std::memcpy(&bits, &v, 4);
          out.WriteLittleEndian32(bits);
          expected->floats.push_back(v);
        } else {
          const int n = rng() % 20;
          out.WriteTag(4 << 3 | kLengthDelimited);
          out.WriteVarint32(static_cast<uint32_t>(4 * n));
          for (int i = 0; i < n; ++i) {
            const float v = static_cast<float>(rng()) / 3.0f;
            uint32_t bits;
            std::memcpy(&bits, &v, 4);
            out.WriteLittleEndian32(bits);
            expected->floats.push_back(v);
          }
        }
        break;
      }
      case 4: {
        std::string sub;
        const uint64_t v = rng();
        {
          StringOutputStream s(&sub);
          CodedOutputStream o(&s);
          o.WriteTag(1 << 3 | kVarint);
          o.WriteVarint64(v);
          o.WriteTag(9 << 3 | kFixed64);  // unknown inside the submessage
          o.WriteLittleEndian64(rng());
        }
        out.WriteTag(5 << 3 | kLengthDelimited);
        out.WriteVarint32(static_cast<uint32_t>(sub.size()));
        out.WriteString(sub);
        expected->nested.push_back(v);
        break;
      }
      case 5: {  // unknown scalar fields
        const uint32_t number = 10 + rng() % 1000;
        out.WriteTag(number << 3 | kFixed64);
        out.WriteLittleEndian64(rng());
        out.WriteTag((number + 1) << 3 | kFixed32);
        out.WriteLittleEndian32(rng());
        out.WriteTag((number + 2) << 3 | kVarint);
        out.WriteVarint64(rng());
        break;
      }
      case 6: {  // an unknown group holding a nested group and a string
        out.WriteTag(20 << 3 | kStartGroup);
        out.WriteTag(21 << 3 | kStartGroup);
        out.WriteTag(1 << 3 | kVarint);
        out.WriteVarint64(rng());
        out.WriteTag(21 << 3 | kEndGroup);
        out.WriteTag(2 << 3 | kLengthDelimited);
        out.WriteVarint32(3);
        out.WriteString("abc");
        out.WriteTag(20 << 3 | kEndGroup);
        break;
      }
    }
  }
  return message;
}

// Parses fields 1-5 as RandomMessage wrote them.
absl::Status ParseAll(SliceReader& reader, size_t end, Expected* got) {
  MessageParser m(&reader, end, "Test");
  return m.Parse([&](const Field& f) -> absl::Status {
    switch (f.number) {
      case 1: {
        uint64_t v = 0;
        RETURN_IF_ERROR(m.Varint(f, "varint", &v));
        got->varints.push_back(v);
        return absl::OkStatus();
      }
      case 2: {
        std::string b;
        RETURN_IF_ERROR(m.Bytes(f, "bytes", &b));
        got->bytes.push_back(b);
        return absl::OkStatus();
      }
      case 3:
        return m.Indices(f, "indices", &got->indices);
      case 4:
        return m.Floats(f, "floats", &got->floats);
      case 5: {
        size_t sub_end = 0;
        RETURN_IF_ERROR(m.Submessage(f, "sub", &sub_end));
        MessageParser sub(&reader, sub_end, "Test.sub");
        return sub.Parse([&](const Field& g) -> absl::Status {
          if (g.number != 1) return SkipThisField();
          uint64_t v = 0;
          RETURN_IF_ERROR(sub.Varint(g, "v", &v));
          got->nested.push_back(v);
          return absl::OkStatus();
        });
      }
      default:
        return SkipThisField();
    }
  });
}

TEST(WireFormatTest, ParsesWhatProtobufWritesSkippingUnknownFields) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 500; ++trial) {
    Expected expected, got;
    const std::string message = RandomMessage(rng, &expected);
    SliceReader reader(Sliced(message, rng));
    absl::Status status = ParseAll(reader, reader.size(), &got);
    ASSERT_TRUE(status.ok()) << "trial " << trial << ": " << status;
    EXPECT_EQ(got.varints, expected.varints);
    EXPECT_EQ(got.bytes, expected.bytes);
    EXPECT_EQ(got.indices, expected.indices);
    EXPECT_EQ(got.floats, expected.floats);
    EXPECT_EQ(got.nested, expected.nested);
  }
}

// Packed floats of many lengths, in slices of up to a few thousand bytes cut
// at random places, so runs of whole floats start at every alignment and
// floats straddle slices: the values read back bit for bit (NaN payloads
// included), appended after what the vector held.
TEST(WireFormatTest, PackedFloatsInLargeUnalignedSlicesReadBackExactly) {
  std::mt19937 rng(9);
  for (size_t count : {0u, 1u, 2u, 3u, 7u, 64u, 1000u, 4097u, 65536u}) {
    std::vector<uint32_t> bits(count);
    for (uint32_t& b : bits) b = rng();
    std::string message;
    {
      StringOutputStream stream(&message);
      CodedOutputStream out(&stream);
      out.WriteTag(4 << 3 | kLengthDelimited);
      out.WriteVarint32(static_cast<uint32_t>(count * 4));
      if (count > 0) out.WriteRaw(bits.data(), static_cast<int>(count * 4));  // no null pointer for 0
    }
    std::vector<grpc::Slice> slices;
    for (size_t at = 0; at < message.size();) {
      const size_t n = std::min<size_t>(message.size() - at, 1 + rng() % 5000);
      slices.emplace_back(message.data() + at, n);
      at += n;
    }
    if (slices.empty()) slices.emplace_back("", 0);
    SliceReader reader(grpc::ByteBuffer(slices.data(), slices.size()));
    std::vector<float> floats = {1.5f};  // appended after what is there
    MessageParser m(&reader, reader.size(), "Test");
    const absl::Status status = m.Parse([&](const Field& f) { return m.Floats(f, "floats", &floats); });
    ASSERT_TRUE(status.ok()) << count << ": " << status;
    ASSERT_EQ(floats.size(), count + 1);
    EXPECT_EQ(floats[0], 1.5f);
    for (size_t i = 0; i < count; ++i) {
      uint32_t got = 0;
      std::memcpy(&got, &floats[i + 1], 4);
      ASSERT_EQ(got, bits[i]) << "float " << i << " of " << count;
    }
  }
}

TEST(WireFormatTest, EveryCutInsideAFieldIsRefusedAndNothingIsReadPastTheEnd) {
  std::mt19937 rng(4);
  for (int trial = 0; trial < 100; ++trial) {
    Expected expected;
    const std::string message = RandomMessage(rng, &expected);
    for (size_t cut = 0; cut < message.size(); ++cut) {
      Expected got;
      SliceReader reader(Sliced(message.substr(0, cut), rng));
      absl::Status status = ParseAll(reader, reader.size(), &got);
      // A cut at a field boundary is a shorter valid message; any other is
      // malformed, and says so.
      if (!status.ok()) {
        EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
        EXPECT_NE(status.message().find("malformed Test"), absl::string_view::npos) << status;
      }
      EXPECT_LE(reader.position(), cut);
    }
  }
}

TEST(WireFormatTest, HostileFieldsAreRefusedNamingTheProblem) {
  std::mt19937 rng(5);
  auto parse = [&](const std::string& bytes) {
    Expected got;
    SliceReader reader(Sliced(bytes, rng));
    return ParseAll(reader, reader.size(), &got);
  };
  std::string wrong_type;
  PutTag(1, kLengthDelimited, &wrong_type);
  PutVarint(0, &wrong_type);
  EXPECT_NE(parse(wrong_type).message().find("varint (field 1) has wire type 2, not 0"), std::string::npos);
  std::string too_long;
  PutTag(2, kLengthDelimited, &too_long);
  PutVarint(1000, &too_long);
  too_long += "abc";
  EXPECT_NE(parse(too_long).message().find("bytes claims 1000 bytes but 3 are left"), std::string::npos);
  std::string odd_floats;
  PutTag(4, kLengthDelimited, &odd_floats);
  PutVarint(5, &odd_floats);
  odd_floats += "12345";
  EXPECT_NE(parse(odd_floats).message().find("not a multiple of 4"), std::string::npos);
  std::string field_zero;
  PutVarint(0, &field_zero);
  EXPECT_NE(parse(field_zero).message().find("field number 0 is out of range"), std::string::npos);
  std::string unclosed;
  PutTag(30, kStartGroup, &unclosed);
  EXPECT_NE(parse(unclosed).message().find("group 30 is not closed"), std::string::npos);
  std::string mismatched;
  PutTag(30, kStartGroup, &mismatched);
  PutTag(31, kEndGroup, &mismatched);
  EXPECT_NE(parse(mismatched).message().find("end of group 31 without its start"), std::string::npos);
  std::string deep;
  for (int i = 0; i < 101; ++i) PutTag(40, kStartGroup, &deep);
  EXPECT_NE(parse(deep).message().find("nested too deeply"), std::string::npos);
  std::string index_too_big;
  PutTag(3, kLengthDelimited, &index_too_big);
  std::string packed;
  PutVarint(uint64_t{1} << 40, &packed);
  PutVarint(packed.size(), &index_too_big);
  index_too_big += packed;
  EXPECT_NE(parse(index_too_big).message().find("indices[0] = 1099511627776 does not fit 32 bits"), std::string::npos);
}

TEST(WireFormatTest, WritersMatchProtobuf) {
  std::string ours, reference;
  PutVarintField(1, 0, &ours);  // proto3: a default is left out
  PutVarintField(2, 300, &ours);
  PutBytesField(3, "abc", &ours);
  PutPackedIndices(4, {1, 200, 70000}, &ours);
  {
    StringOutputStream stream(&reference);
    CodedOutputStream out(&stream);
    out.WriteTag(2 << 3 | kVarint);
    out.WriteVarint64(300);
    out.WriteTag(3 << 3 | kLengthDelimited);
    out.WriteVarint32(3);
    out.WriteString("abc");
    out.WriteTag(4 << 3 | kLengthDelimited);
    out.WriteVarint32(1 + 2 + 3);
    out.WriteVarint32(1);
    out.WriteVarint32(200);
    out.WriteVarint32(70000);
  }
  EXPECT_EQ(ours, reference);

  // A header then floats that stay where they are, read back as packed.
  auto values = std::make_shared<const std::vector<float>>(std::vector<float>{1.5f, -2.0f, 3.25f});
  std::string fields;
  PutValuesHeader(4, *values, &fields);
  std::string header;
  PutSubmessageBeforeValues(7, fields, *values, &header);
  grpc::ByteBuffer buffer = HeaderThenValues(header, *values, values);
  SliceReader reader(buffer);
  std::vector<float> got;
  MessageParser m(&reader, reader.size(), "Outer");
  ASSERT_TRUE(m.Parse([&](const Field& f) -> absl::Status {
                 size_t end = 0;
                 RETURN_IF_ERROR(m.Submessage(f, "sub", &end));
                 MessageParser sub(&reader, end, "Outer.sub");
                 return sub.Parse([&](const Field& g) { return sub.Floats(g, "values", &got); });
               }).ok());
  EXPECT_EQ(got, *values);
}

}  // namespace
}  // namespace wire
}  // namespace sketchfuse
