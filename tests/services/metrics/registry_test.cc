// Tests services/metrics/registry.h: registration, reports, stale sequences,
// expiry and removal on a fake clock, the model filter, and the listeners.
#include "services/metrics/registry.h"

#include <atomic>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::services::metrics {
namespace {

using ::testing::HasSubstr;

class RegistryTest : public ::testing::Test {
 protected:
  RegistryTest() : registry_(Options(), [this] { return now_; }) {}

  static RegistryOptions Options() {
    RegistryOptions options;
    options.worker_expiry = absl::Seconds(2);
    options.router_expiry = absl::Seconds(3);
    return options;
  }

  void RegisterWorker(const std::string &id, const std::string &model = "smollm2") {
    v1::RegisterWorkerRequest request;
    request.set_worker_id(id);
    request.set_address(id + ":50051");
    request.mutable_info()->mutable_model()->set_id(model);
    ASSERT_TRUE(registry_.RegisterWorker(request).ok());
  }

  absl::Status Report(const std::string &id, int64_t sequence, int64_t waiting,
                      bool draining = false) {
    v1::WorkerLoadReport report;
    report.set_worker_id(id);
    report.set_address(id + ":50051");
    report.set_sequence(sequence);
    report.set_waiting(waiting);
    report.set_draining(draining);
    return registry_.ReportWorkerLoad(report);
  }

  const v1::WorkerEntry *Find(const v1::WorkerTable &table, const std::string &id) {
    for (const v1::WorkerEntry &entry : table.workers()) {
      if (entry.worker_id() == id) return &entry;
    }
    return nullptr;
  }

