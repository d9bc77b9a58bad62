// The language model's text: Debian's fortunes (package fortunes, in
// /usr/share/games/fortunes), about 2.4 MB of English quotations, jokes,
// definitions and verse, read byte by byte (the model's vocabulary is the
// 256 byte values).
//
// The corpus is every regular file of the directory whose name has no '.'
// (not the strfile indexes *.dat, not the *.u8 links), except the two files
// of ASCII pictures (art, ascii-art), in name order, concatenated. It is cut
// into chunks of kCorpusChunkBytes; every kValidationEvery-th chunk (the
// 10th, 20th, ...) is held out for validation, so both splits sample every
// file. Each split is read as non-overlapping windows of context + 1 bytes
// (a window's first `context` bytes predict its last `context`).
#ifndef SKETCHFUSE_WORKER_TRAINING_TEXT_CORPUS_H_
#define SKETCHFUSE_WORKER_TRAINING_TEXT_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sketchfuse {

inline constexpr char kFortunesDir[] = "/usr/share/games/fortunes";
inline constexpr int64_t kCorpusChunkBytes = 4096;
inline constexpr int64_t kValidationEvery = 10;
// A corpus smaller than this (in bytes) is not the package's.
inline constexpr int64_t kCorpusMinBytes = 1 << 20;

struct TextCorpus {
  std::vector<std::string> files;  // the files read, in order (names)
  std::string train;
  std::string validation;
};

// Reads the corpus from `dir`. NOT_FOUND naming the directory, and the
// package that provides it, when it is missing or holds no corpus file;
// INVALID_ARGUMENT naming the directory for a corpus under kCorpusMinBytes;
// an unreadable file is named.
absl::StatusOr<TextCorpus> LoadTextCorpus(const std::string& dir);

// The number of non-overlapping windows of context + 1 bytes in `text`
// (starting at 0, context, 2 * context, ...); 0 for context < 1.
int64_t WindowCount(int64_t text_bytes, int64_t context);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_TEXT_CORPUS_H_
