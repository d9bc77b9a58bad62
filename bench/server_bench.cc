// Aggregation-server benchmarks, each against its yardstick in the same run:
//   - summing W sketch payloads in the aggregation core, against memcpy of
//     the same bytes (target: 80% of memcpy bandwidth);
//   - pushes of 1 to 64 MiB and their replies over gRPC on loopback, on 1, 2
//     and 4 channels at once, against raw TCP transfers of the same bytes
//     both ways over as many connections (target at 16 MiB, one channel: 90%
//     of raw TCP, issue 36). bench/transport_table.py pairs the rows;
//   - where the push's time goes at 16 MiB: gRPC echoing the push's bytes
//     with no copy out of its buffers, and with the decode's two copies.
// Run: bazel run -c opt //bench:server_bench -- [--benchmark_out=out.json]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "daemon/memory_tuning.h"
#include "common/count_sketch.h"
#include "common/payload.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/push_codec.h"
#include "proto/rpc_channel.h"
#include "server/aggregation_core.h"
#include "server/aggregator_service.h"

namespace sketchfuse {
namespace {

constexpr size_t kSketchCells = 5 * 500000;  // FetchSGD's 5 x 500,000 table

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

// gRPC channel settings: 0 = gRPC's defaults, 1 = the daemons' and workers'
// (proto/rpc_channel.h ApplyBulkTransferSettings: 16 MiB HTTP/2 frames, 64 MiB
// stream windows); 2 and 3 are the daemons' with one of gRPC's TCP options
// that might help large messages, kept as measured alternatives (neither is
// adopted: docs/BENCHMARKS.md, "The aggregation servers"): 2 = reads into 1 MiB
// chunks (up to 16 MiB) instead of gRPC's adaptive 8 KiB start, 3 = zero-copy
// sends (MSG_ZEROCOPY).
void ApplyHttp2Tuning(int tuned, grpc::ServerBuilder* builder, grpc::ChannelArguments* args) {
  if (tuned == 0) return;
  if (builder != nullptr) ApplyBulkTransferSettings(builder);
  if (args != nullptr) ApplyBulkTransferSettings(args);
  auto set = [&](const char* name, int value) {
    if (builder != nullptr) builder->AddChannelArgument(name, value);
    if (args != nullptr) args->SetInt(name, value);
  };
  if (tuned == 2) {
    set(GRPC_ARG_TCP_READ_CHUNK_SIZE, 1 << 20);
    set(GRPC_ARG_TCP_MIN_READ_CHUNK_SIZE, 1 << 20);
    set(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, 16 << 20);
  }
  if (tuned == 3) set(GRPC_ARG_TCP_TX_ZEROCOPY_ENABLED, 1);
}

constexpr int kMaxMessageBytes = 80 << 20;
constexpr int kWarmupRounds = 2;

// Push and reply over C channels at once: one worker, C dense groups of
// `MiB` each, one channel (its own TCP connection) and one thread per group;
// each push is answered with its group's update once decoded. Args: MiB,
// channels, tuned (the settings above).
void BM_GrpcPushReply(benchmark::State& state) {
  const size_t floats = static_cast<size_t>(state.range(0)) * (1u << 20) / 4;
  const int channels = static_cast<int>(state.range(1));
  const int tuned = static_cast<int>(state.range(2));
  AggregationConfig config;
  config.job = "bench";
  config.world_size = 1;
  for (int c = 0; c < channels; ++c) config.groups.push_back({static_cast<uint32_t>(c), floats, "dense"});
  config.finished_rounds_kept = 1;
  auto core = *AggregationCore::Create(config);
  AggregatorService service(core.get(), "");
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  ApplyHttp2Tuning(tuned, &builder, nullptr);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  // The worker's client path (worker/ps_transport): the request is encoded
  // with push_codec around the payload's values, sent through a generic
  // stub, and the reply decoded into an Update.
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
  std::vector<std::shared_ptr<const Payload>> payloads;
  for (int c = 0; c < channels; ++c) {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetInt("sketchfuse.bench_channel", c);  // distinct arguments: a connection of its own
    ApplyHttp2Tuning(tuned, nullptr, &args);
    stubs.push_back(std::make_unique<grpc::GenericStub>(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args)));
    auto p = std::make_shared<Payload>();
    p->dim = floats;
    p->values.assign(floats, 0.25f);
    payloads.push_back(std::move(p));
  }
  uint64_t step = 0;
  std::vector<absl::Status> statuses(channels);
  auto push = [&](int c) {
    v1::RoundKey round;
    round.set_job("bench");
    round.set_group(c);
    round.set_step(step);
    const grpc::ByteBuffer request = EncodePushRequest(round, 0, payloads[c]);
    grpc::ByteBuffer reply;
    grpc::ClientContext context;
    std::promise<grpc::Status> done;
    stubs[c]->UnaryCall(&context, kPushMethod, grpc::StubOptions(), &request, &reply,
                        [&done](grpc::Status status) { done.set_value(std::move(status)); });
    const grpc::Status status = done.get_future().get();
    if (!status.ok()) {
      statuses[c] = absl::UnknownError(status.error_message());
      return;
    }
    absl::StatusOr<PushReplyParts> parts = DecodePushReply(reply, floats);
    statuses[c] = parts.status();
    if (parts.ok()) benchmark::DoNotOptimize(parts->update.values.data());
  };
  auto round = [&] {
    std::vector<std::thread> threads;
    for (int c = 1; c < channels; ++c) threads.emplace_back(push, c);
    push(0);
    for (std::thread& t : threads) t.join();
    ++step;
  };
  // Untimed warm-up rounds: a job pushes the same sizes every step, so the
  // steady state is what counts, not the first rounds that fault in both
  // ends' buffers (seconds at 64 MiB on this kind of VM).
  for (int i = 0; i < kWarmupRounds; ++i) round();
  for (auto _ : state) {
    round();
    for (const absl::Status& status : statuses) {
      if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
    }
  }
  state.SetBytesProcessed(state.iterations() * channels * 2 * floats * 4);
  server->Shutdown();
}
// 16 MiB with gRPC's defaults, the daemons' settings and the two
// alternatives; then 1 to 64 MiB
// on 1, 2 and 4 channels with the daemons' settings.
BENCHMARK(BM_GrpcPushReply)
    ->ArgNames({"MiB", "channels", "tuned"})
    ->Args({16, 1, 0})
    ->Args({16, 1, 2})
    ->Args({16, 1, 3})
    ->ArgsProduct({{1, 4, 16, 64}, {1, 2, 4}, {1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// gRPC's own floor for the same round trip: the push's encoded bytes sent to
// a generic service that answers with the very buffer it received, so
// neither end reads the values out of gRPC's slices (copies = 0); with
// copies = 2 each end copies the message out of its slices into one array,
// as the push codec's decode does on the shard and on the worker. Args: MiB,
// copies. Same settings as tuned:1.
void CopyOut(const grpc::ByteBuffer& buffer, std::vector<char>* out) {
  std::vector<grpc::Slice> slices;
  (void)buffer.Dump(&slices);
  out->resize(buffer.Length());
  size_t at = 0;
  for (const grpc::Slice& slice : slices) {
    std::memcpy(out->data() + at, slice.begin(), slice.size());
    at += slice.size();
  }
}

class EchoService : public grpc::CallbackGenericService {
 public:
  explicit EchoService(bool copy) : copy_(copy) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Echo : public grpc::ServerGenericBidiReactor {
     public:
      explicit Echo(bool copy) : copy_(copy) { StartRead(&message_); }
      void OnReadDone(bool ok) override {
        if (!ok) {
          Finish(grpc::Status::OK);
          return;
        }
        if (copy_) {
          CopyOut(message_, &copied_);
          benchmark::DoNotOptimize(copied_.data());
        }
        StartWriteAndFinish(&message_, grpc::WriteOptions(), grpc::Status::OK);
      }
      void OnDone() override { delete this; }

     private:
      const bool copy_;
      grpc::ByteBuffer message_;
      std::vector<char> copied_;
    };
    return new Echo(copy_);
  }

 private:
  const bool copy_;
};

void BM_GrpcEcho(benchmark::State& state) {
  const size_t floats = static_cast<size_t>(state.range(0)) * (1u << 20) / 4;
  const bool copies = state.range(1) == 2;
  EchoService service(copies);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  ApplyHttp2Tuning(1, &builder, nullptr);
  builder.RegisterCallbackGenericService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  ApplyHttp2Tuning(1, nullptr, &args);
  grpc::GenericStub stub(grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                                   grpc::InsecureChannelCredentials(), args));
  auto payload = std::make_shared<Payload>();
  payload->dim = floats;
  payload->values.assign(floats, 0.25f);
  v1::RoundKey key;
  key.set_job("bench");
  std::vector<char> copied;
  bool failed = false;
  auto round = [&] {
    const grpc::ByteBuffer request = EncodePushRequest(key, 0, payload);
    grpc::ByteBuffer reply;
    grpc::ClientContext context;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&context, "/bench.Echo/Echo", grpc::StubOptions(), &request, &reply,
                   [&done](grpc::Status status) { done.set_value(std::move(status)); });
    failed = !done.get_future().get().ok() || reply.Length() != request.Length();
    if (copies) {
      CopyOut(reply, &copied);
      benchmark::DoNotOptimize(copied.data());
    }
  };
  for (int i = 0; i < kWarmupRounds; ++i) round();  // as BM_GrpcPushReply
  for (auto _ : state) {
    round();
    if (failed) state.SkipWithError("the echo failed or changed the message's length");
  }
  state.SetBytesProcessed(state.iterations() * 2 * floats * 4);
  server->Shutdown();
}
BENCHMARK(BM_GrpcEcho)
    ->ArgNames({"MiB", "copies"})
    ->ArgsProduct({{16}, {0, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The same bytes over raw loopback TCP: C connections, each sending `MiB` to
// an echo thread that reads it all and sends it back. Args: MiB, connections.
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

void BM_RawTcpRoundTrip(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  const int connections = static_cast<int>(state.range(1));
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  listen(listener, connections);
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::vector<std::thread> echoes;
  for (int c = 0; c < connections; ++c) {
    echoes.emplace_back([&] {
      const int fd = accept(listener, nullptr, nullptr);
      std::vector<char> buffer(bytes);
      while (RecvAll(fd, buffer.data(), bytes) && SendAll(fd, buffer.data(), bytes)) {
      }
      close(fd);
    });
  }
  std::vector<int> fds(connections);
  for (int& fd : fds) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  }
  std::vector<std::vector<char>> out(connections, std::vector<char>(bytes, 1));
  std::vector<std::vector<char>> in(connections, std::vector<char>(bytes));
  // Send and receive concurrently on each connection, as gRPC's HTTP/2 flow
  // control does.
  auto round_trip = [&](int c) {
    std::thread sender([&] { SendAll(fds[c], out[c].data(), bytes); });
    RecvAll(fds[c], in[c].data(), bytes);
    sender.join();
  };
  auto round = [&] {
    std::vector<std::thread> threads;
    for (int c = 1; c < connections; ++c) threads.emplace_back(round_trip, c);
    round_trip(0);
    for (std::thread& t : threads) t.join();
  };
  for (int i = 0; i < kWarmupRounds; ++i) round();  // as BM_GrpcPushReply
  for (auto _ : state) round();
  state.SetBytesProcessed(state.iterations() * connections * 2 * bytes);
  for (int fd : fds) {
    shutdown(fd, SHUT_RDWR);
    close(fd);
  }
  for (std::thread& t : echoes) t.join();
  close(listener);
}
BENCHMARK(BM_RawTcpRoundTrip)
    ->ArgNames({"MiB", "connections"})
    ->ArgsProduct({{1, 4, 16, 64}, {1, 2, 4}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

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
