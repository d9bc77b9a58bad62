#include "worker/training/text_corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace sketchfuse {

absl::StatusOr<TextCorpus> LoadTextCorpus(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    return absl::NotFoundError(absl::StrCat("no text corpus at '", dir,
                                            "' (Debian's fortunes: apt-get install fortunes, or run scripts/setup.sh)"));
  }
  TextCorpus corpus;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.find('.') != std::string::npos || name == "art" || name == "ascii-art") continue;
    if (!it->is_regular_file(error) || it->is_symlink(error)) continue;
    corpus.files.push_back(name);
  }
  if (error) return absl::NotFoundError(absl::StrCat("cannot list '", dir, "': ", error.message()));
  if (corpus.files.empty()) {
    return absl::NotFoundError(absl::StrCat("no corpus file in '", dir, "' (Debian's fortunes: apt-get install fortunes)"));
  }
  std::sort(corpus.files.begin(), corpus.files.end());
  std::string text;
  for (const std::string& name : corpus.files) {
    const std::string path = absl::StrCat(dir, "/", name);
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::DataLossError(absl::StrCat("cannot read '", path, "'"));
    std::ostringstream bytes;
    bytes << in.rdbuf();
    if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read '", path, "'"));
    text += bytes.str();
  }
  if (static_cast<int64_t>(text.size()) < kCorpusMinBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the text corpus in '", dir, "' has ", text.size(),
                                                   " bytes, fewer than ", kCorpusMinBytes,
                                                   ": not Debian's fortunes"));
  }
  for (int64_t begin = 0, chunk = 1; begin < static_cast<int64_t>(text.size()); begin += kCorpusChunkBytes, ++chunk) {
    std::string& split = chunk % kValidationEvery == 0 ? corpus.validation : corpus.train;
    split.append(text, static_cast<size_t>(begin), static_cast<size_t>(kCorpusChunkBytes));
  }
  return corpus;
}

int64_t WindowCount(int64_t text_bytes, int64_t context) {
  if (context < 1 || text_bytes < context + 1) return 0;
  return (text_bytes - 1) / context;
}

}  // namespace sketchfuse
