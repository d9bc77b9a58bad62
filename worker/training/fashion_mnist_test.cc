// The Fashion-MNIST loader: the real files load with the expected sizes,
// labels and pixel statistics; sharding is disjoint and covering; every kind
// of malformed file gives an error naming the file and the problem.
#include "worker/training/fashion_mnist.h"

#include <stdlib.h>
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

using ::testing::HasSubstr;

// ---------------------------------------------------------------------------
// Real files (dataset-fashion-mnist).

class RealFashionMnistTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    train_ = new absl::StatusOr<ImageDataset>(LoadFashionMnist(kFashionMnistDir, Split::kTrain));
    test_ = new absl::StatusOr<ImageDataset>(LoadFashionMnist(kFashionMnistDir, Split::kTest));
  }
  static void TearDownTestSuite() {
    delete train_;
    delete test_;
  }

  static absl::StatusOr<ImageDataset>* train_;
  static absl::StatusOr<ImageDataset>* test_;
};

absl::StatusOr<ImageDataset>* RealFashionMnistTest::train_ = nullptr;
absl::StatusOr<ImageDataset>* RealFashionMnistTest::test_ = nullptr;

void CheckRealSplit(const ImageDataset& data, int64_t n) {
  ASSERT_EQ(data.size(), n);
  EXPECT_EQ(data.images.sizes(), (std::vector<int64_t>{n, 1, 28, 28}));
  EXPECT_EQ(data.images.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(data.images.is_contiguous());
  EXPECT_EQ(data.labels.sizes(), (std::vector<int64_t>{n}));
  EXPECT_EQ(data.labels.scalar_type(), torch::kInt64);
  EXPECT_GE(data.labels.min().item<int64_t>(), 0);
  EXPECT_LE(data.labels.max().item<int64_t>(), 9);
  // Fashion-MNIST is balanced: every class has exactly n / 10 examples.
  const torch::Tensor counts = torch::bincount(data.labels, {}, 10);
  for (int c = 0; c < 10; ++c) EXPECT_EQ(counts[c].item<int64_t>(), n / 10) << "class " << c;
  // Normalized with the training-set statistics: mean ~0, std ~1; the pixel
  // extremes 0 and 255 are present.
  const double mean = data.images.mean().item<double>();
  const double std = data.images.std().item<double>();
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std, 1.0, 0.01);
  EXPECT_NEAR(data.images.min().item<double>(), (0.0 - 0.2860) / 0.3530, 1e-5);
  EXPECT_NEAR(data.images.max().item<double>(), (1.0 - 0.2860) / 0.3530, 1e-5);
}

TEST_F(RealFashionMnistTest, TrainSplitLoads) {
  ASSERT_TRUE(train_->ok()) << train_->status();
  CheckRealSplit(**train_, 60000);
  // The first training image is an ankle boot (class 9).
  EXPECT_EQ((*train_)->labels[0].item<int64_t>(), 9);
}

TEST_F(RealFashionMnistTest, TestSplitLoads) {
  ASSERT_TRUE(test_->ok()) << test_->status();
  CheckRealSplit(**test_, 10000);
  EXPECT_EQ((*test_)->labels[0].item<int64_t>(), 9);
}

TEST_F(RealFashionMnistTest, ShardsOfTrainSplitCoverIt) {
  ASSERT_TRUE(train_->ok()) << train_->status();
  int64_t total = 0;
  torch::Tensor counts = torch::zeros({10}, torch::kInt64);
  for (int rank = 0; rank < 4; ++rank) {
    absl::StatusOr<ImageDataset> shard = ShardOf(**train_, rank, 4);
    ASSERT_TRUE(shard.ok()) << shard.status();
    EXPECT_EQ(shard->size(), 15000);
    EXPECT_TRUE(torch::equal(shard->images[1], (*train_)->images[rank + 4]));
    total += shard->size();
    counts += torch::bincount(shard->labels, {}, 10);
  }
  EXPECT_EQ(total, 60000);
  EXPECT_TRUE(torch::equal(counts, torch::full({10}, 6000, torch::kInt64)));
}

