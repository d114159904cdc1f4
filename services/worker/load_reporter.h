// LoadReporter: the worker's link to the control plane. On its own thread it
// registers (RegisterWorker) and keeps one ReportWorkerLoad stream open,
// sending a report at least every `interval` and, checking every `poll`,
// whenever the load changes (waiting, running, KV blocks, draining) or
// Notify() is called. A failed call or a broken stream is retried with
// exponential backoff (with jitter) up to max_backoff; serving never waits
// on any of this. Stop() sends one last report (e.g. draining) and closes.
// A report splits the waiting requests by priority class (all three).
// Tested by tests/services/worker/load_reporter_test.cc (a fake control
// plane in the test).
#ifndef ONECARD_SERVICES_WORKER_LOAD_REPORTER_H_
#define ONECARD_SERVICES_WORKER_LOAD_REPORTER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "onecard/v1/control.grpc.pb.h"
#include "services/common/service_auth.h"
#include "services/worker/worker_metrics.h"

namespace onecard::services {

struct LoadReporterOptions {
  std::string control_plane_address;  // host:port
  std::string worker_id;
  std::string address;          // advertised gRPC address
  std::string metrics_address;  // may be empty
  v1::WorkerInfo info;
  absl::Duration interval = absl::Milliseconds(250);
  absl::Duration poll = absl::Milliseconds(50);
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
  absl::Duration rpc_timeout = absl::Seconds(2);  // RegisterWorker
  // The worker's credentials (token or certificate); null: none.
  std::shared_ptr<const ServiceAuth> auth;
};

class LoadReporter {
 public:
  // `snapshot` is called on the reporter's thread for every report.
  LoadReporter(LoadReporterOptions options, std::function<WorkerSnapshot()> snapshot);
  ~LoadReporter();  // Stop()

  void Start();
  // The load changed: report without waiting for the poll.
  void Notify();
  // Sends a last report when connected, closes the stream, joins the thread.
  void Stop();

  int64_t reports_sent() const;
  int64_t sessions_started() const;  // successful registrations

 private:
  struct LoadKey {
    int64_t waiting = -1, running = -1, kv_used = -1, kv_total = -1;
    bool draining = false;
    bool operator==(const LoadKey&) const = default;
  };

  void Run();
  // One registration plus one report stream; returns why it ended.
  absl::Status Session(bool* registered);
  absl::Status Register(absl::Duration* interval);
  // Reports until Stop (true, after a last report) or a failed write (false).
  bool StreamReports(grpc::ClientWriter<v1::WorkerLoadReport>* writer, absl::Duration interval);
  v1::WorkerLoadReport MakeReport(const WorkerSnapshot& snapshot);
  // Waits up to `timeout` for Notify or Stop.
  void WaitForWork(absl::Duration timeout);
  // Waits up to `timeout` for Stop only (backoff); true when stopping.
  bool WaitForStop(absl::Duration timeout);
  bool Stopping() const;

  const LoadReporterOptions options_;
  const std::function<WorkerSnapshot()> snapshot_;
  std::unique_ptr<v1::ControlPlane::Stub> stub_;
  std::thread thread_;

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* stream_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t reports_sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t sessions_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t sequence_ = 0;  // reporter thread only
};

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_WORKER_LOAD_REPORTER_H_
