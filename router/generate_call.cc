// GenerateCall: admission, dispatch and the proxied worker stream of one
// Generate call (see generate_call.h for the protocol and the lifetime).
// Tested by tests/router/router_service_test.cc, http_server_test.cc and the
// integration tests.
#include "router/generate_call.h"

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "router/access_log.h"
#include "services/common/proto_time.h"
#include "services/common/status.h"

namespace onecard::router {
namespace {

// A client's cancel this close to its deadline is the deadline passing.
constexpr absl::Duration kDeadlineSlack = absl::Milliseconds(100);

// How a worker call's end reflects on the worker's health.
CallOutcome Classify(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::DATA_LOSS:
    case grpc::StatusCode::UNIMPLEMENTED:
      return CallOutcome::kFailure;
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return CallOutcome::kNeutral;
    default:
      return CallOutcome::kSuccess;
  }
}

// Whether a worker call that failed before any token may go to another one.
bool Retryable(grpc::StatusCode code) {
  return Classify(grpc::Status(code, "")) == CallOutcome::kFailure ||
         code == grpc::StatusCode::RESOURCE_EXHAUSTED || code == grpc::StatusCode::CANCELLED;
}

std::string Describe(const grpc::Status& status) {
  return absl::StrCat(services::FromGrpcStatus(status).ToString());
}

}  // namespace

class GenerateCall::Attempt : public grpc::ClientReadReactor<onecard::v1::GenerateResponse> {
 public:
  Attempt(GenerateCall* call, Assignment assignment)
      : assignment(std::move(assignment)), call_(call) {}
  void OnReadDone(bool ok) override { call_->OnChunk(this, ok); }
  void OnDone(const grpc::Status& status) override { call_->OnAttemptDone(this, status); }

  const Assignment assignment;
  grpc::ClientContext context;
  onecard::v1::GenerateResponse chunk;

 private:
  GenerateCall* const call_;
};

GenerateCall::GenerateCall(RouterCore* core, ClientStream* stream, ClientInfo client,
                           onecard::v1::GenerateRequest request, absl::Status parsed)
    : core_(core),
      stream_(stream),
      client_(std::move(client)),
      request_(std::move(request)),
      parsed_(std::move(parsed)),
      arrived_(core->clock()->Now()),
      id_(core->NextId()) {
  core_->CallStarted();
}

GenerateCall::~GenerateCall() { core_->CallEnded(); }

void GenerateCall::Ref() {
  absl::MutexLock lock(&mu_);
  ++refs_;
}

void GenerateCall::Unref() {
  bool last;
  {
    absl::MutexLock lock(&mu_);
    last = --refs_ == 0;
  }
  if (last) delete this;
}

void GenerateCall::Start() {
  if (std::optional<Refusal> refusal = Admit()) {
    core_->metrics().Rejected(refusal->reason);
    End(refusal->status);
  }
}

absl::Time GenerateCall::Deadline() const {
  absl::Time deadline = client_.deadline;
  const RouterOptions& o = core_->options();
  if (deadline == absl::InfiniteFuture()) deadline = arrived_ + o.default_deadline;
  return std::min(deadline, arrived_ + o.max_deadline);
}

std::optional<GenerateCall::Refusal> GenerateCall::Admit() {
  if (core_->draining()) {
    return Refusal{absl::UnavailableError("router is draining; send new requests elsewhere"),
                   RejectReason::kDraining};
  }
  if (std::optional<Refusal> refusal = Prepare()) return refusal;
  RateLimiter::Decision decision = core_->limiter().Admit(tenant_->name, prepared_.cost_tokens());
  if (!decision.admitted) {
    core_->metrics().RateLimited(tenant_->name, decision.limit);
    absl::Status s = absl::ResourceExhaustedError(
        std::string_view(decision.limit) == "streams"
            ? absl::StrCat("tenant '", tenant_->name, "' has max_concurrent_streams open")
            : absl::StrCat("rate limit: tenant '", tenant_->name, "' is over its ", decision.limit,
                           "/s limit"));
    return Refusal{services::WithRetryAfter(s, decision.retry_after), RejectReason::kRateLimited};
  }
  reserved_ = true;
  if (std::optional<Refusal> refusal = Enqueue()) return refusal;
  core_->metrics().Admitted(prepared_.priority);
  return std::nullopt;
}

