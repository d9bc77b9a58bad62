#include "tests/training_cluster.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/process_util.h"

namespace sketchfuse {

DaemonBinaries daemon_binaries;

WorkerResult ParseSummary(const std::string& out) {
  WorkerResult result;
  std::smatch m;
  if (std::regex_search(out, m, std::regex("\"final_test_accuracy\": ([0-9.]+)"))) result.accuracy = std::stod(m[1]);
  if (std::regex_search(out, m, std::regex("\"resumed_from_step\": ([0-9]+)"))) result.resumed_from = std::stol(m[1]);
  if (std::regex_search(out, m, std::regex("\"steps\": ([0-9]+)"))) result.steps = std::stol(m[1]);
  if (std::regex_search(out, m, std::regex("\"peel_recovered_share\": ([0-9.]+)"))) {
    result.peel_recovered_share = std::stod(m[1]);
  }
  if (std::regex_search(out, m, std::regex("\"collective_steps\": ([0-9]+)"))) {
    result.collective_steps = std::stol(m[1]);
  }
  if (std::regex_search(out, m, std::regex("([0-9]+) push attempts retried"))) result.retried_pushes = std::stol(m[1]);
  const size_t last = out.rfind("{\"epoch\"");
  if (last != std::string::npos) result.last_epoch = out.substr(last, out.find('}', last) - last);
  // Keep the test loss and accuracy: wall time differs between runs, and the
  // training loss is a mean over the steps a process ran (fewer after a resume).
  result.last_epoch = std::regex_replace(result.last_epoch, std::regex(", \"elapsed_s\": [0-9.]+"), "");
  result.last_epoch = std::regex_replace(result.last_epoch, std::regex(", \"train_loss\": [0-9.]+"), "");
  return result;
}

TrainingCluster::TrainingCluster(std::string server_binary, std::string worker_binary, std::string dir,
                                 std::vector<std::string> run_flags)
    : server_binary_(std::move(server_binary)),
      worker_binary_(std::move(worker_binary)),
      dir_(std::move(dir)),
      run_flags_(std::move(run_flags)) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ + "/token") << "train-token\n";
  // The servers' own token: with it they bind each worker's calls to its
  // rank (server/worker_proof.h), as the main job's do.
  std::ofstream(dir_ + "/shard_token") << "train-shard-token\n";
}

TrainingCluster::~TrainingCluster() {
  for (const auto& [w, pid] : workers_) KillIfRunning(pid);
  for (const Server& server : servers_) KillIfRunning(server.pid);
}

std::string TrainingCluster::StartServers(int shards, const std::vector<int>& ports) {
  if (!std::filesystem::exists(dir_ + "/job.json")) {
    // The job is partitioned for the shards it runs on (the run's flags may
    // set the partitions themselves).
    std::vector<std::string> plan = {worker_binary_, "--write_job_config=" + dir_ + "/job.json",
                                     absl::StrCat("--num_shards=", shards)};
    plan.insert(plan.end(), run_flags_.begin(), run_flags_.end());
    const pid_t planner = Spawn(plan, dir_ + "/plan.out", dir_ + "/plan.err");
    EXPECT_EQ(WaitFor(planner, std::chrono::seconds(60)), 0) << ReadFileOrEmpty(dir_ + "/plan.err");
  }
  for (int s = 0; s < shards; ++s) {
    const std::string port_file = absl::StrCat(dir_, "/port", s);
    std::filesystem::remove(port_file);
    std::vector<std::string> argv = {server_binary_, "--job_config=" + dir_ + "/job.json",
                                     absl::StrCat("--shard_index=", s), absl::StrCat("--num_shards=", shards),
                                     "--port_file=" + port_file, "--token_file=" + dir_ + "/token",
                                     "--shard_token_file=" + dir_ + "/shard_token", "--host=" + host_};
    argv.insert(argv.end(), server_flags_.begin(), server_flags_.end());
    if (s == 0) {
      argv.push_back("--coordinator");
      argv.push_back("--require_join_credentials");  // only worker-N joins as worker-N
    } else {
      argv.push_back("--coordinator_address=" + coordinator_);
    }
    std::vector<std::string> first = argv;
    if (!ports.empty()) first.push_back(absl::StrCat("--port=", ports[s]));
    Server server;
    server.pid = Spawn(first, absl::StrCat(dir_, "/server", s, ".out"), absl::StrCat(dir_, "/server", s, ".err"));
    servers_.push_back(server);
    const std::string port = WaitForFile(port_file, std::chrono::seconds(30));
    EXPECT_FALSE(port.empty()) << ReadFileOrEmpty(absl::StrCat(dir_, "/server", s, ".err"));
    if (port.empty()) return "";
    const std::string bound = port.substr(0, port.find('\n'));
    argv.push_back("--port=" + bound);  // a restart listens where its predecessor did
    servers_.back().argv = std::move(argv);
    if (s == 0) coordinator_ = host_ + ":" + bound;
  }
  return coordinator_;
}

int TrainingCluster::KillServer(int s) {
  kill(servers_.at(s).pid, SIGKILL);
  const int code = WaitFor(servers_[s].pid, std::chrono::seconds(10));
  servers_[s].pid = -1;
  return code;
}

