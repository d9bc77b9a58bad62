// Fashion-MNIST loader: reads the gzip IDX files of the Debian package
// dataset-fashion-mnist into LibTorch tensors, plus the sharding the workers
// use to split the training set.
//
// Files (in `dir`):
//   kTrain: train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz (60000)
//   kTest:  t10k-images-idx3-ubyte.gz,  t10k-labels-idx1-ubyte.gz  (10000)
// The files are read with zlib's gzread, which also reads an uncompressed IDX
// file transparently.
//
// Hostile input never crashes and never allocates more than the data it has
// actually read plus one chunk: the item count in a header is bounded by
// kMaxIdxItems before anything is allocated, and pixel data is read in chunks.
// Every error message starts with the path of the offending file. Codes:
//   NOT_FOUND         the file does not exist.
//   PERMISSION_DENIED the file cannot be opened for reading.
//   DATA_LOSS         corrupt gzip stream, truncated file (fewer bytes than
//                     the header promises, or a gzip stream that stops early),
//                     I/O error.
//   INVALID_ARGUMENT  not an IDX file of the expected kind (bad magic number,
//                     images not 28x28, item count 0 or above kMaxIdxItems),
//                     trailing data after the promised items, a label above
//                     9, image count != label count, a path that is a
//                     directory.
#ifndef SKETCHFUSE_WORKER_TRAINING_FASHION_MNIST_H_
#define SKETCHFUSE_WORKER_TRAINING_FASHION_MNIST_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "torch/types.h"

namespace sketchfuse {

// Where dataset-fashion-mnist installs the files.
inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// Normalization applied to pixels after scaling them to [0, 1]: the mean and
// standard deviation of the Fashion-MNIST training set.
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

// Upper bound on the item count an IDX header may declare (checked before any
// allocation). 2e5 images are 157 MB of pixels; Fashion-MNIST has 60000.
inline constexpr uint32_t kMaxIdxItems = 200000;

// Image side; every image must be kImageSide x kImageSide.
inline constexpr int64_t kImageSide = 28;

// Training examples of the kTrain split.
inline constexpr int64_t kFashionMnistTrainExamples = 60000;

// Number of classes; labels are in [0, kNumClasses).
inline constexpr int64_t kNumClasses = 10;

// A labelled image set. Invariant (for datasets made by this library):
// images.size(0) == labels.size(0), both tensors contiguous on the CPU.
struct ImageDataset {
  torch::Tensor images;  // [N, 1, 28, 28] float32: pixel / 255, then
                         // (x - kFashionMnistMean) / kFashionMnistStd.
  torch::Tensor labels;  // [N] int64 in [0, 9].

  // N; 0 for a default-constructed dataset.
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

enum class Split { kTrain, kTest };

// Loads one split from `dir` (normally kFashionMnistDir). Errors as in the
// file comment; a mismatch between the image and label counts is
// INVALID_ARGUMENT naming both files.
absl::StatusOr<ImageDataset> LoadFashionMnist(const std::string& dir, Split split);

// Rows rank, rank + world, rank + 2 * world, ... of `data`, copied (a strided
// shard: the shards of ranks 0..world-1 are disjoint and together cover every
// row; their sizes differ by at most one). A rank at or beyond data.size()
// gets an empty shard. INVALID_ARGUMENT unless world >= 1 and
// 0 <= rank < world, or if images and labels disagree on N.
absl::StatusOr<ImageDataset> ShardOf(const ImageDataset& data, int rank, int world);

// The first min(max(n, 0), data.size()) examples, as views that share storage
// with `data` (for quick tests).
ImageDataset Head(const ImageDataset& data, int64_t n);

// The low-level readers behind LoadFashionMnist, exposed for tests and tools.
// ReadIdxImages: magic 0x00000803, dims [N, 28, 28]; returns [N, 28, 28]
// uint8 raw pixels. ReadIdxLabels: magic 0x00000801, dims [N], every label
// <= 9; returns [N] uint8. Errors as in the file comment.
absl::StatusOr<torch::Tensor> ReadIdxImages(const std::string& path);
absl::StatusOr<torch::Tensor> ReadIdxLabels(const std::string& path);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_FASHION_MNIST_H_
