// FaultLoad and CheckStreams (see fault_load.h).
#include "tools/fault/fault_load.h"

#include <algorithm>
#include <limits>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_callback.h"
#include "onecard/v1/generation.grpc.pb.h"
#include "services/common/status.h"

namespace onecard::fault {
namespace {

using onecard::v1::GenerateRequest;
using onecard::v1::GenerateResponse;

class Runner;

class Stream : public grpc::ClientReadReactor<GenerateResponse> {
 public:
  Stream(Runner* runner, int64_t index, int prompt_index) : runner_(runner) {
    record_.index = index;
    record_.prompt_index = prompt_index;
  }
  void Start(v1::Generation::Stub* stub, const FaultLoadSpec& spec);
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;
  void Cancel() { context_.TryCancel(); }
  const StreamRecord& record() const { return record_; }  // after OnDone
  absl::Time started() const { return started_; }
  bool slow() const { return slow_; }

 private:
  Runner* const runner_;
  grpc::ClientContext context_;
  GenerateRequest request_;
  GenerateResponse chunk_;
  StreamRecord record_;
  int32_t cancel_after_ = 0;
  bool slow_ = false;
  absl::Time started_;
};

class Runner {
 public:
  Runner(const FaultLoadSpec& spec, v1::Generation::Stub* stub) : spec_(spec), stub_(stub) {}
  std::vector<StreamRecord> Run();
  void Done(Stream* stream);

 private:
  // Makes the streams to start now (under mu_); the caller starts them
  // after releasing it (gRPC may run reactions inline).
  std::vector<Stream*> Next() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CancelOverdue();

  const FaultLoadSpec& spec_;
  v1::Generation::Stub* const stub_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> done_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> overdue_ ABSL_GUARDED_BY(mu_);  // cancelled by us for want of a status
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t finished_ ABSL_GUARDED_BY(mu_) = 0;
};

void Stream::Start(v1::Generation::Stub* stub, const FaultLoadSpec& spec) {
  request_.mutable_token_ids()->mutable_ids()->Add(spec.prompts[record_.prompt_index].begin(),
                                                   spec.prompts[record_.prompt_index].end());
  request_.mutable_sampling()->set_temperature(0);
  request_.mutable_stopping()->set_max_tokens(spec.max_tokens);
  request_.mutable_stopping()->set_ignore_eos(true);
  if (!spec.api_key.empty()) context_.AddMetadata("authorization", "Bearer " + spec.api_key);
  context_.set_deadline(absl::ToChronoTime(absl::Now() + spec.deadline));
  context_.set_wait_for_ready(spec.wait_for_ready);
  cancel_after_ = spec.cancel_after_tokens;
  slow_ = spec.slow_reader_for > absl::ZeroDuration();
  started_ = absl::Now();
  stub->async()->Generate(&context_, &request_, this);
  if (!slow_) StartRead(&chunk_);
  StartCall();
}

void Stream::OnReadDone(bool ok) {
  if (!ok) return;  // OnDone follows
  record_.tokens.insert(record_.tokens.end(), chunk_.token_ids().begin(), chunk_.token_ids().end());
  if (chunk_.finish_reason() != 0) record_.finish_reason = chunk_.finish_reason();
  if (chunk_.has_usage()) record_.completion_tokens = chunk_.usage().completion_tokens();
  if (cancel_after_ > 0 && static_cast<int32_t>(record_.tokens.size()) >= cancel_after_) {
    context_.TryCancel();
  }
  StartRead(&chunk_);
}

void Stream::OnDone(const grpc::Status& status) {
  record_.done = true;
  record_.code = static_cast<int>(status.error_code());
  record_.message = status.error_message();
  runner_->Done(this);
}

std::vector<Stream*> Runner::Next() {
  std::vector<Stream*> out;
  while (in_flight_ < spec_.concurrency &&
         static_cast<int64_t>(streams_.size()) < spec_.num_requests) {
    const int64_t index = static_cast<int64_t>(streams_.size());
    streams_.push_back(std::make_unique<Stream>(
        this, index, static_cast<int>(index % static_cast<int64_t>(spec_.prompts.size()))));
    done_.push_back(false);
    overdue_.push_back(false);
    ++in_flight_;
    out.push_back(streams_.back().get());
  }
  return out;
}

void Runner::Done(Stream* stream) {
  std::vector<Stream*> next;
  {
    absl::MutexLock lock(&mu_);
    done_[stream->record().index] = true;
    --in_flight_;
    ++finished_;
    next = Next();
  }
  for (Stream* s : next) s->Start(stub_, spec_);
}

// Slow readers give up after slow_reader_for; a request with no status
// lost_after past its deadline is cancelled (and counted lost by the caller,
// which sees done == false).
void Runner::CancelOverdue() {
  std::vector<Stream*> cancel;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    for (size_t i = 0; i < streams_.size(); ++i) {
      if (done_[i]) continue;
      Stream* s = streams_[i].get();
      if (now - s->started() > spec_.deadline + spec_.lost_after) {
        overdue_[i] = true;
        cancel.push_back(s);
      } else if (s->slow() && now - s->started() > spec_.slow_reader_for) {
        cancel.push_back(s);
      }
    }
  }
  for (Stream* s : cancel) s->Cancel();
}

std::vector<StreamRecord> Runner::Run() {
  std::vector<Stream*> first;
  {
    absl::MutexLock lock(&mu_);
    first = Next();
  }
  for (Stream* s : first) s->Start(stub_, spec_);
  // Lost streams: those still without a status once cancelled and waited
  // for, far past their deadline.
  const absl::Duration give_up = spec_.deadline + 2 * spec_.lost_after;
  absl::Time last_progress = absl::Now();
  int64_t last_finished = 0;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto all_done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return finished_ == spec_.num_requests;
      };
      if (mu_.AwaitWithTimeout(absl::Condition(&all_done), absl::Milliseconds(100))) break;
      if (finished_ != last_finished) {
        last_finished = finished_;
        last_progress = absl::Now();
      }
      if (absl::Now() - last_progress > give_up) break;
    }
    CancelOverdue();
  }
  std::vector<StreamRecord> records;
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (done_[i] && !overdue_[i]) {
      records.push_back(streams_[i]->record());
      continue;
    }
    StreamRecord lost;
    lost.index = static_cast<int64_t>(i);
    records.push_back(lost);
    // gRPC may still own its reactor: leaked rather than freed under it.
    if (!done_[i]) streams_[i].release();
  }
  for (int64_t i = static_cast<int64_t>(streams_.size()); i < spec_.num_requests; ++i) {
    StreamRecord never;  // never started: the load stalled
    never.index = i;
    records.push_back(never);
  }
  return records;
}

}  // namespace

