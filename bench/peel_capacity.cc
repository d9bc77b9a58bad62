// How much of a sum of workers' sparse selections the peeling decoder
// (common/sketch_peeling.h) gets back, and how many coordinates it returns
// that nobody inserted, for sketch shapes (rows x width, width = columns per
// selected coordinate of one worker) and selection sizes k: the sketch a
// worker sends at a given byte budget. Each case sketches W workers' random
// selections of k coordinates (heavy-tailed values, a given share of each
// worker's coordinates common to all), sums the sketches and peels the sum.
//
//   bazel-bin/bench/peel_capacity [--dim=28938] [--workers=4] [--rows=4]
//       [--widths=3,4] [--ks=16,32,48,96,300] [--overlap=0] [--trials=200]
//       [--csv=FILE] [--plot=FILE.png]
//
// Prints one line per case and writes CSV (and, with gnuplot installed, a
// plot of the share recovered against k, one line per shape).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/count_sketch.h"
#include "common/sketch_peeling.h"

ABSL_FLAG(uint64_t, dim, 28938, "Coordinates of the group (28,938: the Fashion-MNIST CNN's gradient).");
ABSL_FLAG(int, workers, 4, "Workers whose sketches are summed (1 to 1024).");
ABSL_FLAG(std::vector<std::string>, rows, (std::vector<std::string>{"4"}), "Sketch rows to try (each 2 to 64).");
ABSL_FLAG(std::vector<std::string>, widths, (std::vector<std::string>{"3", "4"}), "Columns per selected coordinate to try (each 1 to 1024).");
ABSL_FLAG(std::vector<std::string>, ks, (std::vector<std::string>{"16", "32", "48", "96", "300"}),
          "Coordinates each worker selects (each >= 1; workers * k at most --dim).");
ABSL_FLAG(double, overlap, 0.0, "Share of each worker's k coordinates common to every worker, in [0, 1].");
ABSL_FLAG(int, trials, 200, "Decodes per case, each with other hashes and selections (1 to 100000).");
ABSL_FLAG(std::string, csv, "", "Write the table to this CSV file.");
ABSL_FLAG(std::string, plot, "", "Draw the share recovered against k to this PNG (needs gnuplot).");

namespace {

int Fail(const std::string& message) {
  std::cerr << "peel_capacity: error: " << message << std::endl;
  return 2;
}

// The flag's comma-separated integers, each in [lo, hi]; an error naming the
// flag otherwise.
bool ParseList(const std::string& flag, const std::vector<std::string>& items, long lo, long hi,
               std::vector<long>* out, std::string* error) {
  for (const std::string& item : items) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < lo || v > hi) {
      *error = absl::StrCat("--", flag, ": '", item, "' is not an integer in [", lo, ", ", hi, "]");
      return false;
    }
    out->push_back(v);
  }
  if (out->empty()) {
    *error = absl::StrCat("--", flag, " is empty");
    return false;
  }
  return true;
}

