// LoadRunner: closed-loop and Poisson load over gRPC callback streams (see
// load_runner.h). Tested by tests/tools/bench/serve/load_runner_test.cc.
#include "tools/bench/serve/load_runner.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <random>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_callback.h"
#include "onecard/v1/generation.grpc.pb.h"

namespace onecard::bench::serve {

using onecard::v1::GenerateRequest;
using onecard::v1::GenerateResponse;

std::vector<int32_t> SyntheticPrompt(uint64_t seed, int64_t index, int32_t n, int32_t vocab_size) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(index) * 7919 + 1);
  std::uniform_int_distribution<int32_t> id(100, std::max(101, vocab_size - 1));
  std::vector<int32_t> ids(n);
  for (int32_t& x : ids) x = id(rng);
  return ids;
}

uint64_t ClassPromptSeed(uint64_t seed, const RequestClass& cls) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the name, then the length
  for (const unsigned char c : cls.name) h = (h ^ c) * 1099511628211ull;
  h = (h ^ static_cast<uint64_t>(cls.prompt_tokens)) * 1099511628211ull;
  return seed ^ h;
}

namespace {

class Phase;

// One conversation: `turns` requests in order, each prompt holding the
// previous prompt and answer.
class Conversation {
 public:
  Conversation(Phase* phase, const RequestClass* cls, int64_t index)
      : phase_(phase), cls_(cls), index_(index) {}
  void StartTurn();
  void OnTurnDone(RequestRecord record, std::vector<int32_t> answer);

 private:
  Phase* const phase_;
  const RequestClass* const cls_;
  const int64_t index_;
  int32_t turn_ = 0;
  std::vector<int32_t> context_;
};

class Stream : public grpc::ClientReadReactor<GenerateResponse> {
 public:
  Stream(Conversation* conversation, const std::string& class_name) : conversation_(conversation) {
    record_.class_name = class_name;
  }
  void Start(onecard::v1::Generation::Stub* stub, const LoadSpec& spec, GenerateRequest request);
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  Conversation* const conversation_;
  grpc::ClientContext context_;
  GenerateRequest request_;
  GenerateResponse chunk_;
  RequestRecord record_;
  std::vector<int32_t> answer_;
  absl::Time sent_;
};

class Phase {
 public:
  Phase(const LoadSpec& spec, onecard::v1::Generation::Stub* stub, int64_t conversations,
        absl::Duration duration, bool counted, int64_t first_index)
      : spec_(spec),
        stub_(stub),
        conversations_(conversations > 0 ? conversations : std::numeric_limits<int64_t>::max()),
        duration_(duration),
        counted_(counted),
        next_index_(first_index) {}

  std::vector<RequestRecord> Run();
  void Record(RequestRecord record);
  void ConversationDone(Conversation* conversation);
  const LoadSpec& spec() const { return spec_; }
  onecard::v1::Generation::Stub* stub() { return stub_; }

 private:
  bool MayStart() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts the next arrival's conversations in (one, or a class's burst) and
  // makes them; the caller starts them after releasing mu_ (gRPC may run
  // reactions inline in StartCall).
  std::vector<Conversation*> Next() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunPoisson();
  void PrintProgress(bool last);

  const LoadSpec& spec_;
  onecard::v1::Generation::Stub* const stub_;
  const int64_t conversations_;
  const absl::Duration duration_;
  const bool counted_;
  absl::Time start_;

  mutable absl::Mutex mu_;
  int64_t next_index_ ABSL_GUARDED_BY(mu_);
  int64_t started_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t ok_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t tokens_ ABSL_GUARDED_BY(mu_) = 0;
  bool arrivals_done_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<RequestRecord> records_ ABSL_GUARDED_BY(mu_);
};

void Stream::Start(onecard::v1::Generation::Stub* stub, const LoadSpec& spec,
                   GenerateRequest request) {
  request_ = std::move(request);
  if (!spec.api_key.empty()) context_.AddMetadata("authorization", "Bearer " + spec.api_key);
  context_.set_deadline(absl::ToChronoTime(absl::Now() + spec.request_timeout));
  stub->async()->Generate(&context_, &request_, this);
  StartRead(&chunk_);
  sent_ = absl::Now();
  StartCall();
}

