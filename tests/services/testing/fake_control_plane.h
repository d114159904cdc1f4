// FakeControlPlane: an in-test onecard.v1.ControlPlane server on loopback
// that records worker registrations and load reports, so tests can wait
// (without sleeping) for a report that shows what they expect. It can be
// told to end report streams with NOT_FOUND (as a restarted control plane
// that lost its registry would).
// Tested through tests/services/worker/load_reporter_test.cc.
#ifndef ONECARD_TESTS_SERVICES_TESTING_FAKE_CONTROL_PLANE_H_
#define ONECARD_TESTS_SERVICES_TESTING_FAKE_CONTROL_PLANE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "onecard/v1/control.grpc.pb.h"

namespace onecard::testing {

class FakeControlPlane : public v1::ControlPlane::Service {
 public:
  // Listens on 127.0.0.1:`port` (0: any free port).
  static std::unique_ptr<FakeControlPlane> Start(int port = 0);
  ~FakeControlPlane() override;

  const std::string& address() const { return address_; }
  int port() const { return port_; }
  void Stop();  // closes the server (streams end); idempotent

  // The first report, among those received so far or later, for which
  // `match` holds; nullopt after `timeout`.
  std::optional<v1::WorkerLoadReport> WaitForReport(
      const std::function<bool(const v1::WorkerLoadReport&)>& match,
      absl::Duration timeout = absl::Seconds(60));
  // Reports received after this call only.
  std::optional<v1::WorkerLoadReport> WaitForNextReport(
      const std::function<bool(const v1::WorkerLoadReport&)>& match,
      absl::Duration timeout = absl::Seconds(60));
  bool WaitForRegistrations(int n, absl::Duration timeout = absl::Seconds(60));
  std::vector<v1::RegisterWorkerRequest> registrations() const;
  std::vector<v1::WorkerLoadReport> reports() const;
  // The next report stream reads one report, then ends with NOT_FOUND.
  void RejectNextStream();
  // The report interval registrations are answered with (default 250ms).
  void SetReportInterval(absl::Duration interval);

  grpc::Status RegisterWorker(grpc::ServerContext* context,
                              const v1::RegisterWorkerRequest* request,
                              v1::RegisterWorkerResponse* response) override;
  grpc::Status ReportWorkerLoad(grpc::ServerContext* context,
                                grpc::ServerReader<v1::WorkerLoadReport>* reader,
                                v1::ReportLoadResponse* response) override;

 private:
  std::optional<v1::WorkerLoadReport> WaitFrom(
      size_t first, const std::function<bool(const v1::WorkerLoadReport&)>& match,
      absl::Duration timeout);

  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  int port_ = 0;
  mutable absl::Mutex mu_;
  std::vector<v1::RegisterWorkerRequest> registrations_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::WorkerLoadReport> reports_ ABSL_GUARDED_BY(mu_);
  bool reject_next_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration report_interval_ ABSL_GUARDED_BY(mu_) = absl::Milliseconds(250);
};

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_SERVICES_TESTING_FAKE_CONTROL_PLANE_H_