std::optional<GenerateCall::Refusal> GenerateCall::Prepare() {
  absl::StatusOr<const Tenant*> tenant = core_->keys().Authenticate(client_.authorization);
  if (!tenant.ok()) return Refusal{tenant.status(), RejectReason::kUnauthenticated};
  tenant_ = *tenant;
  if (!parsed_.ok()) return Refusal{parsed_, RejectReason::kInvalidArgument};
  absl::StatusOr<PreparedRequest> prepared = core_->preparer().Prepare(request_, *tenant_);
  if (!prepared.ok()) {
    const bool denied = prepared.status().code() == absl::StatusCode::kPermissionDenied;
    return Refusal{prepared.status(),
                   denied ? RejectReason::kPermissionDenied : RejectReason::kInvalidArgument};
  }
  prepared_ = std::move(*prepared);
  if (prepared_.worker_request.request_id().empty()) {
    prepared_.worker_request.set_request_id(absl::StrCat("rtr-", id_));
  }
  deadline_ = Deadline();
  return std::nullopt;
}

std::optional<GenerateCall::Refusal> GenerateCall::Enqueue() {
  {
    absl::MutexLock lock(&mu_);
    queued_ = true;
    ++refs_;  // the dispatch callback's
  }
  const auto& ids = prepared_.worker_request.prompt_token_ids();
  DispatchRequest r{id_,
                    prepared_.priority,
                    prepared_.cost_tokens(),
                    PrefixAffinityHash({ids.begin(), ids.end()},
                                       core_->options().config.dispatch().affinity_prefix_tokens()),
                    deadline_,
                    [this](absl::StatusOr<Assignment> a) { OnDispatched(std::move(a)); }};
  absl::Status submitted = core_->dispatcher().Submit(std::move(r));
  if (submitted.ok()) return std::nullopt;  // the callback may even have run already
  absl::MutexLock lock(&mu_);
  queued_ = false;
  --refs_;  // never zero here: the server reactor holds one
  bool full = submitted.code() == absl::StatusCode::kResourceExhausted;
  if (full) submitted = services::WithRetryAfter(submitted, absl::Milliseconds(250));
  return Refusal{submitted, full ? RejectReason::kQueueFull : RejectReason::kNoWorker};
}

void GenerateCall::OnDispatched(absl::StatusOr<Assignment> assignment) {
  if (!assignment.ok()) {
    {
      absl::MutexLock lock(&mu_);
      queued_ = false;
    }
    absl::StatusCode code = assignment.status().code();
    if (code == absl::StatusCode::kDeadlineExceeded) {
      core_->metrics().Rejected(RejectReason::kQueueTimeout);
    } else if (code == absl::StatusCode::kUnavailable) {
      core_->metrics().Rejected(RejectReason::kNoWorker);
    }
    End(code == absl::StatusCode::kCancelled ? ClientGone() : assignment.status());
    Unref();
    return;
  }
  Attempt* attempt = nullptr;
  bool first = false;
  {
    absl::MutexLock lock(&mu_);
    queued_ = false;
    if (!cancelled_) {
      attempts_.push_back(std::make_unique<Attempt>(this, *assignment));
      attempt = current_ = attempts_.back().get();
      ++refs_;  // the attempt's, until its OnDone
      first = attempts_.size() == 1;
      if (first) router_queue_wait_ = assignment->queue_wait;
    }
  }
  if (attempt == nullptr) {
    core_->dispatcher().Finish(assignment->worker_id, CallOutcome::kNeutral);
    End(ClientGone());
  } else {
    if (first) core_->metrics().QueueWait(prepared_.priority, assignment->queue_wait);
    StartAttempt(attempt);
  }
  Unref();
}