absl::StatusOr<std::vector<StreamRecord>> RunFaultLoad(const FaultLoadSpec& spec) {
  if (spec.prompts.empty()) return absl::InvalidArgumentError("prompts: none");
  if (spec.concurrency < 1) return absl::InvalidArgumentError("concurrency: must be >= 1");
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(std::numeric_limits<int>::max());
  auto stub = v1::Generation::NewStub(
      grpc::CreateCustomChannel(spec.target, grpc::InsecureChannelCredentials(), args));
  return Runner(spec, stub.get()).Run();
}

StreamAccount CheckStreams(const std::vector<StreamRecord>& records,
                           const std::vector<std::vector<int32_t>>& references,
                           int32_t max_tokens) {
  StreamAccount a;
  auto problem = [&a](std::string text) {
    if (a.problems.size() < 10) a.problems.push_back(std::move(text));
  };
  for (const StreamRecord& r : records) {
    ++a.sent;
    if (!r.done) {
      ++a.lost;
      problem(absl::StrCat("request ", r.index, ": no status"));
      continue;
    }
    const std::vector<int32_t>& ref = references[r.prompt_index];
    const size_t n = r.tokens.size();
    if (n > static_cast<size_t>(max_tokens) || n > ref.size() ||
        !std::equal(r.tokens.begin(), r.tokens.end(), ref.begin())) {
      ++a.bad_streams;
      problem(absl::StrCat("request ", r.index, ": tokens [", absl::StrJoin(r.tokens, ","),
                           "] are not a prefix of the reference"));
    }
    if (r.code != 0) {
      ++a.failed[services::GrpcCodeName(r.code)];
      continue;
    }
    if (n == static_cast<size_t>(max_tokens) && r.finish_reason != 0 &&
        r.completion_tokens == max_tokens) {
      ++a.completed;
      continue;
    }
    ++a.lost;  // OK, yet the stream is incomplete: tokens went missing
    problem(absl::StrCat("request ", r.index, ": OK with ", n, " tokens, finish reason ",
                         r.finish_reason, ", usage ", r.completion_tokens));
  }
  return a;
}

std::string FailedText(const std::map<std::string, int64_t>& failed) {
  if (failed.empty()) return "-";
  std::vector<std::string> parts;
  for (const auto& [code, count] : failed) parts.push_back(absl::StrCat(code, "=", count));
  return absl::StrJoin(parts, " ");
}

}  // namespace onecard::fault