struct Case {
  long rows, width, k;
  uint64_t cells = 0, nonzeros = 0, recovered = 0, wrong_value = 0, false_coordinates = 0;
  double recovered_mass = 0, total_mass = 0, false_mass = 0;
};

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("The peeling decoder's recovery and false coordinates by sketch shape (see the source).");
  absl::ParseCommandLine(argc, argv);
  const uint64_t dim = absl::GetFlag(FLAGS_dim);
  const int workers = absl::GetFlag(FLAGS_workers), trials = absl::GetFlag(FLAGS_trials);
  const double overlap = absl::GetFlag(FLAGS_overlap);
  if (dim < 2 || dim >= (uint64_t{1} << 32)) return Fail(absl::StrCat("--dim must be in [2, 2^32); got ", dim));
  if (workers < 1 || workers > 1024) return Fail(absl::StrCat("--workers must be in [1, 1024]; got ", workers));
  if (trials < 1 || trials > 100000) return Fail(absl::StrCat("--trials must be in [1, 100000]; got ", trials));
  if (!(overlap >= 0 && overlap <= 1)) return Fail(absl::StrCat("--overlap must be in [0, 1]; got ", overlap));
  std::vector<long> rows, widths, ks;
  std::string error;
  if (!ParseList("rows", absl::GetFlag(FLAGS_rows), 2, 64, &rows, &error) ||
      !ParseList("widths", absl::GetFlag(FLAGS_widths), 1, 1024, &widths, &error) ||
      !ParseList("ks", absl::GetFlag(FLAGS_ks), 1, static_cast<long>(dim), &ks, &error)) {
    return Fail(error);
  }
  for (long k : ks) {
    if (static_cast<uint64_t>(k) * workers > dim) {
      return Fail(absl::StrCat("--ks: ", workers, " workers of ", k, " coordinates exceed --dim=", dim));
    }
  }

  std::vector<Case> cases;
  for (long r : rows) {
    for (long w : widths) {
      for (long k : ks) {
        Case c{r, w, k};
        const uint32_t cols = static_cast<uint32_t>(w * k);
        for (int trial = 0; trial < trials; ++trial) {
          const sketchfuse::SketchShape shape{static_cast<uint32_t>(r), cols, 7919u * trial + 17};
          std::mt19937 rng(static_cast<uint32_t>(trial * 1009 + k * 31 + w * 7 + r));
          std::vector<uint32_t> order(dim);
          std::iota(order.begin(), order.end(), 0u);
          std::shuffle(order.begin(), order.end(), rng);
          std::normal_distribution<float> normal(0.0f, 1.0f);
          const long shared = std::lround(overlap * k);
          std::vector<float> sum(dim, 0.0f), table(shape.num_cells(), 0.0f);
          size_t next = static_cast<size_t>(shared);  // order[0, shared): every worker's common coordinates
          for (int worker = 0; worker < workers; ++worker) {
            std::vector<float> x(dim, 0.0f);
            for (long j = 0; j < k; ++j) {
              const uint32_t i = j < shared ? order[j] : order[next++];
              x[i] = (normal(rng) > 0 ? 1.0f : -1.0f) * std::exp(normal(rng));
            }
            std::vector<float> part(shape.num_cells(), 0.0f);
            sketchfuse::count_sketch_reference::Insert(shape, x, &part);
            for (size_t cell = 0; cell < table.size(); ++cell) table[cell] += part[cell];
            for (uint64_t i = 0; i < dim; ++i) sum[i] += x[i];
          }
          float largest = 0;
          for (float v : sum) {
            c.nonzeros += v != 0.0f;
            c.total_mass += std::fabs(v);
            largest = std::max(largest, std::fabs(v));
          }
          const sketchfuse::SparseEntries got =
              sketchfuse::PeelDecode(sketchfuse::SketchView(shape, table.data()), dim);
          for (size_t j = 0; j < got.indices.size(); ++j) {
            const float truth = sum[got.indices[j]];
            if (truth == 0.0f) {
              ++c.false_coordinates;
              c.false_mass += std::fabs(got.values[j]);
            } else if (std::fabs(got.values[j] - truth) <= 1e-5f * largest) {
              ++c.recovered;
              c.recovered_mass += std::fabs(truth);
            } else {
              ++c.wrong_value;
            }
          }
        }
        c.cells = static_cast<uint64_t>(r) * cols;
        cases.push_back(c);
        std::cout << absl::StrFormat(
                         "rows %ld width %ld k %ld: %lu cells, load %.2f; recovered %.1f%% of %lu coordinates "
                         "(%.1f%% of their mass), %lu wrong values, %lu false coordinates (%.3f%% of the mass)",
                         r, w, k, c.cells, static_cast<double>(c.nonzeros) / trials / c.cells,
                         100.0 * c.recovered / std::max<uint64_t>(1, c.nonzeros), c.nonzeros / trials,
                         100.0 * c.recovered_mass / std::max(1e-30, c.total_mass), c.wrong_value,
                         c.false_coordinates, 100.0 * c.false_mass / std::max(1e-30, c.total_mass))
                  << std::endl;
      }
    }
  }

  const std::string csv = absl::GetFlag(FLAGS_csv);
  if (!csv.empty()) {
    std::ofstream out(csv);
    out << "dim,workers,overlap,trials,rows,width,k,cells,load,recovered_share,recovered_mass_share,wrong_values,"
           "false_coordinates,false_mass_share\n";
    for (const Case& c : cases) {
      out << absl::StrFormat("%lu,%d,%g,%d,%ld,%ld,%ld,%lu,%.4f,%.4f,%.4f,%lu,%lu,%.6f\n", dim, workers, overlap,
                             trials, c.rows, c.width, c.k, c.cells,
                             static_cast<double>(c.nonzeros) / trials / c.cells,
                             static_cast<double>(c.recovered) / std::max<uint64_t>(1, c.nonzeros),
                             c.recovered_mass / std::max(1e-30, c.total_mass), c.wrong_value, c.false_coordinates,
                             c.false_mass / std::max(1e-30, c.total_mass));
    }
    out.close();
    if (!out) return Fail(absl::StrCat("cannot write --csv '", csv, "'"));
    std::cout << "csv: " << csv << std::endl;
  }
  const std::string plot = absl::GetFlag(FLAGS_plot);
  if (!plot.empty()) {
    if (csv.empty()) return Fail("--plot needs --csv (it plots that file)");
    if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
      std::cout << "plot: skipped (gnuplot is not installed)" << std::endl;
      return 0;
    }
    std::string script = absl::StrCat(
        "set terminal png size 800,500; set output '", plot, "'; set datafile separator ',';"
        "set logscale x; set xlabel 'coordinates per worker (k)'; set ylabel 'share recovered';"
        "set yrange [0:1.05]; set key bottom right; plot ");
    bool first = true;
    for (long r : rows) {
      for (long w : widths) {
        absl::StrAppend(&script, first ? "" : ", ", "'", csv, "' using ($5==", r, " && $6==", w,
                        " ? $7 : 1/0):10 with linespoints title 'rows ", r, " x width ", w, "'");
        first = false;
      }
    }
    FILE* gnuplot = popen("gnuplot", "w");
    if (gnuplot == nullptr) return Fail("cannot start gnuplot");
    std::fputs(script.c_str(), gnuplot);
    if (pclose(gnuplot) != 0) return Fail(absl::StrCat("gnuplot could not draw --plot '", plot, "'"));
    std::cout << "plot: " << plot << std::endl;
  }
  return 0;
}