TEST_F(RealFashionMnistTest, HeadTakesThePrefix) {
  ASSERT_TRUE(train_->ok()) << train_->status();
  const ImageDataset head = Head(**train_, 100);
  EXPECT_EQ(head.size(), 100);
  EXPECT_EQ(head.images.size(0), 100);
  EXPECT_TRUE(torch::equal(head.images, (*train_)->images.slice(0, 0, 100)));
  EXPECT_TRUE(torch::equal(head.labels, (*train_)->labels.slice(0, 0, 100)));
  EXPECT_EQ(Head(**train_, 1000000).size(), 60000);
  EXPECT_EQ(Head(**train_, -5).size(), 0);
}

// ---------------------------------------------------------------------------
// Sharding on a synthetic dataset whose row i is all i.

ImageDataset Synthetic(int64_t n) {
  ImageDataset data;
  data.images =
      torch::arange(n, torch::kFloat32).view({n, 1, 1, 1}).expand({n, 1, 28, 28}).contiguous();
  data.labels = torch::arange(n, torch::kInt64).remainder(10);
  return data;
}

TEST(ShardOfTest, ShardsAreStridedDisjointAndCovering) {
  for (int64_t n : {0, 1, 7, 10, 23}) {
    const ImageDataset data = Synthetic(n);
    for (int world = 1; world <= 5; ++world) {
      std::set<int64_t> seen;
      for (int rank = 0; rank < world; ++rank) {
        absl::StatusOr<ImageDataset> shard = ShardOf(data, rank, world);
        ASSERT_TRUE(shard.ok()) << shard.status();
        ASSERT_EQ(shard->images.size(0), shard->size());
        const int64_t expected = n > rank ? (n - rank + world - 1) / world : 0;
        EXPECT_EQ(shard->size(), expected) << "n=" << n << " world=" << world << " rank=" << rank;
        for (int64_t j = 0; j < shard->size(); ++j) {
          const int64_t row = static_cast<int64_t>(shard->images[j][0][5][7].item<float>());
          EXPECT_EQ(row, rank + j * world);
          EXPECT_EQ(shard->labels[j].item<int64_t>(), row % 10);
          EXPECT_TRUE(seen.insert(row).second) << "row " << row << " in two shards";
        }
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), n) << "n=" << n << " world=" << world;
    }
  }
}

TEST(ShardOfTest, RejectsBadRankAndWorld) {
  const ImageDataset data = Synthetic(10);
  for (auto [rank, world] :
       std::vector<std::pair<int, int>>{{0, 0}, {0, -1}, {-1, 2}, {2, 2}, {5, 3}}) {
    absl::StatusOr<ImageDataset> shard = ShardOf(data, rank, world);
    ASSERT_FALSE(shard.ok()) << "rank=" << rank << " world=" << world;
    EXPECT_EQ(shard.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(shard.status().message()),
                ::testing::AnyOf(HasSubstr("rank"), HasSubstr("world")));
  }
}

TEST(ShardOfTest, RejectsInconsistentDataset) {
  ImageDataset data = Synthetic(10);
  data.labels = data.labels.slice(0, 0, 9);
  absl::StatusOr<ImageDataset> shard = ShardOf(data, 0, 2);
  ASSERT_FALSE(shard.ok());
  EXPECT_EQ(shard.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(shard.status().message()), HasSubstr("disagree"));
}

// ---------------------------------------------------------------------------
// Malformed files.

using Bytes = std::vector<uint8_t>;

void AppendBigEndian32(Bytes* b, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b->push_back(static_cast<uint8_t>(v >> shift));
}

Bytes IdxImages(uint32_t count, uint32_t rows = 28, uint32_t cols = 28, int64_t actual_images = -1,
                uint32_t magic = 0x00000803) {
  Bytes b;
  AppendBigEndian32(&b, magic);
  AppendBigEndian32(&b, count);
  AppendBigEndian32(&b, rows);
  AppendBigEndian32(&b, cols);
  const int64_t n = actual_images >= 0 ? actual_images : count;
  for (int64_t i = 0; i < n * rows * cols; ++i) b.push_back(static_cast<uint8_t>(i * 7 % 256));
  return b;
}

