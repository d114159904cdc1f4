// FakeWorker (see fake_worker.h).
#include "tests/router/testing/fake_worker.h"

#include <algorithm>

#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "services/common/status.h"

namespace onecard::router::testing {

using onecard::v1::GenerateResponse;

class FakeWorker::Call : public grpc::ServerWriteReactor<GenerateResponse> {
 public:
  Call(FakeWorker* worker, grpc::CallbackServerContext* context, int32_t behaviour)
      : worker_(worker), context_(context), behaviour_(behaviour) {}

  void Begin() {
    if (behaviour_ >= 1000 && behaviour_ < 2000) {
      remaining_ = behaviour_ - 1000;
      WriteToken();
      return;
    }
    switch (behaviour_) {
      case 2000:
        FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake worker: down"));
        return;
      case 2001:
      case 2002:
      case 2006:
        WriteToken();
        return;
      case 2003:
        return;  // until cancelled
      case 2004:
        context_->AddTrailingMetadata(services::kRetryAfterMsKey, "123");
        FinishOnce(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "fake worker: full"));
        return;
      default:
        FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                "stopping.max_tokens: too many for the fake worker"));
    }
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return;  // cancelled: OnCancel finishes
    if (behaviour_ == 2001) {
      FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake worker: crashed mid-stream"));
    } else if (behaviour_ == 2006) {
      if (!worker_->Park(this)) FinishOnce(grpc::Status::OK);
    } else if (behaviour_ < 2000) {
      if (remaining_ > 0) {
        WriteToken();
      } else {
        FinishOnce(grpc::Status::OK);
      }
    }
  }

  void OnCancel() override {
    worker_->CountCancel();
    FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "fake worker: cancelled"));
  }

  void OnDone() override { worker_->Unpark(this); }  // the worker owns the call

  void FinishOnce(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(status);
  }

 private:
  void WriteToken() {
    chunk_.Clear();
    chunk_.add_token_ids(10 + next_token_);
    chunk_.set_text("a");
    ++next_token_;
    if (behaviour_ < 2000 && --remaining_ == 0) {
      chunk_.set_finish_reason(onecard::v1::FINISH_REASON_LENGTH);
      chunk_.mutable_usage()->set_completion_tokens(next_token_);
    }
    StartWrite(&chunk_);
  }

  FakeWorker* const worker_;
  grpc::CallbackServerContext* const context_;
  const int32_t behaviour_;
  int32_t remaining_ = 0;
  int32_t next_token_ = 0;
  GenerateResponse chunk_;
  absl::Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

std::unique_ptr<FakeWorker> FakeWorker::Start(int32_t max_num_seqs) {
  std::unique_ptr<FakeWorker> worker(new FakeWorker());
  worker->max_num_seqs_ = max_num_seqs;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(worker.get());
  worker->server_ = builder.BuildAndStart();
  worker->address_ = "127.0.0.1:" + std::to_string(port);
  return worker;
}

FakeWorker::~FakeWorker() {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
}  // then owned_ deletes every call

grpc::ServerWriteReactor<GenerateResponse>* FakeWorker::Generate(
    grpc::CallbackServerContext* context, const onecard::v1::WorkerGenerateRequest* request) {
  int32_t first = request->prompt_token_ids_size() > 0 ? request->prompt_token_ids(0) : 0;
  bool fail;
  {
    absl::MutexLock lock(&mu_);
    ++calls_;
    first_tokens_.push_back(first);
    deadlines_.push_back(absl::FromChrono(context->deadline()));
    fail = fail_all_;
  }
  auto* call = new Call(this, context, fail ? 2000 : first);
  {
    absl::MutexLock lock(&mu_);
    owned_.emplace_back(call);
  }
  call->Begin();
  return call;
}

grpc::ServerUnaryReactor* FakeWorker::GetInfo(grpc::CallbackServerContext* context,
                                              const onecard::v1::GetInfoRequest*,
                                              onecard::v1::WorkerInfo* response) {
  response->set_worker_id(address_);
  response->set_max_num_seqs(max_num_seqs_);
  response->set_backend("fake");
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

void FakeWorker::set_fail_all(bool fail) {
  absl::MutexLock lock(&mu_);
  fail_all_ = fail;
}

void FakeWorker::Release() {
  std::vector<Call*> parked;
  {
    absl::MutexLock lock(&mu_);
    released_ = true;
    parked.swap(parked_);
  }
  // Calls live as long as the worker, so a parked call cancelled meanwhile
  // is still there (and FinishOnce does nothing).
  for (Call* call : parked) call->FinishOnce(grpc::Status::OK);
}

bool FakeWorker::Park(Call* call) {
  absl::MutexLock lock(&mu_);
  if (released_) return false;
  parked_.push_back(call);
  return true;
}

void FakeWorker::Unpark(Call* call) {
  absl::MutexLock lock(&mu_);
  parked_.erase(std::remove(parked_.begin(), parked_.end(), call), parked_.end());
}

void FakeWorker::CountCancel() {
  absl::MutexLock lock(&mu_);
  ++cancelled_;
}

int64_t FakeWorker::calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

int64_t FakeWorker::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

std::vector<int32_t> FakeWorker::first_tokens() const {
  absl::MutexLock lock(&mu_);
  return first_tokens_;
}

std::vector<absl::Time> FakeWorker::deadlines() const {
  absl::MutexLock lock(&mu_);
  return deadlines_;
}

bool FakeWorker::AwaitCancelled(int64_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return cancelled_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

bool FakeWorker::AwaitCalls(int64_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calls_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

}  // namespace onecard::router::testing
