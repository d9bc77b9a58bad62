#include "worker/training/fashion_mnist.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "torch/types.h"

namespace sketchfuse {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // IDX, unsigned byte, 3 dims.
constexpr uint32_t kLabelsMagic = 0x00000801;  // IDX, unsigned byte, 1 dim.

// Largest single gzread; pixel buffers grow by at most this much per read.
constexpr size_t kReadChunk = size_t{1} << 22;

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// A gzFile opened for reading, closed on destruction. Every error names the
// file.
class GzReader {
 public:
  static absl::StatusOr<std::unique_ptr<GzReader>> Open(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      const int err = errno;
      if (err == ENOENT || err == ENOTDIR) {
        return absl::NotFoundError(absl::StrCat(path, ": no such file"));
      }
      if (err == EACCES) {
        return absl::PermissionDeniedError(
            absl::StrCat(path, ": cannot access: ", std::strerror(err)));
      }
      return absl::DataLossError(absl::StrCat(path, ": cannot stat: ", std::strerror(err)));
    }
    if (S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a file"));
    }
    errno = 0;
    gzFile file = gzopen(path.c_str(), "rb");
    if (file == nullptr) {
      const int err = errno;
      if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
      if (err == EACCES) {
        return absl::PermissionDeniedError(
            absl::StrCat(path, ": cannot open: ", std::strerror(err)));
      }
      return absl::DataLossError(
          absl::StrCat(path, ": cannot open: ", err != 0 ? std::strerror(err) : "out of memory"));
    }
    gzbuffer(file, 1 << 17);
    return std::unique_ptr<GzReader>(new GzReader(path, file));
  }

  ~GzReader() { gzclose_r(file_); }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes into dst; fewer only at the end of the data. `what`
  // describes the bytes for error messages. DATA_LOSS on a corrupt or
  // truncated gzip stream or an I/O error.
  absl::StatusOr<size_t> Read(uint8_t* dst, size_t n, absl::string_view what) {
    size_t total = 0;
    while (total < n) {
      const unsigned want = static_cast<unsigned>(std::min(n - total, kReadChunk));
      const int got = gzread(file_, dst + total, want);
      if (got < 0) return ZlibError(what);
      if (got == 0) break;
      total += static_cast<size_t>(got);
    }
    // zlib decompresses ahead, so an error may already be recorded while the
    // bytes asked for were delivered; it is reported when a read comes up
    // short (gzread keeps returning -1 or 0 after it), so that the message
    // says which part of the file is missing or corrupt.
    if (total < n) {
      int errnum = Z_OK;
      gzerror(file_, &errnum);
      if (errnum != Z_OK) return ZlibError(what);
    }
    return total;
  }

  // True when the file is not gzip-compressed (valid after the first Read).
  bool direct() { return gzdirect(file_) != 0; }

  const std::string& path() const { return path_; }

 private:
  GzReader(std::string path, gzFile file) : path_(std::move(path)), file_(file) {}

  absl::Status ZlibError(absl::string_view what) {
    int errnum = Z_OK;
    const char* message = gzerror(file_, &errnum);
    if (errnum == Z_ERRNO) {
      return absl::DataLossError(
          absl::StrCat(path_, ": read error while reading ", what, ": ", std::strerror(errno)));
    }
    if (errnum == Z_BUF_ERROR) {
      return absl::DataLossError(absl::StrCat(
          path_, ": truncated gzip stream (compressed data ends early) while reading ", what));
    }
    absl::string_view detail = message != nullptr ? message : "unknown zlib error";
    // zlib prefixes its message with the path; the path is already first.
    absl::ConsumePrefix(&detail, absl::StrCat(path_, ": "));
    return absl::DataLossError(
        absl::StrCat(path_, ": corrupt gzip data while reading ", what, ": ", detail));
  }

  std::string path_;
  gzFile file_;
};

// What one IDX reader expects.
struct IdxKind {
  uint32_t magic;
  int num_dims;      // 3 for images, 1 for labels.
  const char* noun;  // "images" / "labels".
  const char* magic_name;
};

