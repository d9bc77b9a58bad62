// Fuzz target: the decodes a shard runs on the sum of whatever workers
// pushed (count_sketch method=peel's peeling, and the heavy hitters of
// method=estimate and FetchSGD), on tables of any values: NaNs, infinities,
// huge and tiny numbers, repeated values. Neither may crash, hang or return
// what is not a valid update: ascending, distinct indices below the group
// size, at most as many as the sketch has cells (peel) or k (estimate), each
// with one value; and the peeled values are finite.
//
// Input: rows (1 byte, 2..6), cols (2 bytes, 1..512), dim (3 bytes, 1..2^20),
// seed (8 bytes), then the table's floats (missing cells are 0).
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/count_sketch.h"
#include "common/sketch_peeling.h"
#include "tests/fuzz/fuzz_target.h"

namespace sketchfuse {
namespace {

void CheckEntries(const SparseEntries& got, uint64_t dim, uint64_t most, bool finite, const char* what) {
  FuzzCheck(got.indices.size() == got.values.size(), std::string(what) + ": one value per index");
  FuzzCheck(got.indices.size() <= most, std::string(what) + ": more entries than allowed");
  for (size_t j = 0; j < got.indices.size(); ++j) {
    FuzzCheck(got.indices[j] < dim, std::string(what) + ": an index beyond the group");
    FuzzCheck(j == 0 || got.indices[j] > got.indices[j - 1], std::string(what) + ": indices not ascending");
    if (finite) FuzzCheck(std::isfinite(got.values[j]), std::string(what) + ": a non-finite value");
  }
}

}  // namespace

std::vector<std::string> FuzzSeeds() {
  std::vector<std::string> seeds;
  for (uint32_t cols : {7u, 64u, 300u}) {
    std::string s(14, '\0');
    s[0] = 4;
    s[1] = static_cast<char>(cols & 0xFF);
    s[2] = static_cast<char>(cols >> 8);
    s[3] = static_cast<char>(0x10);  // dim 4096
    s[4] = 0;
    s[5] = 0;
    // A sketch of a few coordinates, as a shard would sum it.
    const SketchShape shape{4, cols, 0};
    std::vector<float> x(4096, 0.0f);
    for (uint32_t i = 0; i < 4096; i += 397) x[i] = 1.0f + i;
    std::vector<float> table(shape.num_cells(), 0.0f);
    count_sketch_reference::Insert(shape, x, &table);
    s.append(reinterpret_cast<const char*>(table.data()), table.size() * sizeof(float));
    seeds.push_back(s);
  }
  return seeds;
}

}  // namespace sketchfuse

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sketchfuse;
  if (size < 14) return 0;
  const uint32_t rows = 2 + data[0] % 5;
  const uint32_t cols = 1 + ((data[1] | (data[2] << 8)) % 512);
  const uint64_t dim = 1 + ((data[3] | (data[4] << 8) | (static_cast<uint64_t>(data[5]) << 16)) % (1u << 20));
  uint64_t seed = 0;
  std::memcpy(&seed, data + 6, 8);
  const SketchShape shape{rows, cols, seed};
  std::vector<float> table(shape.num_cells(), 0.0f);
  std::memcpy(table.data(), data + 14, std::min(size - 14, table.size() * sizeof(float)));
  const SketchView view(shape, table.data());
  CheckEntries(PeelDecode(view, dim), dim, shape.num_cells(), true, "peel");
  const uint64_t k = 1 + data[0] % 64;
  CheckEntries(view.HeavyHitters(dim, k), dim, k, false, "heavy hitters");
  return 0;
}
