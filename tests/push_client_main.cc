// push_client: plays one worker of a job against running aggregation shards,
// for tests. For each step it pushes its payload of every group to the shard
// that owns the group (all groups in parallel) and prints one line per group:
//   step <s> group <g> <checksum of the update>
// Exits 0 when every push succeeded, 1 otherwise (the status on stderr).
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpcpp/grpcpp.h"
#include "proto/aggregator.grpc.pb.h"
#include "proto/payload_convert.h"
#include "server/job_config.h"
#include "tests/push_workload.h"

ABSL_FLAG(std::string, servers, "", "Shard addresses host:port, comma-separated, in shard order.");
ABSL_FLAG(std::string, job_config, "", "The job's v1.JobConfig file (as given to the servers).");
ABSL_FLAG(uint32_t, worker, 0, "This worker's id.");
ABSL_FLAG(uint64_t, steps, 1, "Steps to run (0 .. steps-1).");
ABSL_FLAG(std::string, token_file, "", "Bearer token file; empty sends none.");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::vector<std::string> servers =
      absl::StrSplit(absl::GetFlag(FLAGS_servers), ',', absl::SkipEmpty());
  absl::StatusOr<sketchfuse::v1::JobConfig> job =
      sketchfuse::ReadJobConfig(absl::GetFlag(FLAGS_job_config));
  if (!job.ok() || servers.empty()) {
    std::cerr << "push_client: " << (job.ok() ? "no --servers" : job.status().message()) << "\n";
    return 2;
  }
  absl::StatusOr<std::vector<int>> shard_of = sketchfuse::ShardOfGroups(*job, servers.size());
  std::string token;
  if (!absl::GetFlag(FLAGS_token_file).empty()) {
    std::ifstream in(absl::GetFlag(FLAGS_token_file));
    std::stringstream text;
    text << in.rdbuf();
    token = std::string(absl::StripAsciiWhitespace(text.str()));
  }
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(256 << 20);
  args.SetMaxReceiveMessageSize(256 << 20);
  std::vector<std::unique_ptr<sketchfuse::v1::Aggregator::Stub>> stubs;
  for (const std::string& address : servers) {
    stubs.push_back(sketchfuse::v1::Aggregator::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args)));
  }
  std::mutex out_mu;
  bool all_ok = true;
  const uint32_t worker = absl::GetFlag(FLAGS_worker);
  for (uint64_t step = 0; step < absl::GetFlag(FLAGS_steps); ++step) {
    std::vector<std::thread> pushes;
    for (int i = 0; i < job->groups_size(); ++i) {
      pushes.emplace_back([&, i] {
        const sketchfuse::v1::GroupConfig& group = job->groups(i);
        sketchfuse::v1::PushRequest request;
        request.mutable_round()->set_job(job->job());
        request.mutable_round()->set_step(step);
        request.mutable_round()->set_group(group.group());
        request.set_worker(worker);
        sketchfuse::PayloadToProto(*sketchfuse::WorkerPayload(group, worker, step),
                                   request.mutable_payload());
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
        sketchfuse::v1::PushReply reply;
        grpc::Status status = stubs[(*shard_of)[i]]->Push(&context, request, &reply);
        std::lock_guard<std::mutex> lock(out_mu);
        if (!status.ok()) {
          std::cerr << "push_client: step " << step << " group " << group.group() << ": "
                    << status.error_code() << " " << status.error_message() << "\n";
          all_ok = false;
          return;
        }
        std::cout << "step " << step << " group " << group.group() << " "
                  << sketchfuse::UpdateChecksum(*sketchfuse::UpdateFromProto(reply.update()))
                  << "\n";
      });
    }
    for (std::thread& t : pushes) t.join();
  }
  return all_ok ? 0 : 1;
}