constexpr IdxKind kImagesKind = {kImagesMagic, 3, "images", "IDX3 unsigned-byte images"};
constexpr IdxKind kLabelsKind = {kLabelsMagic, 1, "labels", "IDX1 unsigned-byte labels"};

// Reads an IDX file of `kind`: checks the header, reads exactly the promised
// payload and checks that nothing follows it. Returns the item count and
// the payload bytes (count * item_bytes).
absl::StatusOr<std::pair<int64_t, std::vector<uint8_t>>> ReadIdx(const std::string& path,
                                                                 const IdxKind& kind) {
  ASSIGN_OR_RETURN(std::unique_ptr<GzReader> reader, GzReader::Open(path));

  uint8_t header[16];
  const size_t header_bytes = 4 + 4 * static_cast<size_t>(kind.num_dims);
  ASSIGN_OR_RETURN(const size_t got, reader->Read(header, header_bytes, "the IDX header"));
  if (got >= 4 && BigEndian32(header) != kind.magic) {
    const uint32_t magic = BigEndian32(header);
    std::string hint;
    if (magic == kImagesMagic || magic == kLabelsMagic) {
      hint = absl::StrCat(" (this looks like an IDX ", magic == kImagesMagic ? "images" : "labels",
                          " file)");
    } else if (reader->direct()) {
      hint = " (the file is not gzip-compressed, and not a raw IDX file either)";
    }
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: bad magic number 0x%08x, expected 0x%08x (%s)%s", path, magic,
                        kind.magic, kind.magic_name, hint));
  }
  if (got < header_bytes) {
    return absl::DataLossError(absl::StrFormat(
        "%s: truncated IDX header: %d bytes expected, the file holds only %d%s", path, header_bytes,
        got, reader->direct() ? " (and it is not gzip-compressed)" : ""));
  }

  const uint32_t count = BigEndian32(header + 4);
  size_t item_bytes = 1;
  if (kind.num_dims == 3) {
    const uint32_t rows = BigEndian32(header + 8);
    const uint32_t cols = BigEndian32(header + 12);
    if (rows != kImageSide || cols != kImageSide) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: wrong image dimensions %dx%d, expected %dx%d", path, rows, cols,
                          kImageSide, kImageSide));
    }
    item_bytes = static_cast<size_t>(kImageSide * kImageSide);
  }
  if (count == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: the header declares 0 %s", path, kind.noun));
  }
  if (count > kMaxIdxItems) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the header declares %d %s, more than the limit of %d (header count too large)", path,
        count, kind.noun, kMaxIdxItems));
  }

  // Grow the buffer as data arrives, so that a short file with a large count
  // never allocates what it does not hold.
  const size_t payload_bytes = static_cast<size_t>(count) * item_bytes;
  std::vector<uint8_t> payload;
  size_t have = 0;
  while (have < payload_bytes) {
    const size_t chunk = std::min(payload_bytes - have, kReadChunk);
    payload.resize(have + chunk);
    ASSIGN_OR_RETURN(const size_t n,
                     reader->Read(payload.data() + have, chunk, absl::StrCat("the ", kind.noun)));
    have += n;
    if (n < chunk) break;
  }
  if (have < payload_bytes) {
    return absl::DataLossError(absl::StrFormat(
        "%s: truncated data: the header declares %d %s (%d bytes) but the file holds only "
        "%d bytes of them",
        path, count, kind.noun, payload_bytes, have));
  }

  uint8_t extra;
  ASSIGN_OR_RETURN(const size_t trailing, reader->Read(&extra, 1, "the end of the file"));
  if (trailing != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: trailing data after the %d %s the header declares", path, count, kind.noun));
  }
  return std::make_pair(static_cast<int64_t>(count), std::move(payload));
}

