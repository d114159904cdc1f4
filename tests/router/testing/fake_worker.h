// FakeWorker: an in-process onecard.v1.Worker server on 127.0.0.1:0 whose
// behaviour is chosen by the request's first prompt token, for router tests
// that need exact control over what a worker does:
//   1000 + n  stream n one-token chunks (ids 10, 11, ...), then LENGTH
//   2000      UNAVAILABLE before any token
//   2001      one token, then UNAVAILABLE
//   2002      one token, then wait until the call is cancelled
//   2003      nothing; wait until cancelled or past the deadline
//   2004      RESOURCE_EXHAUSTED with retry-after-ms 123
//   2005      INVALID_ARGUMENT naming stopping.max_tokens
//   2006      one token, then wait for Release(), then LENGTH
// set_fail_all(true) makes every call UNAVAILABLE before any token.
// It records each call's first prompt token (arrival order), deadline and
// cancellation. Tested through tests/router/router_service_test.cc.
#ifndef ONECARD_TESTS_ROUTER_TESTING_FAKE_WORKER_H_
#define ONECARD_TESTS_ROUTER_TESTING_FAKE_WORKER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "onecard/v1/worker.grpc.pb.h"

namespace onecard::router::testing {

class FakeWorker final : public onecard::v1::Worker::CallbackService {
 public:
  static std::unique_ptr<FakeWorker> Start(int32_t max_num_seqs = 4);
  ~FakeWorker() override;

  const std::string& address() const { return address_; }
  void set_fail_all(bool fail);
  void Release();  // lets every 2006 call (now or later) finish

  int64_t calls() const;
  int64_t cancelled() const;
  std::vector<int32_t> first_tokens() const;  // per call, in arrival order
  std::vector<absl::Time> deadlines() const;
  // Waits until `cancelled()` reaches n; false after `timeout`.
  bool AwaitCancelled(int64_t n, absl::Duration timeout);
  // Waits until `calls()` reaches n; false after `timeout`.
  bool AwaitCalls(int64_t n, absl::Duration timeout);

  grpc::ServerWriteReactor<onecard::v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context,
      const onecard::v1::WorkerGenerateRequest* request) override;
  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* context,
                                    const onecard::v1::GetInfoRequest* request,
                                    onecard::v1::WorkerInfo* response) override;

  class Call;
  // Used by the calls.
  void CountCancel();
  // Parks a 2006 call until Release; false when already released.
  bool Park(Call* call);
  void Unpark(Call* call);

 private:
  FakeWorker() = default;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  int32_t max_num_seqs_ = 4;

  mutable absl::Mutex mu_;
  bool fail_all_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  int64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t cancelled_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int32_t> first_tokens_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> deadlines_ ABSL_GUARDED_BY(mu_);
  std::vector<Call*> parked_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Call>> owned_ ABSL_GUARDED_BY(mu_);
};

}  // namespace onecard::router::testing

#endif  // ONECARD_TESTS_ROUTER_TESTING_FAKE_WORKER_H_
