// A gRPC server inside the test process, on a loopback port: the one way the
// unit and two-sided tests serve a core (aggregation, coordinator) to a real
// client over a real socket, instead of each test building its own.
#ifndef SKETCHFUSE_TESTS_IN_PROCESS_SERVER_H_
#define SKETCHFUSE_TESTS_IN_PROCESS_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace sketchfuse {

struct InProcessServerOptions {
  // "127.0.0.1:0" picks a free port; a fixed address serves a restarted
  // server where its predecessor was.
  std::string address = "127.0.0.1:0";
  // Largest request the server accepts (gRPC's default when negative).
  int max_receive_bytes = -1;
};

class InProcessServer {
 public:
  // Serves `services` (not owned; they must outlive the server) without TLS.
  // UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<InProcessServer>> Start(const std::vector<grpc::Service*>& services,
                                                                InProcessServerOptions options = {});
  ~InProcessServer() { Shutdown(); }

  int port() const { return port_; }
  // "127.0.0.1:<port>".
  std::string address() const;
  // Stops serving at once: calls in flight are cancelled. Idempotent.
  void Shutdown();

 private:
  InProcessServer(std::unique_ptr<grpc::Server> server, int port) : server_(std::move(server)), port_(port) {}
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_TESTS_IN_PROCESS_SERVER_H_