absl::Status CheckConsistent(const ImageDataset& data) {
  if (!data.images.defined() || !data.labels.defined()) {
    return absl::InvalidArgumentError("dataset has undefined images or labels");
  }
  if (data.images.dim() < 1 || data.labels.dim() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("dataset has images of rank ", data.images.dim(),
                                                   " and labels of rank ", data.labels.dim(),
                                                   "; expected images [N, ...] and labels [N]"));
  }
  if (data.images.size(0) != data.labels.size(0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset images and labels disagree on the example count: ", data.images.size(0),
        " images, ", data.labels.size(0), " labels"));
  }
  return absl::OkStatus();
}

// A uint8 tensor that takes ownership of `bytes` (no copy: the pixel buffer
// of a large file is not duplicated).
torch::Tensor AdoptBytes(std::vector<uint8_t> bytes, torch::IntArrayRef sizes) {
  auto owned = std::make_unique<std::vector<uint8_t>>(std::move(bytes));
  std::vector<uint8_t>* raw = owned.get();
  torch::Tensor tensor = torch::from_blob(
      raw->data(), sizes, [raw](void*) { delete raw; }, torch::kUInt8);
  owned.release();  // The tensor's deleter owns it now.
  return tensor;
}

}  // namespace

absl::StatusOr<torch::Tensor> ReadIdxImages(const std::string& path) {
  ASSIGN_OR_RETURN(auto idx, ReadIdx(path, kImagesKind));
  return AdoptBytes(std::move(idx.second), {idx.first, kImageSide, kImageSide});
}

absl::StatusOr<torch::Tensor> ReadIdxLabels(const std::string& path) {
  ASSIGN_OR_RETURN(auto idx, ReadIdx(path, kLabelsKind));
  const std::vector<uint8_t>& labels = idx.second;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= kNumClasses) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: label %d at index %d is out of range [0, %d]", path, labels[i], i, kNumClasses - 1));
    }
  }
  return AdoptBytes(std::move(idx.second), {idx.first});
}

absl::StatusOr<ImageDataset> LoadFashionMnist(const std::string& dir, Split split) {
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  const std::string images_path = absl::StrCat(dir, "/", prefix, "-images-idx3-ubyte.gz");
  const std::string labels_path = absl::StrCat(dir, "/", prefix, "-labels-idx1-ubyte.gz");
  ASSIGN_OR_RETURN(torch::Tensor pixels, ReadIdxImages(images_path));
  ASSIGN_OR_RETURN(torch::Tensor labels, ReadIdxLabels(labels_path));
  if (pixels.size(0) != labels.size(0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("image count %d in %s != label count %d in %s", pixels.size(0), images_path,
                        labels.size(0), labels_path));
  }
  ImageDataset data;
  data.images = pixels.to(torch::kFloat32)
                    .div_(255.0f)
                    .sub_(kFashionMnistMean)
                    .div_(kFashionMnistStd)
                    .unsqueeze(1)
                    .contiguous();
  data.labels = labels.to(torch::kInt64);
  return data;
}

absl::StatusOr<ImageDataset> ShardOf(const ImageDataset& data, int rank, int world) {
  if (world < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ShardOf: world must be >= 1, got ", world));
  }
  if (rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShardOf: rank must be in [0, ", world, "), got ", rank));
  }
  RETURN_IF_ERROR(CheckConsistent(data));
  const torch::TensorOptions int64 = torch::TensorOptions().dtype(torch::kInt64);
  // arange refuses start > end, so a rank beyond the data gets an explicit
  // empty index.
  const torch::Tensor rows = rank < data.size()
                                 ? torch::arange(static_cast<int64_t>(rank), data.size(),
                                                 static_cast<int64_t>(world), int64)
                                 : torch::empty({0}, int64);
  ImageDataset shard;
  shard.images = data.images.index_select(0, rows);
  shard.labels = data.labels.index_select(0, rows);
  return shard;
}

ImageDataset Head(const ImageDataset& data, int64_t n) {
  const int64_t k = std::clamp<int64_t>(n, 0, data.size());
  ImageDataset head;
  if (data.images.defined()) head.images = data.images.slice(0, 0, k);
  if (data.labels.defined()) head.labels = data.labels.slice(0, 0, k);
  return head;
}

}  // namespace sketchfuse
