// Aggregation-server benchmarks, each against its yardstick in the same run:
//   - summing W sketch payloads in the aggregation core, against memcpy of
//     the same bytes (target: 80% of memcpy bandwidth);
//   - a 16 MiB push and its 16 MiB reply over gRPC on loopback, against a raw
//     TCP transfer of the same bytes both ways (target: 70% of raw TCP).
// Run: bazel run -c opt //bench:server_bench -- [--benchmark_out=out.json]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/memory_tuning.h"
#include "common/count_sketch.h"
#include "common/payload.h"
#include "grpcpp/grpcpp.h"
#include "proto/payload_convert.h"
#include "server/aggregation_core.h"
#include "server/aggregator_service.h"

namespace sketchfuse {
namespace {

constexpr size_t kSketchCells = 5 * 500000;  // FetchSGD's 5 x 500,000 table
constexpr size_t kPushFloats = (16u << 20) / 4;  // 16 MiB

// W workers' sketch payloads merged as the core does (MergeInto per push).
void BM_ServerSumSketches(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0));
  Payload p;
  p.kind = PayloadKind::kSketch;
  p.dim = 25557032;
  p.sketch = {5, 500000, 1};
  p.values.assign(kSketchCells, 0.5f);
  std::vector<Payload> pushes(workers, p);
  for (auto _ : state) {
    // The core moves the first push into the aggregate; the copy here only
    // restores it, outside the timing.
    state.PauseTiming();
    Payload acc = pushes[0];
    state.ResumeTiming();
    for (int w = 1; w < workers; ++w) benchmark::DoNotOptimize(MergeInto(pushes[w], &acc));
  }
  // Each merge reads two tables and writes one.
  state.SetBytesProcessed(state.iterations() * (workers - 1) * 3 * kSketchCells * 4);
}
BENCHMARK(BM_ServerSumSketches)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_MemcpySketch(benchmark::State& state) {
  // The same working set as BM_ServerSumSketches/W: W distinct tables, each
  // copied in turn, so neither side is favoured by the cache.
  const int tables = static_cast<int>(state.range(0));
  std::vector<std::vector<float>> sources(tables, std::vector<float>(kSketchCells, 1.0f));
  std::vector<float> b(kSketchCells);
  for (auto _ : state) {
    for (int t = 1; t < tables; ++t) std::memcpy(b.data(), sources[t].data(), kSketchCells * 4);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * (tables - 1) * 2 * kSketchCells * 4);
}
BENCHMARK(BM_MemcpySketch)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

// One worker, one dense group of 16 MiB: each push is answered with the
// 16 MiB update once decoded.
void BM_GrpcPushReply16MiB(benchmark::State& state) {
  const bool tuned = state.range(0) == 1;
  AggregationConfig config;
  config.job = "bench";
  config.world_size = 1;
  config.groups = {{0, kPushFloats, "dense"}};
  config.finished_rounds_kept = 1;
  auto core = *AggregationCore::Create(config);
  AggregatorService service(core.get(), "");
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.SetMaxSendMessageSize(64 << 20);
  if (tuned) {
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 16 << 20);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 20);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE, 16 << 20);
  }
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  args.SetMaxReceiveMessageSize(64 << 20);
  if (tuned) {
    args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 16 << 20);
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 20);
    args.SetInt(GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE, 16 << 20);
  }
  auto stub = v1::Aggregator::NewStub(grpc::CreateCustomChannel(
      "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args));
  Payload p;
  p.dim = kPushFloats;
  p.values.assign(kPushFloats, 0.25f);
  v1::PushRequest request;
  request.mutable_round()->set_job("bench");
  PayloadToProto(p, request.mutable_payload());
  uint64_t step = 0;
  for (auto _ : state) {
    request.mutable_round()->set_step(step++);
    grpc::ClientContext context;
    v1::PushReply reply;
    grpc::Status status = stub->Push(&context, request, &reply);
    if (!status.ok()) state.SkipWithError(status.error_message().c_str());
  }
  state.SetBytesProcessed(state.iterations() * 2 * kPushFloats * 4);
  server->Shutdown();
}
BENCHMARK(BM_GrpcPushReply16MiB)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same bytes over a raw loopback TCP connection: 16 MiB to an echo
// thread that reads it all and sends 16 MiB back.
bool SendAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t sent = send(fd, data, n, 0);
    if (sent <= 0) return false;
    data += sent;
    n -= sent;
  }
  return true;
}
bool RecvAll(int fd, char* data, size_t n) {
  while (n > 0) {
    const ssize_t got = recv(fd, data, n, 0);
    if (got <= 0) return false;
    data += got;
    n -= got;
  }
  return true;
}

void BM_RawTcpRoundTrip16MiB(benchmark::State& state) {
  const size_t bytes = kPushFloats * 4;
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  listen(listener, 1);
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::thread echo([&] {
    const int fd = accept(listener, nullptr, nullptr);
    std::vector<char> buffer(bytes);
    while (RecvAll(fd, buffer.data(), bytes) && SendAll(fd, buffer.data(), bytes)) {
    }
    close(fd);
  });
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  std::vector<char> out(bytes, 1), in(bytes);
  for (auto _ : state) {
    // Send and receive concurrently, as gRPC's HTTP/2 flow control does.
    std::thread sender([&] { SendAll(fd, out.data(), bytes); });
    RecvAll(fd, in.data(), bytes);
    sender.join();
  }
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
  shutdown(fd, SHUT_RDWR);
  close(fd);
  echo.join();
  close(listener);
}
BENCHMARK(BM_RawTcpRoundTrip16MiB)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace sketchfuse

// As the server and worker daemons do: freed buffers stay mapped, so each
// round does not fault in fresh pages for its 16 MiB messages.
int main(int argc, char** argv) {
  sketchfuse::KeepFreedMemoryMapped();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
