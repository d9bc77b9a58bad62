// Runs a fuzz target without libFuzzer (see fuzz_target.h): every seed, then
// --iterations mutated inputs drawn with --seed. Exits 0 when every input
// returned; a broken promise aborts. --write_corpus=DIR writes the seeds as
// files, a starting corpus for libFuzzer.
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "tests/fuzz/fuzz_target.h"

ABSL_FLAG(int, iterations, 20000, "mutated inputs to run after the seeds");
ABSL_FLAG(uint64_t, seed, 1, "seed of the mutations");
ABSL_FLAG(int, max_len, 1 << 16, "longest input, bytes");
ABSL_FLAG(std::string, write_corpus, "", "write the seeds to this directory and exit");

namespace {

std::string Mutate(const std::vector<std::string>& seeds, std::mt19937_64& rng, size_t max_len) {
  std::string s = seeds[rng() % seeds.size()];
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    const size_t pos = s.empty() ? 0 : rng() % s.size();
    switch (rng() % 7) {
      case 0:  // flip a bit
        if (!s.empty()) s[pos] = static_cast<char>(s[pos] ^ (1 << (rng() % 8)));
        break;
      case 1:  // overwrite a byte with an interesting value
        if (!s.empty()) {
          static const unsigned char kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, 0x10, 0x40};
          s[pos] = static_cast<char>(kInteresting[rng() % sizeof(kInteresting)]);
        }
        break;
      case 2:  // insert random bytes
        s.insert(pos, std::string(1 + rng() % 8, static_cast<char>(rng())));
        break;
      case 3:  // delete a range
        if (!s.empty()) s.erase(pos, 1 + rng() % 16);
        break;
      case 4:  // truncate
        s.resize(pos);
        break;
      case 5: {  // splice another seed's tail
        const std::string& other = seeds[rng() % seeds.size()];
        if (!other.empty()) s = s.substr(0, pos) + other.substr(rng() % other.size());
        break;
      }
      case 6:  // duplicate a range
        if (!s.empty()) s.insert(pos, s.substr(rng() % s.size(), 1 + rng() % 32));
        break;
    }
  }
  if (s.size() > max_len) s.resize(max_len);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::vector<std::string> seeds = sketchfuse::FuzzSeeds();
  if (seeds.empty()) {
    std::cerr << "fuzz_driver: the target has no seeds" << std::endl;
    return 1;
  }
  if (const std::string dir = absl::GetFlag(FLAGS_write_corpus); !dir.empty()) {
    for (size_t i = 0; i < seeds.size(); ++i) {
      std::ofstream out(absl::StrCat(dir, "/seed-", i), std::ios::binary);
      out << seeds[i];
      if (!out) {
        std::cerr << "fuzz_driver: cannot write " << dir << "/seed-" << i << std::endl;
        return 1;
      }
    }
    std::cout << "wrote " << seeds.size() << " seeds to " << dir << std::endl;
    return 0;
  }
  if (absl::GetFlag(FLAGS_iterations) < 0 || absl::GetFlag(FLAGS_max_len) < 1) {
    std::cerr << "fuzz_driver: --iterations must be >= 0 and --max_len >= 1" << std::endl;
    return 2;
  }
  for (const std::string& s : seeds) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed));
  size_t bytes = 0;
  for (int i = 0; i < absl::GetFlag(FLAGS_iterations); ++i) {
    const std::string input = Mutate(seeds, rng, static_cast<size_t>(absl::GetFlag(FLAGS_max_len)));
    bytes += input.size();
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  }
  std::cout << "fuzz_driver: " << seeds.size() << " seeds and " << absl::GetFlag(FLAGS_iterations)
            << " mutated inputs (" << bytes << " bytes) ran; every promise held" << std::endl;
  return 0;
}
