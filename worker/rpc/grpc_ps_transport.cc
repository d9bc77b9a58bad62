#include "worker/rpc/grpc_ps_transport.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "proto/grpc_status.h"
#include "proto/health.grpc.pb.h"
#include "proto/push_codec.h"

namespace sketchfuse {

// A push, shared by its attempts, the threads that back off between them and
// gRPC's completion callbacks. The transport counts live Calls: its
// destructor (and Reconnect) waits until every Call is destroyed, so the last
// reference to a channel is always dropped by the transport, never by a
// Call's ClientContext on one of gRPC's callback threads (where Debian's gRPC
// 1.51 tears its callback completion queue down from its own thread and later
// aborts with "assertion failed: prior > 0"; grpc/grpc#32584).
struct GrpcPsTransport::Call {
  explicit Call(GrpcPsTransport* transport) : alive(transport) {}

  // Declared first, so destroyed last, after the context.
  struct Alive {
    explicit Alive(GrpcPsTransport* transport) : transport(transport) {
      std::lock_guard<std::mutex> lock(transport->mu_);
      ++transport->live_calls_;
    }
    ~Alive() {
      std::lock_guard<std::mutex> lock(transport->mu_);
      if (--transport->live_calls_ == 0) transport->idle_.notify_all();
    }
    GrpcPsTransport* const transport;
  } alive;
  int shard = 0;
  uint32_t group = 0;
  uint32_t round = 0;
  grpc::ByteBuffer request;  // shares the payload's values (push_codec)
  uint64_t dim = 0;          // the group's elements: what a reply may hold
  ReplyDim reply_dim = ReplyDim::kGroup;  // factors for a push of candidate values
  grpc::ByteBuffer reply;
  std::unique_ptr<grpc::ClientContext> context;
  absl::Time deadline;  // of the attempt in flight
  absl::Time started;   // the first attempt's start: ABORTED is retried until push_deadline after it
  int attempts = 0;
  int waits = 0;  // attempts answered ABORTED (not counted against max_attempts)
  absl::Duration backoff;
  PushDone done;
};

GrpcPsTransport::GrpcPsTransport(const std::vector<std::string>& shard_addresses, RpcChannelOptions options,
                         RetryPolicy policy)
    : options_(std::move(options)), policy_(policy), addresses_(shard_addresses), dice_(policy.inject) {
  for (const std::string& address : addresses_) {
    stubs_.push_back(std::make_unique<grpc::GenericStub>(MakeRpcChannel(address, options_)));
  }
}

absl::Status GrpcPsTransport::ProbeShards(absl::Duration timeout) const {
  for (size_t shard = 0; shard < addresses_.size(); ++shard) {
    auto health = grpc::health::v1::Health::NewStub(MakeRpcChannel(addresses_[shard], options_));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status = health->Check(&context, request, &response);
    if (!status.ok()) {
      return absl::UnavailableError(absl::StrCat("shard ", shard, " at ", addresses_[shard],
                                                 " does not answer its health check: ", status.error_message()));
    }
    if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
      return absl::UnavailableError(absl::StrCat("shard ", shard, " at ", addresses_[shard], " is not serving"));
    }
  }
  return absl::OkStatus();
}

void GrpcPsTransport::Reconnect() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return live_calls_ == 0; });  // the old channels go here, not on gRPC's threads
  for (size_t shard = 0; shard < addresses_.size(); ++shard) {
    stubs_[shard] = std::make_unique<grpc::GenericStub>(MakeRpcChannel(addresses_[shard], options_));
  }
}

GrpcPsTransport::~GrpcPsTransport() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return live_calls_ == 0; });
}

void GrpcPsTransport::Send(PushTarget target, std::shared_ptr<const Payload> payload, PushDone done) {
  const int shard = target.shard;
  if (shard < 0 || shard >= num_shards()) {
    done(absl::InvalidArgumentError(absl::StrCat("group ", target.group, " maps to shard ", shard, " of ",
                                                 num_shards())));
    return;
  }
  auto call = std::make_shared<Call>(this);
  call->shard = shard;
  call->group = target.group;
  call->round = target.round;
  v1::RoundKey round;
  round.set_job(target.job);
  round.set_step(target.step);
  round.set_group(target.group);
  round.set_round(target.round);
  call->dim = payload->dim;
  if (payload->kind == PayloadKind::kCandidateValues) call->reply_dim = ReplyDim::kFactorsAtMostGroup;
  call->request = EncodePushRequest(round, target.worker, std::move(payload));
  call->backoff = policy_.initial_backoff;
  call->done = std::move(done);
  call->started = absl::Now();
  Attempt(std::move(call));
}

void GrpcPsTransport::Attempt(std::shared_ptr<Call> call) {
  ++call->attempts;
  switch (dice_.Draw()) {
    case FaultDice::Fault::kNone:
      SendAttempt(std::move(call), /*drop_reply=*/false);
      return;
    case FaultDice::Fault::kFailBeforeSend:
      ++injected_;
      Finish(std::move(call), grpc::Status(grpc::StatusCode::UNAVAILABLE, "injected fault: failed before sending"));
      return;
    case FaultDice::Fault::kDropReply:
      ++injected_;
      SendAttempt(std::move(call), /*drop_reply=*/true);
      return;
    case FaultDice::Fault::kDelay: {
      ++injected_;
      const absl::Duration wait = policy_.inject.delay_time;
      std::thread([this, call, wait] {
        absl::SleepFor(wait);
        SendAttempt(call, /*drop_reply=*/false);
      }).detach();
      return;
    }
  }
}

