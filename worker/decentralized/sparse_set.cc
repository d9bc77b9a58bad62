#include "worker/decentralized/sparse_set.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/error_feedback.h"
#include "common/topk.h"

namespace sketchfuse {

Update EmptySparse(uint64_t dim) {
  Update set;
  set.dim = dim;
  return set;
}

Update SumSparse(const Update& a, const Update& b) {
  Update sum = EmptySparse(a.dim);
  sum.indices.reserve(a.indices.size() + b.indices.size());
  sum.values.reserve(a.indices.size() + b.indices.size());
  size_t i = 0, j = 0;
  while (i < a.indices.size() || j < b.indices.size()) {
    if (j == b.indices.size() || (i < a.indices.size() && a.indices[i] < b.indices[j])) {
      sum.indices.push_back(a.indices[i]);
      sum.values.push_back(a.values[i++]);
    } else if (i == a.indices.size() || b.indices[j] < a.indices[i]) {
      sum.indices.push_back(b.indices[j]);
      sum.values.push_back(b.values[j++]);
    } else {
      sum.indices.push_back(a.indices[i]);
      sum.values.push_back(a.values[i++] + b.values[j++]);
    }
  }
  return sum;
}

void KeepTopK(uint64_t k, Update* set, Update* dropped) {
  if (set->indices.size() <= k) return;
  // Positions in the set; ties fall to the lower position, i.e. the lower index.
  const std::vector<uint32_t> keep = TopKIndices(set->values, k);
  Update kept = EmptySparse(set->dim), rest = EmptySparse(set->dim);
  size_t next = 0;
  for (size_t p = 0; p < set->indices.size(); ++p) {
    Update& into = (next < keep.size() && keep[next] == p) ? kept : rest;
    if (&into == &kept) ++next;
    into.indices.push_back(set->indices[p]);
    into.values.push_back(set->values[p]);
  }
  *set = std::move(kept);
  *dropped = SumSparse(*dropped, rest);
}

Update TakeTopK(absl::Span<float> x, uint64_t begin, uint64_t end, uint64_t k) {
  Update taken = EmptySparse(x.size());
  if (begin >= end || k == 0) return taken;
  const absl::Span<const float> range(x.data() + begin, end - begin);
  for (uint32_t position : TopKIndices(range, k)) {
    const uint64_t i = begin + position;
    if (x[i] == 0.0f) continue;
    taken.indices.push_back(static_cast<uint32_t>(i));
    taken.values.push_back(x[i]);
    x[i] = 0.0f;
  }
  return taken;
}

std::string SerializeSparse(const Update& set) {
  const uint64_t count = set.indices.size();
  std::string bytes(sizeof(count) + count * 8, '\0');
  std::memcpy(bytes.data(), &count, sizeof(count));
  if (count == 0) return bytes;  // memcpy's pointers must be valid even for 0 bytes
  std::memcpy(bytes.data() + sizeof(count), set.indices.data(), count * 4);
  std::memcpy(bytes.data() + sizeof(count) + count * 4, set.values.data(), count * 4);
  return bytes;
}

absl::StatusOr<Update> ParseSparse(absl::string_view bytes, uint64_t dim) {
  uint64_t count = 0;
  if (bytes.size() < sizeof(count)) {
    return absl::DataLossError(absl::StrCat("a sparse message of ", bytes.size(), " bytes has no count"));
  }
  std::memcpy(&count, bytes.data(), sizeof(count));
  if (count > dim || bytes.size() != sizeof(count) + count * 8) {
    return absl::DataLossError(absl::StrCat("a sparse message announces ", count, " entries of a group of ", dim,
                                            " in ", bytes.size(), " bytes"));
  }
  Update set = EmptySparse(dim);
  set.indices.resize(count);
  set.values.resize(count);
  if (count > 0) {
    std::memcpy(set.indices.data(), bytes.data() + sizeof(count), count * 4);
    std::memcpy(set.values.data(), bytes.data() + sizeof(count) + count * 4, count * 4);
  }
  if (absl::Status s = ValidateUpdate(set, dim); !s.ok()) {
    return absl::DataLossError(absl::StrCat("a received sparse set is malformed: ", s.message()));
  }
  return set;
}

std::vector<uint32_t> PackWords(const Update& set) {
  std::vector<uint32_t> words(set.indices.begin(), set.indices.end());
  words.resize(2 * set.indices.size());
  // memcpy's pointers must be valid even for 0 bytes (an empty set has none).
  if (!set.values.empty()) {
    std::memcpy(words.data() + set.indices.size(), set.values.data(), 4 * set.values.size());
  }
  return words;
}

absl::StatusOr<Update> SumPackedSets(absl::Span<const uint32_t> words, const std::vector<size_t>& counts,
                                     uint64_t dim) {
  // (index, rank order) pairs sorted by index, then summed in rank order.
  struct Entry {
    uint32_t index;
    float value;
  };
  std::vector<Entry> entries;
  size_t offset = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] % 2 != 0 || offset + counts[r] > words.size()) {
      return absl::DataLossError(absl::StrCat("rank ", r, "'s block of ", counts[r], " words is not a sparse set"));
    }
    const size_t n = counts[r] / 2;
    for (size_t j = 0; j < n; ++j) {
      const uint32_t index = words[offset + j];
      if (index >= dim || (j > 0 && index <= words[offset + j - 1])) {
        return absl::DataLossError(absl::StrCat("rank ", r, "'s entry ", j, " has index ", index,
                                                ", out of order or beyond the group's ", dim));
      }
      float value;
      std::memcpy(&value, &words[offset + n + j], sizeof(value));
      entries.push_back({index, value});
    }
    offset += counts[r];
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.index < b.index; });
  Update sum = EmptySparse(dim);
  for (const Entry& e : entries) {
    if (!sum.indices.empty() && sum.indices.back() == e.index) {
      sum.values.back() += e.value;
    } else {
      sum.indices.push_back(e.index);
      sum.values.push_back(e.value);
    }
  }
  return sum;
}

}  // namespace sketchfuse