void Stream::OnReadDone(bool ok) {
  if (!ok) return;  // OnDone follows
  if (chunk_.token_ids_size() > 0 && !record_.ttft.has_value()) record_.ttft = absl::Now() - sent_;
  record_.output_tokens += chunk_.token_ids_size();
  answer_.insert(answer_.end(), chunk_.token_ids().begin(), chunk_.token_ids().end());
  StartRead(&chunk_);
}

void Stream::OnDone(const grpc::Status& status) {
  record_.code = static_cast<int>(status.error_code());
  record_.e2e = absl::Now() - sent_;
  Conversation* conversation = conversation_;
  RequestRecord record = std::move(record_);
  std::vector<int32_t> answer = std::move(answer_);
  delete this;
  conversation->OnTurnDone(std::move(record), std::move(answer));
}

void Conversation::StartTurn() {
  const LoadSpec& spec = phase_->spec();
  std::vector<int32_t> fresh =
      SyntheticPrompt(ClassPromptSeed(spec.seed, *cls_), index_ * cls_->turns + turn_,
                      cls_->prompt_tokens, spec.vocab_size);
  context_.insert(context_.end(), fresh.begin(), fresh.end());
  GenerateRequest r;
  r.set_model(spec.model);
  r.mutable_token_ids()->mutable_ids()->Add(context_.begin(), context_.end());
  r.mutable_sampling()->set_temperature(0);
  r.mutable_stopping()->set_max_tokens(cls_->max_tokens);
  r.mutable_stopping()->set_ignore_eos(spec.ignore_eos);
  r.set_priority(cls_->priority);
  auto* stream = new Stream(this, cls_->name);  // deletes itself
  stream->Start(phase_->stub(), spec, std::move(r));
}

void Conversation::OnTurnDone(RequestRecord record, std::vector<int32_t> answer) {
  const bool ok = record.code == 0;
  phase_->Record(std::move(record));
  if (ok && ++turn_ < cls_->turns) {
    context_.insert(context_.end(), answer.begin(), answer.end());
    StartTurn();
    return;
  }
  phase_->ConversationDone(this);
}

bool Phase::MayStart() const {
  if (started_ >= conversations_) return false;
  return duration_ <= absl::ZeroDuration() || absl::Now() - start_ < duration_;
}

std::vector<Conversation*> Phase::Next() {
  std::mt19937_64 rng(spec_.seed * 31 + static_cast<uint64_t>(next_index_));
  double total = 0;  // weights are request shares; a burst is one arrival
  for (const RequestClass& c : spec_.mix) total += c.weight / c.burst;
  double pick = std::uniform_real_distribution<double>(0, total)(rng);
  const RequestClass* cls = &spec_.mix.back();
  for (const RequestClass& c : spec_.mix) {
    if (pick < c.weight / c.burst) {
      cls = &c;
      break;
    }
    pick -= c.weight / c.burst;
  }
  std::vector<Conversation*> out;
  for (int32_t b = 0; b < cls->burst && started_ < conversations_; ++b) {
    ++started_;
    ++in_flight_;
    out.push_back(new Conversation(this, cls, next_index_++));
  }
  return out;
}

void Phase::Record(RequestRecord record) {
  absl::MutexLock lock(&mu_);
  if (record.code == 0) {
    ++ok_;
  } else {
    ++failed_;
  }
  tokens_ += record.output_tokens;
  if (counted_) records_.push_back(std::move(record));
}

void Phase::ConversationDone(Conversation* conversation) {
  delete conversation;
  std::vector<Conversation*> next;
  {
    absl::MutexLock lock(&mu_);
    --in_flight_;
    if (spec_.mode == ArrivalMode::kClosedLoop && MayStart()) next = Next();
  }
  for (Conversation* c : next) c->StartTurn();
}