bool TrainingCluster::RestartServer(int s) {
  Server& server = servers_.at(s);
  const std::string port_file = absl::StrCat(dir_, "/port", s);
  std::filesystem::remove(port_file);
  ++server.restarts;
  const std::string name = absl::StrCat(dir_, "/server", s, ".restart", server.restarts);
  server.pid = Spawn(server.argv, name + ".out", name + ".err");
  const std::string port = WaitForFile(port_file, std::chrono::seconds(30));
  EXPECT_FALSE(port.empty()) << "shard " << s << " did not come back: " << ReadFileOrEmpty(name + ".err");
  return !port.empty();
}

std::string TrainingCluster::ServerOut(int s) const {
  const Server& server = servers_.at(s);
  return ReadFileOrEmpty(server.restarts == 0 ? absl::StrCat(dir_, "/server", s, ".out")
                                              : absl::StrCat(dir_, "/server", s, ".restart", server.restarts, ".out"));
}

bool TrainingCluster::WaitForWorkerOutput(int w, const std::string& text, std::chrono::seconds timeout) const {
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  while (WorkerOut(w).find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

void TrainingCluster::StopServers(int signal) {
  for (const Server& server : servers_) {
    if (server.pid > 0) kill(server.pid, signal);
  }
  for (const Server& server : servers_) {
    if (server.pid <= 0) continue;
    const int code = WaitFor(server.pid, std::chrono::seconds(30));
    if (signal == SIGTERM) {
      EXPECT_EQ(code, 0);
    }
  }
  servers_.clear();
}

pid_t TrainingCluster::StartWorker(int w, const std::vector<std::string>& extra,
                                   const std::vector<std::string>& prefix) {
  // Its join credential, issued as an operator would (the coordinator asks
  // every Join for its id's).
  const std::string credential = absl::StrCat(dir_, "/credential", w);
  const pid_t issuer = Spawn({server_binary_, "--job_config=" + dir_ + "/job.json", "--shard_token_file=" + dir_ +
                              "/shard_token", absl::StrCat("--print_join_credential=worker-", w)},
                             credential, credential + ".err");
  EXPECT_EQ(WaitFor(issuer, std::chrono::seconds(30)), 0) << ReadFileOrEmpty(credential + ".err");
  std::vector<std::string> argv = prefix;
  std::vector<std::string> own = {worker_binary_, "--coordinator=" + coordinator_,
                                   absl::StrCat("--worker_id=worker-", w), "--token_file=" + dir_ + "/token",
                                   "--join_credential_file=" + credential};
  argv.insert(argv.end(), own.begin(), own.end());
  argv.insert(argv.end(), run_flags_.begin(), run_flags_.end());
  argv.insert(argv.end(), extra.begin(), extra.end());
  const pid_t pid = Spawn(argv, absl::StrCat(dir_, "/worker", w, ".out"), absl::StrCat(dir_, "/worker", w, ".err"));
  workers_.emplace_back(w, pid);
  return pid;
}

int TrainingCluster::KillWorker(pid_t pid) {
  kill(pid, SIGKILL);
  const int code = WaitFor(pid, std::chrono::seconds(10));
  for (auto it = workers_.begin(); it != workers_.end(); ++it) {
    if (it->second == pid) {
      workers_.erase(it);
      break;
    }
  }
  return code;
}

int TrainingCluster::WaitForWorkerExit(pid_t pid, std::chrono::seconds timeout) {
  const int code = WaitFor(pid, timeout);
  for (auto it = workers_.begin(); it != workers_.end(); ++it) {
    if (it->second == pid) {
      workers_.erase(it);
      break;
    }
  }
  return code;
}

std::vector<WorkerResult> TrainingCluster::WaitForWorkers() {
  std::sort(workers_.begin(), workers_.end());
  std::vector<WorkerResult> results;
  for (const auto& [w, pid] : workers_) {
    EXPECT_EQ(WaitFor(pid, std::chrono::seconds(600)), 0) << ReadFileOrEmpty(absl::StrCat(dir_, "/worker", w, ".err"));
    results.push_back(ParseSummary(WorkerOut(w)));
  }
  workers_.clear();
  return results;
}

std::vector<WorkerResult> TrainingCluster::Train(int world, int shards, const std::vector<std::string>& worker_flags) {
  if (StartServers(shards).empty()) return {};
  for (int w = 0; w < world; ++w) StartWorker(w, worker_flags);
  std::vector<WorkerResult> results = WaitForWorkers();
  StopServers(SIGTERM);
  return results;
}

std::string TrainingCluster::WorkerOut(int w) const {
  return ReadFileOrEmpty(absl::StrCat(dir_, "/worker", w, ".out"));
}

std::vector<int> FreePorts(int n) {
  std::vector<int> sockets, ports;
  for (int i = 0; i < n; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    socklen_t length = sizeof(address);
    getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    sockets.push_back(fd);
    ports.push_back(ntohs(address.sin_port));
  }
  for (int fd : sockets) close(fd);
  return ports;
}

}  // namespace sketchfuse