void GenerateCall::StartAttempt(Attempt* attempt) {
  if (deadline_ != absl::InfiniteFuture()) {
    attempt->context.set_deadline(absl::ToChronoTime(deadline_));
  }
  core_->AttachCredentials(&attempt->context);
  onecard::v1::Worker::Stub* stub = core_->Stub(attempt->assignment.address);
  stub->async()->Generate(&attempt->context, &prepared_.worker_request, attempt);
  attempt->AddHold();  // reads are started from OnWriteDone, outside its reactions
  attempt->StartRead(&attempt->chunk);
  attempt->StartCall();
}

void GenerateCall::OnChunk(Attempt* attempt, bool ok) {
  if (!ok) {
    attempt->RemoveHold();  // the stream ended: OnDone follows
    return;
  }
  bool forward;
  std::optional<absl::Duration> ttft;
  {
    absl::MutexLock lock(&mu_);
    forward = !cancelled_ && !finished_ && attempt == current_;
    if (forward) {
      out_.Swap(&attempt->chunk);
      attempt->chunk.Clear();
      if (out_.token_ids_size() > 0 && tokens_sent_ == 0) {
        first_token_at_ = core_->clock()->Now();
        ttft = first_token_at_ - arrived_;
      }
      tokens_sent_ += out_.token_ids_size();
      if (out_.finish_reason() != onecard::v1::FINISH_REASON_UNSPECIFIED) RewriteTiming(&out_);
      write_in_flight_ = true;
    }
  }
  if (ttft.has_value()) core_->metrics().FirstToken(client_.door, prepared_.priority, *ttft);
  if (forward) {
    stream_->Send(out_);
  } else {
    attempt->StartRead(&attempt->chunk);  // drain the cancelled stream to its end
  }
}

void GenerateCall::RewriteTiming(onecard::v1::GenerateResponse* chunk) {
  onecard::v1::Timing* t = chunk->mutable_timing();
  const absl::Duration worker_queue = services::FromProtoDuration(t->queue_time());
  services::ToProtoDuration(router_queue_wait_ + worker_queue, t->mutable_queue_time());
  if (first_token_at_ != absl::InfiniteFuture()) {
    services::ToProtoDuration(first_token_at_ - arrived_, t->mutable_time_to_first_token());
  }
  services::ToProtoDuration(core_->clock()->Now() - arrived_, t->mutable_total_time());
}

void GenerateCall::OnWriteDone(bool ok) {
  Attempt* attempt;
  std::optional<absl::Status> finish;
  {
    absl::MutexLock lock(&mu_);
    write_in_flight_ = false;
    if (!ok) cancelled_ = true;  // the client is gone
    attempt = current_;
    finish = std::move(pending_finish_);
    pending_finish_.reset();
  }
  if (finish.has_value()) {
    FinishNow(*finish);
    return;
  }
  if (attempt == nullptr) return;
  if (!ok) attempt->context.TryCancel();
  attempt->StartRead(&attempt->chunk);
}

void GenerateCall::OnClientCancel() {
  bool queued;
  Attempt* attempt;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    queued = queued_;
    attempt = current_;
  }
  if (queued) core_->dispatcher().Cancel(id_);  // its callback ends the call
  if (attempt != nullptr) attempt->context.TryCancel();
}

void GenerateCall::OnAttemptDone(Attempt* attempt, const grpc::Status& status) {
  core_->dispatcher().Finish(attempt->assignment.worker_id, Classify(status));
  bool cancelled;
  int64_t tokens;
  size_t attempts;
  {
    absl::MutexLock lock(&mu_);
    current_ = nullptr;
    cancelled = cancelled_;
    tokens = tokens_sent_;
    attempts = attempts_.size();
  }
  const std::string& worker = attempt->assignment.worker_id;
  if (status.ok()) {
    End(absl::OkStatus());
  } else if (cancelled) {
    End(ClientGone());
  } else if (tokens == 0 &&
             attempts < static_cast<size_t>(core_->options().config.dispatch().max_attempts()) &&
             Retryable(status.error_code()) && core_->clock()->Now() < deadline_) {
    Retry(*attempt, status);
  } else if (tokens > 0 && Classify(status) == CallOutcome::kFailure) {
    End(absl::UnavailableError(absl::StrCat("worker ", worker, " failed after the first token (",
                                            tokens, " sent): ", Describe(status))));
  } else if (tokens == 0 && Classify(status) == CallOutcome::kFailure) {
    End(absl::UnavailableError(absl::StrCat("worker ", worker,
                                            " failed before the first token on attempt ", attempts,
                                            ": ", Describe(status))));
  } else {
    absl::Status s = services::FromGrpcStatus(status);
    if (std::optional<absl::Duration> hint = services::RetryAfterFromTrailers(attempt->context)) {
      s = services::WithRetryAfter(s, *hint);
    }
    End(s);
  }
  Unref();  // the attempt's
}