void Phase::PrintProgress(bool last) {
  if (!spec_.progress) return;
  // A terminal gets one line rewritten in place; a log a line every 10 s.
  static const bool tty = isatty(fileno(stderr)) != 0;
  absl::MutexLock lock(&mu_);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  if (!tty && !last && static_cast<int64_t>(seconds) % 10 != 0) return;
  std::fprintf(stderr, "%s%s %7.1fs  sent %lld  ok %lld  failed %lld  in flight %lld  %.0f tok/s%s",
               tty ? "\r" : "", counted_ ? "serve " : "warmup", seconds,
               static_cast<long long>(started_), static_cast<long long>(ok_),
               static_cast<long long>(failed_), static_cast<long long>(in_flight_),
               seconds > 0 ? tokens_ / seconds : 0.0, tty && !last ? "   " : "\n");
  std::fflush(stderr);
}

void Phase::RunPoisson() {
  std::mt19937_64 rng(spec_.seed * 977 + 5);
  std::exponential_distribution<double> gap(spec_.rate_per_second);
  absl::Time next = start_;
  while (true) {
    next += absl::Seconds(gap(rng));
    absl::Time now = absl::Now();
    if (next > now) absl::SleepFor(next - now);  // the arrival process itself
    std::vector<Conversation*> next;
    {
      absl::MutexLock lock(&mu_);
      auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return in_flight_ < spec_.max_in_flight;
      };
      mu_.Await(absl::Condition(&room));
      if (!MayStart()) return;
      next = Next();
    }
    for (Conversation* c : next) c->StartTurn();
  }
}

std::vector<RequestRecord> Phase::Run() {
  start_ = absl::Now();
  std::thread arrivals;
  if (spec_.mode == ArrivalMode::kPoisson) {
    arrivals = std::thread([this] {
      RunPoisson();
      absl::MutexLock lock(&mu_);
      arrivals_done_ = true;
    });
  } else {
    std::vector<Conversation*> first;
    {
      absl::MutexLock lock(&mu_);
      while (static_cast<int64_t>(first.size()) < spec_.users && MayStart()) {
        for (Conversation* c : Next()) first.push_back(c);
      }
      arrivals_done_ = true;  // the rest start as conversations end
    }
    for (Conversation* c : first) c->StartTurn();
  }
  while (true) {
    bool done;
    {
      absl::MutexLock lock(&mu_);
      auto finished = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return arrivals_done_ && in_flight_ == 0 &&
               (spec_.mode == ArrivalMode::kPoisson || !MayStart());
      };
      done = mu_.AwaitWithTimeout(absl::Condition(&finished), absl::Seconds(1));
    }
    if (done) break;
    PrintProgress(false);
  }
  if (arrivals.joinable()) arrivals.join();
  PrintProgress(true);
  absl::MutexLock lock(&mu_);
  return std::move(records_);
}

}  // namespace

absl::StatusOr<LoadRun> RunLoad(const LoadSpec& spec) {
  if (absl::Status s = ValidateLoadSpec(spec); !s.ok()) return s;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(std::numeric_limits<int>::max());
  auto stub = onecard::v1::Generation::NewStub(
      grpc::CreateCustomChannel(spec.target, grpc::InsecureChannelCredentials(), args));
  if (spec.warmup_requests > 0) {
    LoadSpec warm = spec;
    warm.mode = ArrivalMode::kClosedLoop;
    warm.users = std::min<int32_t>(spec.users, static_cast<int32_t>(spec.warmup_requests));
    Phase(warm, stub.get(), spec.warmup_requests, absl::ZeroDuration(), false, 1'000'000'000).Run();
  }
  const absl::Time start = absl::Now();
  std::vector<RequestRecord> records =
      Phase(spec, stub.get(), spec.num_requests, spec.duration, true, 0).Run();
  LoadRun run;
  run.result = Summarize(records, spec.mix, absl::Now() - start);
  run.records = std::move(records);
  return run;
}

}  // namespace onecard::bench::serve