Bytes IdxLabels(const Bytes& labels, uint32_t magic = 0x00000801) {
  Bytes b;
  AppendBigEndian32(&b, magic);
  AppendBigEndian32(&b, static_cast<uint32_t>(labels.size()));
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

Bytes Gzip(const Bytes& raw) {
  uLongf size = compressBound(raw.size()) + 64;
  Bytes out(size);
  z_stream z = {};
  // windowBits 15 + 16: gzip wrapper.
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  z.next_in = const_cast<Bytes::value_type*>(raw.data());
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

class MalformedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/fashion_mnist_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }

  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  // Writes `bytes` as-is to dir_/name and returns the path.
  std::string WriteRaw(const std::string& name, const Bytes& bytes) {
    const std::string path = dir_ + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr) << path;
    if (f == nullptr) return path;
    if (!bytes.empty()) {
      EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    }
    std::fclose(f);
    return path;
  }

  std::string WriteGz(const std::string& name, const Bytes& raw) {
    return WriteRaw(name, Gzip(raw));
  }

  std::string dir_;
};

// Checks that `status` has `code` and a message naming `path` and containing
// `problem`.
void ExpectError(const absl::Status& status, absl::StatusCode code, const std::string& path,
                 const std::string& problem) {
  ASSERT_FALSE(status.ok()) << "expected an error about " << problem;
  EXPECT_EQ(status.code(), code) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
  EXPECT_THAT(std::string(status.message()), HasSubstr(problem));
}

TEST_F(MalformedFileTest, WellFormedSmallFilesLoad) {
  WriteGz("train-images-idx3-ubyte.gz", IdxImages(5));
  WriteGz("train-labels-idx1-ubyte.gz", IdxLabels({0, 9, 3, 3, 1}));
  absl::StatusOr<ImageDataset> data = LoadFashionMnist(dir_, Split::kTrain);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->size(), 5);
  EXPECT_EQ(data->labels.sizes(), (std::vector<int64_t>{5}));
  EXPECT_EQ(data->labels[1].item<int64_t>(), 9);
  // Pixel i of the payload is i * 7 % 256.
  const Bytes raw = IdxImages(5);
  for (int64_t i : {0, 1, 36, 784 + 5, 5 * 784 - 1}) {
    const float expected = (raw[16 + i] / 255.0f - 0.2860f) / 0.3530f;
    EXPECT_NEAR(data->images.view({-1})[i].item<float>(), expected, 1e-6) << i;
  }
}

TEST_F(MalformedFileTest, UncompressedIdxIsReadTransparently) {
  const std::string path = WriteRaw("images", IdxImages(3));
  absl::StatusOr<torch::Tensor> images = ReadIdxImages(path);
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ(images->sizes(), (std::vector<int64_t>{3, 28, 28}));
  EXPECT_EQ(images->scalar_type(), torch::kUInt8);
  EXPECT_EQ(images->view({-1})[100].item<int>(), 100 * 7 % 256);
}

TEST_F(MalformedFileTest, MissingFileIsNotFound) {
  const std::string missing_dir = dir_ + "/no_such_dir";
  absl::StatusOr<ImageDataset> data = LoadFashionMnist(missing_dir, Split::kTest);
  ExpectError(data.status(), absl::StatusCode::kNotFound,
              missing_dir + "/t10k-images-idx3-ubyte.gz", "no such file");
  // Images present, labels missing.
  WriteGz("t10k-images-idx3-ubyte.gz", IdxImages(2));
  data = LoadFashionMnist(dir_, Split::kTest);
  ExpectError(data.status(), absl::StatusCode::kNotFound, dir_ + "/t10k-labels-idx1-ubyte.gz",
              "no such file");
}

TEST_F(MalformedFileTest, DirectoryIsRejected) {
  ExpectError(ReadIdxImages(dir_).status(), absl::StatusCode::kInvalidArgument, dir_, "directory");
}

TEST_F(MalformedFileTest, NotGzipNotIdx) {
  const std::string text = "this is a plain text file, certainly not gzip nor IDX\n";
  const std::string path = WriteRaw("text.gz", Bytes(text.begin(), text.end()));
  const absl::Status status = ReadIdxImages(path).status();
  ExpectError(status, absl::StatusCode::kInvalidArgument, path, "bad magic number");
  EXPECT_THAT(std::string(status.message()), HasSubstr("not gzip-compressed"));
}

