#include "tests/in_process_server.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace sketchfuse {

absl::StatusOr<std::unique_ptr<InProcessServer>> InProcessServer::Start(const std::vector<grpc::Service*>& services,
                                                                        InProcessServerOptions options) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.address, grpc::InsecureServerCredentials(), &port);
  if (options.max_receive_bytes >= 0) builder.SetMaxReceiveMessageSize(options.max_receive_bytes);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve on ", options.address));
  }
  return std::unique_ptr<InProcessServer>(new InProcessServer(std::move(server), port));
}

std::string InProcessServer::address() const { return absl::StrCat("127.0.0.1:", port_); }

void InProcessServer::Shutdown() {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  server_.reset();
}

}  // namespace sketchfuse