void GrpcPsTransport::SendAttempt(std::shared_ptr<Call> call, bool drop_reply) {
  call->context = std::make_unique<grpc::ClientContext>();
  AddCallCredentials(options_, *call->context);
  call->deadline = absl::Now() + policy_.push_deadline;
  call->context->set_deadline(absl::ToChronoTime(call->deadline));
  call->reply.Clear();
  // A re-push sends the same buffer again: gRPC sends a copy that shares its
  // slices and leaves `request` as it was.
  stubs_[call->shard]->UnaryCall(call->context.get(), kPushMethod, grpc::StubOptions(), &call->request,
                                 &call->reply, [this, call, drop_reply](grpc::Status status) {
                                   if (status.ok() && drop_reply) {
                                     status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                                           "injected fault: the reply was lost");
                                   }
                                   Finish(call, status);
                                 });
}

void GrpcPsTransport::Finish(std::shared_ptr<Call> call, const grpc::Status& status) {
  // DEADLINE_EXCEEDED before this attempt's own deadline comes from the
  // shard: it failed the round at its round deadline (other workers are
  // late) and freed it, so a re-push starts it afresh and the late workers
  // can still join it. The shard is up, so the re-push goes after the
  // shortest backoff, which does not grow: a waiting worker is then at the
  // shard all but initial_backoff of each round deadline, and a late
  // worker's push meets it whenever it comes. (Backing off to max_backoff,
  // two workers that each came back from a restarted shard could keep
  // missing each other's round for good.) Not counted against the attempts'
  // budget: re-pushed until the push deadline, as for ABORTED.
  const bool waiting_for_workers = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
                                   absl::Now() < call->deadline &&
                                   absl::Now() + policy_.initial_backoff < call->started + policy_.push_deadline;
  // RESOURCE_EXHAUSTED: the shard's caps on open rounds or held bytes; its
  // rounds in flight complete and free them.
  const bool retriable = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                         status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
  // ABORTED: the round cannot open in this worker's name yet (the shard's
  // step window: its slot and parking there are taken) but opens when
  // another worker pushes it; pushed again until the push deadline, apart
  // from the attempts' budget, so the worker does not race the others.
  const bool waiting_for_round = status.error_code() == grpc::StatusCode::ABORTED &&
                                 absl::Now() + call->backoff < call->started + policy_.push_deadline;
  if (waiting_for_round || waiting_for_workers) ++call->waits;
  if (waiting_for_round || waiting_for_workers ||
      (retriable && call->attempts - call->waits < policy_.max_attempts)) {
    ++retries_;
    if (waiting_for_workers) call->backoff = policy_.initial_backoff;
    // Back off on a thread of our own: gRPC's callback threads must not block.
    const absl::Duration wait = call->backoff;
    call->backoff = std::min(call->backoff * 2, policy_.max_backoff);
    std::thread([this, call, wait] {
      absl::SleepFor(wait);
      Attempt(call);
    }).detach();
    return;
  }
  absl::StatusOr<PushOutcome> outcome;
  if (!status.ok()) {
    outcome = absl::Status(FromGrpcStatus(status).code(),
                           absl::StrCat("push of group ", call->group,
                                        call->round > 0 ? absl::StrCat(" (round ", call->round, ")") : "",
                                        " to shard ", call->shard, " (", addresses_[call->shard],
                                        ") failed after ", call->attempts,
                                        " attempt(s): ", status.error_message()));
  } else {
    const size_t reply_bytes = call->reply.Length();
    absl::StatusOr<PushReplyParts> reply = DecodePushReply(call->reply, call->dim, call->reply_dim);
    call->reply.Clear();
    if (!reply.ok()) {
      // Another hash family is the shard's build, not a garbled reply.
      const bool foreign = reply.status().code() == absl::StatusCode::kFailedPrecondition;
      outcome = absl::Status(
          foreign ? absl::StatusCode::kFailedPrecondition : absl::StatusCode::kInternal,
          absl::StrCat("shard ", call->shard, " (", addresses_[call->shard], ") answered group ", call->group,
                       foreign ? ": " : " with a malformed update: ", reply.status().message()));
    } else {
      PushOutcome ok;
      ok.update = std::move(reply->update);
      ok.contributors = reply->contributors;
      ok.attempts = call->attempts;
      ok.bytes_sent = call->request.Length();
      ok.bytes_received = reply_bytes;
      outcome = std::move(ok);
    }
  }
  call->done(std::move(outcome));
}

TransportFactory GrpcTransports(RpcChannelOptions options, RetryPolicy policy) {
  return [options, policy](const std::vector<std::string>& shard_addresses) -> std::unique_ptr<PsTransport> {
    return std::make_unique<GrpcPsTransport>(shard_addresses, options, policy);
  };
}

}  // namespace sketchfuse