TEST_F(MalformedFileTest, CorruptGzipHeaderAndStream) {
  // A gzip magic followed by garbage.
  Bytes bytes = {0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0x03};
  for (int i = 0; i < 200; ++i) bytes.push_back(static_cast<uint8_t>(0xff - i));
  const std::string path = WriteRaw("garbage.gz", bytes);
  ExpectError(ReadIdxImages(path).status(), absl::StatusCode::kDataLoss, path, "corrupt gzip data");
}

TEST_F(MalformedFileTest, CorruptGzipPayloadFailsTheCheck) {
  // Flip bytes in the middle of a valid stream: either inflate fails or the
  // CRC-32 in the trailer does not match; never a silent success.
  Bytes gz = Gzip(IdxImages(50));
  ASSERT_GT(gz.size(), 200u);
  for (size_t i = gz.size() / 2; i < gz.size() / 2 + 8; ++i) gz[i] ^= 0x5a;
  const std::string path = WriteRaw("flipped.gz", gz);
  const absl::Status status = ReadIdxImages(path).status();
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
  EXPECT_THAT(std::string(status.message()), HasSubstr("gzip"));
}

TEST_F(MalformedFileTest, CorruptCrcIsDetected) {
  Bytes gz = Gzip(IdxLabels({1, 2, 3}));
  gz[gz.size() - 8] ^= 0xff;  // First byte of the CRC-32 trailer.
  const std::string path = WriteRaw("badcrc.gz", gz);
  ExpectError(ReadIdxLabels(path).status(), absl::StatusCode::kDataLoss, path,
              "incorrect data check");
}

TEST_F(MalformedFileTest, TruncatedGzipStream) {
  Bytes gz = Gzip(IdxImages(50));
  gz.resize(gz.size() / 2);
  const std::string path = WriteRaw("cut.gz", gz);
  ExpectError(ReadIdxImages(path).status(), absl::StatusCode::kDataLoss, path,
              "truncated gzip stream");
}

TEST_F(MalformedFileTest, BadMagicNumbers) {
  const std::string images_as_labels = WriteGz("labels.gz", IdxImages(2));
  ExpectError(ReadIdxLabels(images_as_labels).status(), absl::StatusCode::kInvalidArgument,
              images_as_labels, "bad magic number 0x00000803, expected 0x00000801");
  const std::string labels_as_images = WriteGz("images.gz", IdxLabels({1, 2}));
  ExpectError(ReadIdxImages(labels_as_images).status(), absl::StatusCode::kInvalidArgument,
              labels_as_images, "bad magic number 0x00000801, expected 0x00000803");
  const std::string other = WriteGz("other.gz", IdxImages(2, 28, 28, -1, 0x00000D03));
  ExpectError(ReadIdxImages(other).status(), absl::StatusCode::kInvalidArgument, other,
              "bad magic number 0x00000d03");
}

TEST_F(MalformedFileTest, WrongDimensions) {
  const std::string path = WriteGz("images.gz", IdxImages(2, 32, 32));
  ExpectError(ReadIdxImages(path).status(), absl::StatusCode::kInvalidArgument, path,
              "wrong image dimensions 32x32, expected 28x28");
  const std::string path2 = WriteGz("images2.gz", IdxImages(2, 28, 27));
  ExpectError(ReadIdxImages(path2).status(), absl::StatusCode::kInvalidArgument, path2,
              "wrong image dimensions 28x27");
}

TEST_F(MalformedFileTest, TruncatedHeader) {
  Bytes header = IdxImages(2);
  header.resize(10);
  const std::string path = WriteGz("images.gz", header);
  ExpectError(ReadIdxImages(path).status(), absl::StatusCode::kDataLoss, path,
              "truncated IDX header");
  const std::string empty = WriteRaw("empty", {});
  ExpectError(ReadIdxLabels(empty).status(), absl::StatusCode::kDataLoss, empty,
              "truncated IDX header");
}

