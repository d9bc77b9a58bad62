#include "server/shard_registrar.h"

#include <chrono>
#include <iostream>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/grpc_status.h"

namespace sketchfuse {

ShardRegistrar::RegisterOnce ShardRegistrar::OverGrpc(const std::string& address, const RpcChannelOptions& options) {
  std::shared_ptr<v1::Coordinator::Stub> stub = v1::Coordinator::NewStub(MakeRpcChannel(address, options));
  return [stub, options](const v1::RegisterShardRequest& request) {
    grpc::ClientContext context;
    AddCallCredentials(options, context);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::RegisterShardReply reply;
    return FromGrpcStatus(stub->RegisterShard(&context, request, &reply));
  };
}

ShardRegistrar::ShardRegistrar(RegisterOnce register_once, v1::RegisterShardRequest request, std::string coordinator,
                               RegistrarOptions options, std::function<void(const absl::Status&)> on_failure)
    : register_once_(std::move(register_once)),
      request_(std::move(request)),
      coordinator_(std::move(coordinator)),
      options_(std::move(options)),
      on_failure_(std::move(on_failure)) {
  thread_ = std::thread([this] { Run(); });
}

ShardRegistrar::~ShardRegistrar() { Stop(); }

void ShardRegistrar::Stop() {
  if (!stopping_.HasBeenNotified()) stopping_.Notify();
  if (thread_.joinable()) thread_.join();
}

void ShardRegistrar::Log(const std::string& line, bool failure) const {
  if (options_.log) {
    options_.log(line);
  } else {
    (failure ? std::cerr : std::cout) << "sketchfuse_server: " << line << std::endl;
  }
}

absl::Status ShardRegistrar::RegisterFirst() {
  const absl::Time give_up = absl::Now() + options_.give_up_after;
  while (true) {
    const absl::Status status = register_once_(request_);
    if (status.ok()) return status;
    const bool not_up_yet =
        absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
    if (stopping_.HasBeenNotified()) return absl::CancelledError("stopped before registering");
    if (!not_up_yet || absl::Now() + options_.retry_every > give_up) {
      return absl::Status(status.code(), absl::StrCat("registering with the coordinator at ", coordinator_, ": ",
                                                      status.message()));
    }
    if (stopping_.WaitForNotificationWithTimeout(options_.retry_every)) {
      return absl::CancelledError("stopped before registering");
    }
  }
}

void ShardRegistrar::Run() {
  const absl::Status first = RegisterFirst();
  if (!first.ok()) {
    if (!stopping_.HasBeenNotified() && on_failure_) on_failure_(first);
    return;
  }
  registered_ = true;
  ++registrations_;
  Log(absl::StrCat("registered as ", request_.address(), " with the coordinator at ", coordinator_), false);
  while (!stopping_.WaitForNotificationWithTimeout(options_.refresh_every)) {
    const absl::Status status = register_once_(request_);
    if (status.ok()) ++registrations_;
    if (status.ok() == registered_.load()) continue;
    registered_ = status.ok();
    Log(status.ok() ? absl::StrCat("registered again with the coordinator at ", coordinator_)
                    : absl::StrCat("cannot reach the coordinator at ", coordinator_,
                                   " to register again (will retry): ", status.message()),
        !status.ok());
  }
}

}  // namespace sketchfuse