void GenerateCall::Retry(const Attempt& failed, const grpc::Status& status) {
  absl::flat_hash_set<std::string> tried;
  {
    absl::MutexLock lock(&mu_);
    queued_ = true;
    ++refs_;  // the dispatch callback's
    for (const std::unique_ptr<Attempt>& a : attempts_) tried.insert(a->assignment.worker_id);
  }
  core_->metrics().Retried();
  DispatchRequest r{id_,
                    prepared_.priority,
                    prepared_.cost_tokens(),
                    0,
                    deadline_,
                    [this](absl::StatusOr<Assignment> a) { OnDispatched(std::move(a)); }};
  absl::Status s = core_->dispatcher().Resubmit(std::move(r), arrived_, std::move(tried));
  if (s.ok()) return;
  {
    absl::MutexLock lock(&mu_);
    queued_ = false;
    --refs_;  // never zero here: the attempt still holds one
  }
  if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    // Every worker is full: the worker's own answer and hint are the right ones.
    absl::Status full = services::FromGrpcStatus(status);
    std::optional<absl::Duration> hint = services::RetryAfterFromTrailers(failed.context);
    End(services::WithRetryAfter(full, hint.value_or(absl::Milliseconds(250))));
    return;
  }
  End(absl::UnavailableError(absl::StrCat("worker ", failed.assignment.worker_id,
                                          " failed before the first token (", Describe(status),
                                          ") and no worker it has not tried is available")));
}

void GenerateCall::End(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
    if (write_in_flight_) {
      pending_finish_ = std::move(status);
      return;
    }
  }
  FinishNow(status);
}

void GenerateCall::FinishNow(const absl::Status& status) {
  int64_t tokens;
  absl::Time first_token_at;
  {
    absl::MutexLock lock(&mu_);
    tokens = tokens_sent_;
    first_token_at = first_token_at_;
  }
  if (reserved_) {
    int64_t used = tokens > 0 ? prepared_.prompt_tokens + tokens : 0;
    core_->limiter().Finish(tenant_->name, prepared_.cost_tokens(), used);
  }
  const absl::Duration total = core_->clock()->Now() - arrived_;
  core_->metrics().Finished(client_.door, prepared_.priority, static_cast<int>(status.code()),
                            total);
  LogAccess({.request_id = prepared_.worker_request.request_id().empty()
                               ? request_.request_id()
                               : prepared_.worker_request.request_id(),
             .tenant = tenant_ == nullptr ? "" : tenant_->name,
             .priority = tenant_ == nullptr ? "" : PriorityClassName(prepared_.priority),
             .prompt_tokens = prepared_.prompt_tokens,
             .completion_tokens = tokens,
             .time_to_first_token = first_token_at == absl::InfiniteFuture()
                                        ? std::nullopt
                                        : std::optional(first_token_at - arrived_),
             .total_time = total,
             .code = status.code()});
  stream_->End(status);  // the last use of `this` by this thread: the door may Release now
}

absl::Status GenerateCall::ClientGone() const {
  // The deadline is the client's (a wall-clock time), not the router's clock.
  // At its deadline the client library cancels the call itself, so the
  // cancel may arrive a moment before the router's own deadline timer fires.
  if (absl::Now() + kDeadlineSlack >= client_.deadline) {
    return absl::DeadlineExceededError("the client's deadline passed");
  }
  return absl::CancelledError("cancelled by the client");
}

}  // namespace onecard::router