TEST_F(MalformedFileTest, TruncatedData) {
  const std::string path = WriteGz("images.gz", IdxImages(10, 28, 28, 4));
  ExpectError(ReadIdxImages(path).status(), absl::StatusCode::kDataLoss, path,
              "truncated data: the header declares 10 images (7840 bytes) but the file holds "
              "only 3136 bytes");
  Bytes labels = IdxLabels({1, 2, 3, 4});
  labels.pop_back();
  const std::string path2 = WriteGz("labels.gz", labels);
  ExpectError(ReadIdxLabels(path2).status(), absl::StatusCode::kDataLoss, path2,
              "truncated data: the header declares 4 labels");
}

TEST_F(MalformedFileTest, TrailingGarbage) {
  Bytes images = IdxImages(2);
  images.push_back(0);
  const std::string path = WriteGz("images.gz", images);
  ExpectError(ReadIdxImages(path).status(), absl::StatusCode::kInvalidArgument, path,
              "trailing data after the 2 images");
  Bytes labels = IdxLabels({1, 2});
  labels.insert(labels.end(), {'j', 'u', 'n', 'k'});
  const std::string path2 = WriteGz("labels.gz", labels);
  ExpectError(ReadIdxLabels(path2).status(), absl::StatusCode::kInvalidArgument, path2,
              "trailing data after the 2 labels");
}

TEST_F(MalformedFileTest, AbsurdCountIsRejectedBeforeAllocating) {
  // Headers only: a loader that trusted the count would try to allocate
  // 3.4 TB (or, for the in-limit case, read on past the end).
  Bytes huge;
  AppendBigEndian32(&huge, 0x00000803);
  AppendBigEndian32(&huge, 0xFFFFFFFFu);
  AppendBigEndian32(&huge, 28);
  AppendBigEndian32(&huge, 28);
  const std::string path = WriteGz("huge.gz", huge);
  ExpectError(ReadIdxImages(path).status(), absl::StatusCode::kInvalidArgument, path,
              "the header declares 4294967295 images, more than the limit of 200000");

  Bytes just_over;
  AppendBigEndian32(&just_over, 0x00000801);
  AppendBigEndian32(&just_over, kMaxIdxItems + 1);
  const std::string path2 = WriteGz("over.gz", just_over);
  ExpectError(ReadIdxLabels(path2).status(), absl::StatusCode::kInvalidArgument, path2,
              "more than the limit");

  // At the limit the count is accepted, and the missing data is reported.
  Bytes at_limit;
  AppendBigEndian32(&at_limit, 0x00000803);
  AppendBigEndian32(&at_limit, kMaxIdxItems);
  AppendBigEndian32(&at_limit, 28);
  AppendBigEndian32(&at_limit, 28);
  const std::string path3 = WriteGz("limit.gz", at_limit);
  ExpectError(ReadIdxImages(path3).status(), absl::StatusCode::kDataLoss, path3, "truncated data");
}

TEST_F(MalformedFileTest, ZeroCountIsRejected) {
  const std::string path = WriteGz("labels.gz", IdxLabels({}));
  ExpectError(ReadIdxLabels(path).status(), absl::StatusCode::kInvalidArgument, path,
              "declares 0 labels");
}

TEST_F(MalformedFileTest, LabelOutOfRange) {
  const std::string path = WriteGz("labels.gz", IdxLabels({0, 9, 1, 10, 255}));
  ExpectError(ReadIdxLabels(path).status(), absl::StatusCode::kInvalidArgument, path,
              "label 10 at index 3 is out of range [0, 9]");
}

TEST_F(MalformedFileTest, ImageCountDiffersFromLabelCount) {
  WriteGz("t10k-images-idx3-ubyte.gz", IdxImages(5));
  WriteGz("t10k-labels-idx1-ubyte.gz", IdxLabels({1, 2, 3, 4}));
  const absl::Status status = LoadFashionMnist(dir_, Split::kTest).status();
  ExpectError(status, absl::StatusCode::kInvalidArgument, dir_ + "/t10k-images-idx3-ubyte.gz",
              "image count 5");
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("label count 4 in " + dir_ + "/t10k-labels-idx1-ubyte.gz"));
}

}  // namespace
}  // namespace sketchfuse
