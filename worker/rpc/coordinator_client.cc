#include "worker/rpc/coordinator_client.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/count_sketch.h"
#include "proto/run_config.h"
#include "proto/grpc_status.h"

namespace sketchfuse {

CoordinatorClient::CoordinatorClient(const std::string& address, std::string job, std::string worker_id,
                                     RpcChannelOptions options)
    : address_(address),
      job_(std::move(job)),
      worker_id_(std::move(worker_id)),
      options_(std::move(options)),
      stub_(v1::Coordinator::NewStub(MakeRpcChannel(address, options_))),
      worker_proof_(options_.worker_proof) {}

RpcChannelOptions CoordinatorClient::CallOptions() const {
  RpcChannelOptions options = options_;
  std::lock_guard<std::mutex> lock(mu_);
  options.worker_proof = worker_proof_;
  return options;
}

std::string CoordinatorClient::worker_proof() const {
  std::lock_guard<std::mutex> lock(mu_);
  return worker_proof_;
}

CoordinatorClient::~CoordinatorClient() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (heartbeats_.joinable()) heartbeats_.join();
}

absl::StatusOr<v1::JoinReply> CoordinatorClient::Join(const v1::RunConfig& run, absl::Duration patience) {
  v1::JoinRequest request;
  request.set_job(job_);
  request.set_worker_id(worker_id_);
  *request.mutable_run() = run;
  request.set_fingerprint(RunFingerprint(run));
  request.set_sketch_hash_family(kSketchHashFamily);
  {
    std::lock_guard<std::mutex> lock(mu_);
    joined_ = request;
  }
  const absl::Time give_up = absl::Now() + patience;
  while (true) {
    grpc::ClientContext context;
    AddCallCredentials(CallOptions(), context);
    if (!options_.join_credential.empty()) context.AddMetadata(kJoinCredentialKey, options_.join_credential);
    context.set_deadline(absl::ToChronoTime(give_up));
    // Wait for the coordinator's port to open instead of failing at once.
    context.set_wait_for_ready(true);
    v1::JoinReply reply;
    grpc::Status status = stub_->Join(&context, request, &reply);
    if (status.ok()) {
      if (!reply.worker_proof().empty()) {
        std::lock_guard<std::mutex> lock(mu_);
        worker_proof_ = reply.worker_proof();
      }
      if (absl::Status family = CheckSketchHashFamily(
              reply.sketch_hash_family(), absl::StrCat("the coordinator of job '", job_, "' at ", address_));
          !family.ok()) {
        return absl::Status(family.code(), absl::StrCat("joining job '", job_, "' as '", worker_id_,
                                                        "': ", family.message()));
      }
      return reply;
    }
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && status.error_message() == "Deadline Exceeded") {
      // gRPC's own deadline: the coordinator never answered.
      return absl::DeadlineExceededError(absl::StrCat("joining job '", job_, "' as '", worker_id_,
                                                      "': no answer from the coordinator at ", address_, " within ",
                                                      absl::FormatDuration(patience), " (is it up?)"));
    }
    // RESOURCE_EXHAUSTED: the coordinator holds its maximum of waiting calls.
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(100));
      continue;
    }
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE || absl::Now() >= give_up) {
      return absl::Status(FromGrpcStatus(status).code(),
                          absl::StrCat("joining job '", job_, "' as '", worker_id_, "': ", status.error_message()));
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

absl::Status CoordinatorClient::Set(const std::string& key, const std::string& value) {
  v1::KeyValue entry;
  entry.set_job(job_);
  entry.set_key(key);
  entry.set_value(value);
  grpc::ClientContext context;
  AddCallCredentials(CallOptions(), context);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::SetReply reply;
  return FromGrpcStatus(stub_->Set(&context, entry, &reply));
}

absl::StatusOr<std::string> CoordinatorClient::Get(const std::string& key, absl::Duration wait) {
  // The coordinator waits at most its own bound per call (and refuses to
  // wait when too many calls do): asked again until `wait` is spent.
  const absl::Time until = absl::Now() + wait;
  while (true) {
    const absl::Duration left = std::max(absl::ZeroDuration(), until - absl::Now());
    v1::GetRequest request;
    request.set_job(job_);
    request.set_key(key);
    request.set_wait_ms(static_cast<uint32_t>(std::min<int64_t>(absl::ToInt64Milliseconds(left), UINT32_MAX)));
    grpc::ClientContext context;
    AddCallCredentials(CallOptions(), context);
    context.set_deadline(absl::ToChronoTime(absl::Now() + left + absl::Seconds(10)));
    v1::KeyValue reply;
    grpc::Status status = stub_->Get(&context, request, &reply);
    if (status.ok()) return reply.value();
    const bool again = status.error_code() == grpc::StatusCode::NOT_FOUND ||
                       status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
    if (!again || absl::Now() + absl::Milliseconds(50) >= until) return FromGrpcStatus(status);
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) absl::SleepFor(absl::Milliseconds(100));
  }
}

void CoordinatorClient::StartHeartbeats(absl::Duration period) {
  if (heartbeats_.joinable()) return;
  heartbeats_ = std::thread([this, period] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      v1::HeartbeatRequest request;
      request.set_job(job_);
      request.set_worker_id(worker_id_);
      grpc::ClientContext context;
      AddCallCredentials(CallOptions(), context);
      context.set_deadline(absl::ToChronoTime(absl::Now() + period));
      v1::HeartbeatReply reply;
      grpc::Status status = stub_->Heartbeat(&context, request, &reply);
      if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
        // The coordinator restarted: join it again. The call returns when the
        // job is complete again or at its deadline; either way the
        // coordinator now counts this worker as joined.
        lock.lock();
        const v1::JoinRequest again = joined_;
        ++rejoins_;
        lock.unlock();
        grpc::ClientContext join_context;
        AddCallCredentials(CallOptions(), join_context);
        if (!options_.join_credential.empty()) join_context.AddMetadata(kJoinCredentialKey, options_.join_credential);
        join_context.set_deadline(absl::ToChronoTime(absl::Now() + period));
        v1::JoinReply joined;
        const grpc::Status answer = stub_->Join(&join_context, again, &joined);
        absl::Status refusal;
        if (answer.ok()) {
          refusal = CheckSketchHashFamily(joined.sketch_hash_family(),
                                          absl::StrCat("the restarted coordinator at ", address_));
        } else if (answer.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
                   answer.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
          refusal = absl::Status(FromGrpcStatus(answer).code(),
                                 absl::StrCat("the restarted coordinator at ", address_,
                                              " refused this worker: ", answer.error_message()));
        }
        lock.lock();
        const bool news = !refusal.ok() && refusal != rejoin_refusal_;
        rejoin_refusal_ = refusal;
        lock.unlock();
        if (news) std::cerr << "sketchfuse_worker: " << worker_id_ << ": " << refusal.message() << std::endl;
      }
      lock.lock();
      if (status.ok()) dead_workers_.assign(reply.dead_workers().begin(), reply.dead_workers().end());
      stop_cv_.wait_for(lock, absl::ToChronoMilliseconds(period));
    }
  });
}

absl::Status CoordinatorClient::rejoin_refusal() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rejoin_refusal_;
}

int CoordinatorClient::rejoins() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rejoins_;
}

std::vector<std::string> CoordinatorClient::dead_workers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dead_workers_;
}

}  // namespace sketchfuse