  absl::Time now_ = absl::FromUnixSeconds(1700000000);
  Registry registry_;
};

TEST_F(RegistryTest, RegisterNeedsIdAndAddress) {
  v1::RegisterWorkerRequest request;
  request.set_address("a:1");
  absl::Status status = registry_.RegisterWorker(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("worker_id"));
  request.set_worker_id("w1");
  request.clear_address();
  status = registry_.RegisterWorker(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("address"));

  v1::RegisterRouterRequest router;
  router.set_address("r:1");
  EXPECT_THAT(registry_.RegisterRouter(router).message(), HasSubstr("router_id"));
}

TEST_F(RegistryTest, ReportFromUnknownWorkerIsNotFound) {
  const absl::Status status = Report("ghost", 1, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("ghost"));
  v1::RouterLoadReport router;
  router.set_router_id("r");
  EXPECT_EQ(registry_.ReportRouterLoad(router).code(), absl::StatusCode::kNotFound);
}

TEST_F(RegistryTest, TableCarriesLatestReportAndVersionGrows) {
  RegisterWorker("w1");
  const int64_t v0 = registry_.version();
  v1::WorkerTable table = registry_.WorkerTable("");
  ASSERT_EQ(table.workers_size(), 1);
  EXPECT_FALSE(table.workers(0).has_load());
  EXPECT_TRUE(table.workers(0).healthy());
  EXPECT_EQ(table.workers(0).address(), "w1:50051");

  ASSERT_TRUE(Report("w1", 1, 5).ok());
  ASSERT_TRUE(Report("w1", 2, 7).ok());
  table = registry_.WorkerTable("");
  EXPECT_EQ(table.workers(0).load().waiting(), 7);
  EXPECT_EQ(table.version(), v0 + 2);
  EXPECT_EQ(table.workers(0).last_report().seconds(), 1700000000);
}

TEST_F(RegistryTest, StaleSequenceIsIgnoredUntilReRegistration) {
  RegisterWorker("w1");
  ASSERT_TRUE(Report("w1", 5, 50).ok());
  const int64_t version = registry_.version();
  ASSERT_TRUE(Report("w1", 4, 40).ok());  // an older stream, late
  EXPECT_EQ(registry_.version(), version);
  EXPECT_EQ(Find(registry_.WorkerTable(""), "w1")->load().waiting(), 50);

  RegisterWorker("w1");  // the process restarted: sequences start again
  ASSERT_TRUE(Report("w1", 1, 1).ok());
  EXPECT_EQ(Find(registry_.WorkerTable(""), "w1")->load().waiting(), 1);
}

v1::RegisterWorkerRequest Registration(const std::string &id, const std::string &address) {
  v1::RegisterWorkerRequest request;
  request.set_worker_id(id);
  request.set_address(address);
  return request;
}

v1::WorkerLoadReport LoadOf(const std::string &id, const std::string &address, int64_t waiting) {
  v1::WorkerLoadReport report;
  report.set_worker_id(id);
  report.set_address(address);
  report.set_waiting(waiting);
  return report;
}

// Issue 22: a rogue RegisterWorker reusing a live worker's id took its
// traffic. A live id is bound to the identity and address that registered it.
TEST_F(RegistryTest, LiveWorkerIdCannotBeTakenOver) {
  ASSERT_TRUE(registry_.RegisterWorker(Registration("w1", "10.0.0.1:1"), "token:worker").ok());
  for (const auto &[address, owner] :
       {std::pair{"10.6.6.6:1", "token:worker"}, std::pair{"10.0.0.1:1", "x509:CN=rogue"},
        std::pair{"10.6.6.6:1", ""}}) {
    const absl::Status s = registry_.RegisterWorker(Registration("w1", address), owner);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << address << " " << owner;
    EXPECT_THAT(s.message(), HasSubstr("worker id w1 is registered by 'token:worker' at "
                                       "10.0.0.1:1"));
  }
  EXPECT_EQ(Find(registry_.WorkerTable(""), "w1")->address(), "10.0.0.1:1");
  // The same identity and address again is the same process restarting.
  EXPECT_TRUE(registry_.RegisterWorker(Registration("w1", "10.0.0.1:1"), "token:worker").ok());
  // Once the registration is silent past the expiry, the id is free.
  now_ += absl::Seconds(2) + absl::Milliseconds(1);
  EXPECT_TRUE(registry_.RegisterWorker(Registration("w1", "10.0.0.2:1"), "token:worker").ok());
  EXPECT_EQ(Find(registry_.WorkerTable(""), "w1")->address(), "10.0.0.2:1");
}

TEST_F(RegistryTest, ReportsFromAnotherIdentityOrAddressAreRefused) {
  ASSERT_TRUE(registry_.RegisterWorker(Registration("w1", "10.0.0.1:1"), "token:worker").ok());
  ASSERT_TRUE(registry_.ReportWorkerLoad(LoadOf("w1", "10.0.0.1:1", 3), "token:worker").ok());
  EXPECT_EQ(registry_.ReportWorkerLoad(LoadOf("w1", "10.6.6.6:1", 9), "token:worker").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(registry_.ReportWorkerLoad(LoadOf("w1", "10.0.0.1:1", 9), "").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Find(registry_.WorkerTable(""), "w1")->load().waiting(), 3);
}

// Issue 22: the registry kept a worker that had left until it expired.
TEST_F(RegistryTest, WorkerLeftForgetsItUnlessItRegisteredAgain) {
  RegisterWorker("w1");
  int64_t registration = 0;
  ASSERT_TRUE(registry_.ReportWorkerLoad(LoadOf("w1", "w1:50051", 1), "", &registration).ok());
  EXPECT_GT(registration, 0);
  RegisterWorker("w1");  // a new registration: the old stream's end is stale
  const int64_t version = registry_.version();
  registry_.WorkerLeft("w1", registration);
  EXPECT_EQ(registry_.version(), version);
  ASSERT_NE(Find(registry_.WorkerTable(""), "w1"), nullptr);
  int64_t current = 0;
  ASSERT_TRUE(registry_.ReportWorkerLoad(LoadOf("w1", "w1:50051", 1), "", &current).ok());
  registry_.WorkerLeft("w1", current);
  EXPECT_EQ(Find(registry_.WorkerTable(""), "w1"), nullptr);
  EXPECT_GT(registry_.version(), version);
}

TEST_F(RegistryTest, SilentWorkerTurnsUnhealthyThenIsRemoved) {
  RegisterWorker("w1");
  RegisterWorker("w2");
  ASSERT_TRUE(Report("w1", 1, 0).ok());
  ASSERT_TRUE(Report("w2", 1, 0).ok());

  now_ += absl::Milliseconds(1500);
  ASSERT_TRUE(Report("w2", 2, 0).ok());
  now_ += absl::Milliseconds(600);  // w1 silent 2.1 s > 2 s; w2 0.6 s
  registry_.Sweep();
  v1::WorkerTable table = registry_.WorkerTable("");
  EXPECT_FALSE(Find(table, "w1")->healthy());
  EXPECT_TRUE(Find(table, "w2")->healthy());
  RegistrySnapshot snapshot = registry_.Snapshot();
  EXPECT_FALSE(snapshot.workers[0].live);
  EXPECT_TRUE(snapshot.workers[1].live);

  ASSERT_TRUE(Report("w1", 2, 0).ok());  // back before removal: healthy again
  EXPECT_TRUE(Find(registry_.WorkerTable(""), "w1")->healthy());

  now_ += absl::Milliseconds(4100);  // both silent past 2 x expiry
  registry_.Sweep();
  EXPECT_EQ(registry_.WorkerTable("").workers_size(), 0);
  EXPECT_EQ(Report("w1", 3, 0).code(), absl::StatusCode::kNotFound);
}

TEST_F(RegistryTest, ExpiryExactlyAtTheLimitIsStillHealthy) {
  RegisterWorker("w1");
  now_ += absl::Seconds(2);
  registry_.Sweep();
  EXPECT_TRUE(Find(registry_.WorkerTable(""), "w1")->healthy());
  now_ += absl::Nanoseconds(1);
  registry_.Sweep();
  EXPECT_FALSE(Find(registry_.WorkerTable(""), "w1")->healthy());
}

TEST_F(RegistryTest, DrainingWorkerIsUnhealthyButLive) {
  RegisterWorker("w1");
  ASSERT_TRUE(Report("w1", 1, 0, /*draining=*/true).ok());
  EXPECT_FALSE(Find(registry_.WorkerTable(""), "w1")->healthy());
  registry_.Sweep();
  EXPECT_FALSE(Find(registry_.WorkerTable(""), "w1")->healthy());
  EXPECT_TRUE(registry_.Snapshot().workers[0].live);
}

TEST_F(RegistryTest, RoutersExpireOnTheirOwnTimeout) {
  v1::RegisterRouterRequest request;
  request.set_router_id("r1");
  request.set_address("r1:50050");
  ASSERT_TRUE(registry_.RegisterRouter(request).ok());
  v1::RouterLoadReport report;
  report.set_router_id("r1");
  report.set_sequence(1);
  report.set_in_flight(3);
  ASSERT_TRUE(registry_.ReportRouterLoad(report).ok());
  now_ += absl::Milliseconds(2500);  // past the worker expiry, not the router's
  ASSERT_EQ(registry_.Snapshot().routers.size(), 1u);
  EXPECT_TRUE(registry_.Snapshot().routers[0].live);
  EXPECT_EQ(registry_.Snapshot().routers[0].load->in_flight(), 3);
  now_ += absl::Seconds(1);
  EXPECT_FALSE(registry_.Snapshot().routers[0].live);
  now_ += absl::Seconds(3);
  registry_.Sweep();
  EXPECT_TRUE(registry_.Snapshot().routers.empty());
}

TEST_F(RegistryTest, ModelFilter) {
  RegisterWorker("a", "smollm2");
  RegisterWorker("b", "qwen2");
  EXPECT_EQ(registry_.WorkerTable("").workers_size(), 2);
  const v1::WorkerTable table = registry_.WorkerTable("qwen2");
  ASSERT_EQ(table.workers_size(), 1);
  EXPECT_EQ(table.workers(0).worker_id(), "b");
  EXPECT_EQ(registry_.WorkerTable("llama").workers_size(), 0);
}

TEST_F(RegistryTest, ListenersRunOnChangesAndSweepsUntilUnsubscribed) {
  std::atomic<int> calls{0};
  const int64_t id = registry_.Subscribe([&] { ++calls; });
  RegisterWorker("w1");
  EXPECT_EQ(calls.load(), 1);
  ASSERT_TRUE(Report("w1", 1, 0).ok());
  EXPECT_EQ(calls.load(), 2);
  ASSERT_TRUE(Report("w1", 1, 0).ok());  // stale: no change, no call
  EXPECT_EQ(calls.load(), 2);
  registry_.Sweep();  // always wakes (rate-limited watchers flush on it)
  EXPECT_EQ(calls.load(), 3);
  registry_.Unsubscribe(id);
  ASSERT_TRUE(Report("w1", 2, 0).ok());
  EXPECT_EQ(calls.load(), 3);
}

}  // namespace
}  // namespace onecard::services::metrics
