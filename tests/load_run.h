// A load run against a real sketchfuse_server daemon: the run starts one
// shard as a process, then W workers (each its own gRPC connection) push
// every group of every step concurrently, one thread per (worker, group),
// with the payloads of tests/push_workload.h. Each push waits for its round
// (all W workers), so its latency is the round's as a worker sees it.
// While it runs, the server's resident memory is sampled from /proc.
#ifndef SKETCHFUSE_TESTS_LOAD_RUN_H_
#define SKETCHFUSE_TESTS_LOAD_RUN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sketchfuse {

struct LoadConfig {
  std::string server_binary;
  std::string dir;  // scratch: the job config, the server's output
  int workers = 4;
  int groups = 4;
  uint64_t dim = 100000;
  std::string compressor = "count_sketch:method=estimate,k=100,rows=3,seed=7";
  uint64_t steps = 1000;  // rounds per group
  int rss_samples = 20;   // evenly over the run
};

struct LoadReport {
  uint64_t rounds = 0;          // completed, all groups
  uint64_t failed_pushes = 0;
  uint64_t wrong_updates = 0;   // answers that differ from the in-process expectation
  double seconds = 0;
  double rounds_per_second = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;  // push latency
  uint64_t bytes_pushed = 0;
  // Server resident memory (KiB) by rounds completed so far (all groups): the first
  // sample after the first 10% of the steps, then evenly to the end.
  std::vector<std::pair<uint64_t, uint64_t>> rss_kib;
};

// INVALID_ARGUMENT for a config out of range; the server's failure to start
// (with its stderr) otherwise. A run whose pushes fail still reports.
absl::StatusOr<LoadReport> RunLoad(const LoadConfig& config);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_TESTS_LOAD_RUN_H_
