#include "tests/load_run.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "proto/aggregator.grpc.pb.h"
#include "proto/payload_convert.h"
#include "server/job_config.h"
#include "tests/process_util.h"
#include "tests/push_workload.h"

namespace sketchfuse {
namespace {

double Percentile(std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * sorted.size()))];
}

}  // namespace

absl::StatusOr<LoadReport> RunLoad(const LoadConfig& config) {
  if (config.workers < 1 || config.groups < 1 || config.steps < 1 || config.dim < 1 || config.rss_samples < 1) {
    return absl::InvalidArgumentError("workers, groups, steps, dim and rss_samples must be >= 1");
  }
  const std::string config_path = config.dir + "/load_job.json";
  {
    std::ofstream out(config_path);
    out << "{\"job\": \"load\", \"worldSize\": " << config.workers
        << ", \"roundDeadlineMs\": 60000, \"finishedRoundsKept\": 4, \"groups\": [";
    for (int g = 0; g < config.groups; ++g) {
      out << (g ? ", " : "") << "{\"group\": " << g << ", \"dim\": " << config.dim << ", \"compressor\": \""
          << config.compressor << "\"}";
    }
    out << "]}";
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", config_path));
  }
  absl::StatusOr<v1::JobConfig> job = ReadJobConfig(config_path);
  if (!job.ok()) return job.status();
  // Payloads and expected answers, computed once: every step reuses them.
  std::vector<std::vector<v1::PushRequest>> requests(config.workers, std::vector<v1::PushRequest>(config.groups));
  std::vector<std::string> expected(config.groups);
  for (int g = 0; g < config.groups; ++g) {
    absl::StatusOr<Update> update = ExpectedUpdate(job->groups(g), config.workers, 0);
    if (!update.ok()) return update.status();
    expected[g] = UpdateChecksum(*update);
    for (int w = 0; w < config.workers; ++w) {
      absl::StatusOr<Payload> payload = WorkerPayload(job->groups(g), w, 0);
      if (!payload.ok()) return payload.status();
      v1::PushRequest& r = requests[w][g];
      r.mutable_round()->set_job("load");
      r.mutable_round()->set_group(g);
      r.set_worker(w);
      PayloadToProto(*payload, r.mutable_payload());
    }
  }
  const std::string port_file = config.dir + "/load_port";
  std::remove(port_file.c_str());
  const pid_t server = Spawn({config.server_binary, "--job_config=" + config_path, "--port=0",
                              "--port_file=" + port_file, "--max_message_mb=256"},
                             config.dir + "/load_server.out", config.dir + "/load_server.err");
  if (server <= 0) return absl::InternalError("cannot start the server");
  const std::string port = WaitForFile(port_file, std::chrono::seconds(30));
  if (port.empty()) {
    KillIfRunning(server);
    return absl::UnavailableError(
        absl::StrCat("the server did not start: ", ReadFileOrEmpty(config.dir + "/load_server.err")));
  }
  const std::string address = absl::StrCat("127.0.0.1:", std::stoi(port));

  LoadReport report;
  std::mutex mu;
  std::vector<double> latencies_ms;
  std::atomic<uint64_t> failed{0}, wrong{0}, bytes{0}, done_pushes{0};
  std::vector<std::unique_ptr<v1::Aggregator::Stub>> stubs;
  for (int w = 0; w < config.workers; ++w) {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(256 << 20);
    args.SetMaxReceiveMessageSize(256 << 20);
    args.SetInt("sketchfuse.load_worker", w);  // a connection of its own
    stubs.push_back(v1::Aggregator::NewStub(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args)));
  }
  const uint64_t total_pushes = config.steps * config.workers * config.groups;
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int w = 0; w < config.workers; ++w) {
    for (int g = 0; g < config.groups; ++g) {
      threads.emplace_back([&, w, g] {
        v1::PushRequest request = requests[w][g];
        std::vector<double> mine;
        mine.reserve(config.steps);
        for (uint64_t step = 0; step < config.steps; ++step) {
          request.mutable_round()->set_step(step);
          grpc::ClientContext context;
          context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
          v1::PushReply reply;
          const absl::Time sent = absl::Now();
          const grpc::Status status = stubs[w]->Push(&context, request, &reply);
          mine.push_back(absl::ToDoubleMilliseconds(absl::Now() - sent));
          bytes += request.ByteSizeLong();
          ++done_pushes;
          if (!status.ok()) {
            ++failed;
            continue;
          }
          absl::StatusOr<Update> update = UpdateFromProto(reply.update());
          if (!update.ok() || UpdateChecksum(*update) != expected[g]) ++wrong;
        }
        std::lock_guard<std::mutex> lock(mu);
        latencies_ms.insert(latencies_ms.end(), mine.begin(), mine.end());
      });
    }
  }
  // Memory samples: after 10% of the pushes, then evenly to the end.
  for (int s = 0; s <= config.rss_samples; ++s) {
    const uint64_t target = total_pushes / 10 + (total_pushes - total_pushes / 10) * s / config.rss_samples;
    while (done_pushes.load() < target && done_pushes.load() < total_pushes) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    report.rss_kib.emplace_back(done_pushes.load() / config.workers, ResidentKib(server));
  }
  for (std::thread& t : threads) t.join();
  report.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  kill(server, SIGTERM);
  WaitFor(server, std::chrono::seconds(30));

  std::sort(latencies_ms.begin(), latencies_ms.end());
  report.failed_pushes = failed.load();
  report.wrong_updates = wrong.load();
  report.rounds = config.steps * config.groups;
  report.rounds_per_second = report.rounds / report.seconds;
  report.p50_ms = Percentile(latencies_ms, 0.50);
  report.p99_ms = Percentile(latencies_ms, 0.99);
  report.max_ms = latencies_ms.empty() ? 0 : latencies_ms.back();
  report.bytes_pushed = bytes.load();
  return report;
}

}  // namespace sketchfuse
