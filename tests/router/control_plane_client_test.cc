// Tests router/control_plane_client.h against a fake ControlPlane server in
// the test: tables reach the callback, load reports arrive with the router's
// id and growing sequence numbers, Stop sends a last report, and after the
// control plane restarts the watch comes back by itself (the router keeps
// the last table meanwhile: no callback without a table).
#include "router/control_plane_client.h"

#include "absl/synchronization/mutex.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace onecard::router {
namespace {

class FakeControlPlane final : public onecard::v1::ControlPlane::Service {
 public:
  grpc::Status WatchWorkers(grpc::ServerContext* context, const onecard::v1::WatchWorkersRequest*,
                            grpc::ServerWriter<onecard::v1::WorkerTable>* writer) override {
    int64_t sent = 0;
    while (!context->IsCancelled()) {
      onecard::v1::WorkerTable table;
      {
        absl::MutexLock lock(&mu_);
        auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return table_.version() > sent || stopping_;
        };
        // Bounded wait so that a cancelled stream is noticed.
        if (!mu_.AwaitWithTimeout(absl::Condition(&changed), absl::Milliseconds(20))) continue;
        if (stopping_) break;
        table = table_;
        sent = table.version();
      }
      if (!writer->Write(table)) break;
    }
    return grpc::Status::OK;
  }
  grpc::Status RegisterRouter(grpc::ServerContext*, const onecard::v1::RegisterRouterRequest* r,
                              onecard::v1::RegisterRouterResponse*) override {
    absl::MutexLock lock(&mu_);
    registered_ = r->router_id();
    return grpc::Status::OK;
  }
  grpc::Status ReportRouterLoad(grpc::ServerContext*,
                                grpc::ServerReader<onecard::v1::RouterLoadReport>* reader,
                                onecard::v1::ReportLoadResponse*) override {
    onecard::v1::RouterLoadReport report;
    while (reader->Read(&report)) {
      absl::MutexLock lock(&mu_);
      reports_.push_back(report);
    }
    return grpc::Status::OK;
  }
  void Publish(int64_t version, const std::string& worker) {
    absl::MutexLock lock(&mu_);
    table_.set_version(version);
    table_.clear_workers();
    table_.add_workers()->set_worker_id(worker);
  }
  void Stop() {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  bool AwaitReports(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return reports_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(20));
  }
  std::vector<onecard::v1::RouterLoadReport> reports() {
    absl::MutexLock lock(&mu_);
    return reports_;
  }
  std::string registered() {
    absl::MutexLock lock(&mu_);
    return registered_;
  }

 private:
  absl::Mutex mu_;
  onecard::v1::WorkerTable table_;
  bool stopping_ = false;
  std::string registered_;
  std::vector<onecard::v1::RouterLoadReport> reports_;
};

struct Server {
  FakeControlPlane service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  explicit Server(const std::string& address) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
  }
  ~Server() {
    service.Stop();
    server->Shutdown(std::chrono::system_clock::now());
  }
};

// Collects the tables the client hands over.
struct Tables {
  absl::Mutex mu;
  std::vector<std::string> first_worker;
  void Add(const onecard::v1::WorkerTable& t) {
    absl::MutexLock lock(&mu);
    first_worker.push_back(t.workers_size() > 0 ? t.workers(0).worker_id() : "");
  }
  bool AwaitWorker(const std::string& id) {
    absl::MutexLock lock(&mu);
    auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return !first_worker.empty() && first_worker.back() == id;
    };
    return mu.AwaitWithTimeout(absl::Condition(&seen), absl::Seconds(20));
  }
};

ControlPlaneOptions Options(int port) {
  ControlPlaneOptions o;
  o.address = "127.0.0.1:" + std::to_string(port);
  o.router_id = "router-7";
  o.advertise_address = "127.0.0.1:50050";
  o.report_interval = absl::Milliseconds(20);
  o.initial_backoff = absl::Milliseconds(20);
  o.max_backoff = absl::Milliseconds(100);
  return o;
}

onecard::v1::RouterLoadReport Load() {
  onecard::v1::RouterLoadReport r;
  r.add_queue_depth()->set_depth(3);
  r.set_in_flight(2);
  return r;
}

TEST(ControlPlaneClientTest, WatchesTablesAndReportsLoad) {
  Server cp("127.0.0.1:0");
  Tables tables;
  cp.service.Publish(1, "w1");
  ControlPlaneClient client(
      Options(cp.port), [&](const auto& t, bool) { tables.Add(t); }, Load);
  client.Start();
  ASSERT_TRUE(tables.AwaitWorker("w1"));
  cp.service.Publish(2, "w2");
  ASSERT_TRUE(tables.AwaitWorker("w2"));
  ASSERT_TRUE(cp.service.AwaitReports(3));
  client.Stop();
  std::vector<onecard::v1::RouterLoadReport> reports = cp.service.reports();
  EXPECT_EQ(cp.service.registered(), "router-7");
  for (size_t i = 0; i < reports.size(); ++i) {
    EXPECT_EQ(reports[i].router_id(), "router-7");
    EXPECT_EQ(reports[i].sequence(), static_cast<int64_t>(i + 1));
    EXPECT_EQ(reports[i].queue_depth(0).depth(), 3);
    EXPECT_TRUE(reports[i].has_timestamp());
  }
  EXPECT_GE(client.tables_received(), 2);
  EXPECT_EQ(client.reports_sent(), static_cast<int64_t>(reports.size()));
}

TEST(ControlPlaneClientTest, ReconnectsAfterTheControlPlaneRestarts) {
  auto cp = std::make_unique<Server>("127.0.0.1:0");
  const int port = cp->port;
  Tables tables;
  cp->service.Publish(1, "w1");
  ControlPlaneClient client(
      Options(port), [&](const auto& t, bool) { tables.Add(t); }, Load);
  client.Start();
  ASSERT_TRUE(tables.AwaitWorker("w1"));
  cp.reset();  // the control plane goes away: no new table is handed over
  size_t before;
  {
    absl::MutexLock lock(&tables.mu);
    before = tables.first_worker.size();
  }
  cp = std::make_unique<Server>("127.0.0.1:" + std::to_string(port));
  ASSERT_EQ(cp->port, port);
  cp->service.Publish(1, "w9");
  ASSERT_TRUE(tables.AwaitWorker("w9"));
  {
    absl::MutexLock lock(&tables.mu);
    EXPECT_EQ(tables.first_worker[before], "w9");  // nothing in between
  }
  ASSERT_TRUE(cp->service.AwaitReports(1));
  client.Stop();
}

}  // namespace
}  // namespace onecard::router
