// The in-test control plane. See fake_control_plane.h.
#include "tests/services/testing/fake_control_plane.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace onecard::testing {

std::unique_ptr<FakeControlPlane> FakeControlPlane::Start(int port) {
  auto plane = std::make_unique<FakeControlPlane>();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(),
                           &plane->port_);
  builder.RegisterService(plane.get());
  plane->server_ = builder.BuildAndStart();
  if (plane->server_ == nullptr || plane->port_ == 0) return nullptr;
  plane->address_ = absl::StrCat("127.0.0.1:", plane->port_);
  return plane;
}

FakeControlPlane::~FakeControlPlane() { Stop(); }

void FakeControlPlane::Stop() {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now());  // cancels open streams at once
  server_->Wait();
  server_.reset();
}

grpc::Status FakeControlPlane::RegisterWorker(grpc::ServerContext* /*context*/,
                                              const v1::RegisterWorkerRequest* request,
                                              v1::RegisterWorkerResponse* response) {
  absl::MutexLock lock(&mu_);
  registrations_.push_back(*request);
  const int64_t nanos = absl::ToInt64Nanoseconds(report_interval_);
  response->mutable_report_interval()->set_seconds(nanos / 1000000000);
  response->mutable_report_interval()->set_nanos(static_cast<int32_t>(nanos % 1000000000));
  return grpc::Status::OK;
}

void FakeControlPlane::SetReportInterval(absl::Duration interval) {
  absl::MutexLock lock(&mu_);
  report_interval_ = interval;
}

grpc::Status FakeControlPlane::ReportWorkerLoad(grpc::ServerContext* /*context*/,
                                                grpc::ServerReader<v1::WorkerLoadReport>* reader,
                                                v1::ReportLoadResponse* /*response*/) {
  v1::WorkerLoadReport report;
  while (reader->Read(&report)) {
    absl::MutexLock lock(&mu_);
    reports_.push_back(report);
    if (reject_next_) {
      reject_next_ = false;
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown worker; register again");
    }
  }
  return grpc::Status::OK;
}

std::optional<v1::WorkerLoadReport> FakeControlPlane::WaitFrom(
    size_t first, const std::function<bool(const v1::WorkerLoadReport&)>& match,
    absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  std::optional<v1::WorkerLoadReport> found;
  size_t next = first;
  const auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (; next < reports_.size() && !found.has_value(); ++next) {
      if (match(reports_[next])) found = reports_[next];
    }
    return found.has_value();
  };
  mu_.AwaitWithTimeout(absl::Condition(&seen), timeout);
  return found;
}

std::optional<v1::WorkerLoadReport> FakeControlPlane::WaitForReport(
    const std::function<bool(const v1::WorkerLoadReport&)>& match, absl::Duration timeout) {
  return WaitFrom(0, match, timeout);
}

std::optional<v1::WorkerLoadReport> FakeControlPlane::WaitForNextReport(
    const std::function<bool(const v1::WorkerLoadReport&)>& match, absl::Duration timeout) {
  size_t first = 0;
  {
    absl::MutexLock lock(&mu_);
    first = reports_.size();
  }
  return WaitFrom(first, match, timeout);
}

bool FakeControlPlane::WaitForRegistrations(int n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(registrations_.size()) >= n;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

std::vector<v1::RegisterWorkerRequest> FakeControlPlane::registrations() const {
  absl::MutexLock lock(&mu_);
  return registrations_;
}

std::vector<v1::WorkerLoadReport> FakeControlPlane::reports() const {
  absl::MutexLock lock(&mu_);
  return reports_;
}

void FakeControlPlane::RejectNextStream() {
  absl::MutexLock lock(&mu_);
  reject_next_ = true;
}

}  // namespace onecard::testing
