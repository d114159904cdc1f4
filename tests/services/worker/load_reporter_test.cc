// Tests of the LoadReporter against a fake control plane in the test:
// registration with the worker's address and info, reports that follow the
// load (waited for, never slept on), reconnection when the control plane
// starts late or restarts, re-registration on NOT_FOUND, and a last
// (draining) report on Stop. Expected values are the snapshots the test
// feeds in.
#include "services/worker/load_reporter.h"

#include <atomic>
#include <map>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "services/common/proto_time.h"
#include "tests/services/testing/fake_control_plane.h"

namespace onecard::services {
namespace {

using ::onecard::testing::FakeControlPlane;

// A snapshot the test changes while the reporter reads it.
class Load {
 public:
  WorkerSnapshot Get() const {
    absl::MutexLock lock(&mu_);
    return snapshot_;
  }
  void Set(int64_t waiting, int64_t running, int64_t used, bool draining = false) {
    absl::MutexLock lock(&mu_);
    snapshot_.stats.num_waiting = waiting;
    snapshot_.stats.num_running = running;
    snapshot_.stats.kv_blocks_used = used;
    snapshot_.stats.kv_blocks_total = 100;
    snapshot_.draining = draining;
  }
  // Waiting requests by engine priority (2 interactive, 1 standard, 0 batch).
  void SetWaiting(const std::map<int32_t, int64_t>& by_priority) {
    absl::MutexLock lock(&mu_);
    snapshot_.stats.num_waiting_by_priority = by_priority;
    snapshot_.stats.num_waiting = 0;
    for (const auto& [priority, count] : by_priority) snapshot_.stats.num_waiting += count;
  }

 private:
  mutable absl::Mutex mu_;
  WorkerSnapshot snapshot_;
};

LoadReporterOptions Options(const std::string& address) {
  LoadReporterOptions o;
  o.control_plane_address = address;
  o.worker_id = "w-1";
  o.address = "10.0.0.1:50051";
  o.metrics_address = "10.0.0.1:9400";
  o.info.mutable_model()->set_id("smol");
  o.initial_backoff = absl::Milliseconds(20);
  o.max_backoff = absl::Milliseconds(200);
  return o;
}

// A free loopback port, by binding and closing a server.
int FreePort() {
  std::unique_ptr<FakeControlPlane> probe = FakeControlPlane::Start(0);
  return probe->port();
}

TEST(LoadReporterTest, RegistersAndReportsTheLoad) {
  std::unique_ptr<FakeControlPlane> plane = FakeControlPlane::Start();
  Load load;
  load.Set(1, 2, 30);
  LoadReporter reporter(Options(plane->address()), [&load] { return load.Get(); });
  reporter.Start();
  ASSERT_TRUE(plane->WaitForRegistrations(1));
  const v1::RegisterWorkerRequest reg = plane->registrations()[0];
  EXPECT_EQ(reg.worker_id(), "w-1");
  EXPECT_EQ(reg.address(), "10.0.0.1:50051");
  EXPECT_EQ(reg.metrics_address(), "10.0.0.1:9400");
  EXPECT_EQ(reg.info().model().id(), "smol");
  std::optional<v1::WorkerLoadReport> first =
      plane->WaitForReport([](const v1::WorkerLoadReport& r) { return r.kv_blocks_used() == 30; });
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->worker_id(), "w-1");
  EXPECT_EQ(first->address(), "10.0.0.1:50051");
  EXPECT_EQ(first->model(), "smol");
  EXPECT_EQ(first->waiting(), 1);
  EXPECT_EQ(first->running(), 2);
  EXPECT_EQ(first->kv_blocks_total(), 100);
  EXPECT_GT(first->timestamp().seconds(), 0);
  load.Set(0, 1, 7);
  reporter.Notify();
  ASSERT_TRUE(plane
                  ->WaitForReport([](const v1::WorkerLoadReport& r) {
                    return r.kv_blocks_used() == 7 && r.running() == 1;
                  })
                  .has_value());
  // Unchanged load is still reported every interval: three more reports.
  const int64_t seen = first->sequence();
  ASSERT_TRUE(plane
                  ->WaitForReport(
                      [seen](const v1::WorkerLoadReport& r) { return r.sequence() >= seen + 4; })
                  .has_value());
  const std::vector<v1::WorkerLoadReport> reports = plane->reports();
  for (size_t i = 1; i < reports.size(); ++i) {
    EXPECT_EQ(reports[i].sequence(), reports[i - 1].sequence() + 1);
  }
}

// Issue 22: a control plane asking for reports every 1ns made an idle worker
// spin; the reporter never reports an unchanged load more often than every
// kMinConfigInterval (10ms).
TEST(LoadReporterTest, NeverReportsFasterThanTheFloor) {
  std::unique_ptr<FakeControlPlane> plane = FakeControlPlane::Start();
  plane->SetReportInterval(absl::Nanoseconds(1));
  Load load;
  load.Set(0, 0, 0);
  LoadReporter reporter(Options(plane->address()), [&load] { return load.Get(); });
  reporter.Start();
  ASSERT_TRUE(plane->WaitForReport([](const v1::WorkerLoadReport& r) { return r.sequence() >= 6; })
                  .has_value());
  reporter.Stop();
  const std::vector<v1::WorkerLoadReport> reports = plane->reports();
  for (size_t i = 1; i + 1 < reports.size(); ++i) {  // the last one is Stop's
    const absl::Duration gap =
        FromProtoTimestamp(reports[i].timestamp()) - FromProtoTimestamp(reports[i - 1].timestamp());
    EXPECT_GE(gap, absl::Milliseconds(9)) << "reports " << i - 1 << " and " << i;
  }
}

TEST(LoadReporterTest, ReportsTheWaitingRequestsByPriorityClass) {
  std::unique_ptr<FakeControlPlane> plane = FakeControlPlane::Start();
  Load load;
  load.Set(0, 0, 4);
  load.SetWaiting({{2, 1}, {1, 2}, {0, 3}, {-1, 1}});
  LoadReporter reporter(Options(plane->address()), [&load] { return load.Get(); });
  reporter.Start();
  std::optional<v1::WorkerLoadReport> report =
      plane->WaitForReport([](const v1::WorkerLoadReport& r) { return r.waiting() == 7; });
  ASSERT_TRUE(report.has_value());
  ASSERT_EQ(report->waiting_by_priority_size(), 3);
  EXPECT_EQ(report->waiting_by_priority(0).priority(), v1::PRIORITY_INTERACTIVE);
  EXPECT_EQ(report->waiting_by_priority(0).depth(), 1);
  EXPECT_EQ(report->waiting_by_priority(1).priority(), v1::PRIORITY_STANDARD);
  EXPECT_EQ(report->waiting_by_priority(1).depth(), 2);
  EXPECT_EQ(report->waiting_by_priority(2).priority(), v1::PRIORITY_BATCH);
  EXPECT_EQ(report->waiting_by_priority(2).depth(), 4);  // priorities 0 and -1
  load.SetWaiting({});
  reporter.Notify();
  report = plane->WaitForReport([](const v1::WorkerLoadReport& r) { return r.waiting() == 0; });
  ASSERT_TRUE(report.has_value());
  ASSERT_EQ(report->waiting_by_priority_size(), 3);
  for (const v1::PriorityQueueDepth& part : report->waiting_by_priority()) {
    EXPECT_EQ(part.depth(), 0);
  }
}

TEST(LoadReporterTest, ConnectsWhenTheControlPlaneStartsLate) {
  const int port = FreePort();
  Load load;
  load.Set(0, 0, 5);
  LoadReporter reporter(Options("127.0.0.1:" + std::to_string(port)),
                        [&load] { return load.Get(); });
  reporter.Start();
  std::unique_ptr<FakeControlPlane> plane = FakeControlPlane::Start(port);
  ASSERT_NE(plane, nullptr);
  EXPECT_TRUE(
      plane->WaitForReport([](const v1::WorkerLoadReport& r) { return r.kv_blocks_used() == 5; })
          .has_value());
}

TEST(LoadReporterTest, ReconnectsAfterARestart) {
  std::unique_ptr<FakeControlPlane> plane = FakeControlPlane::Start();
  const int port = plane->port();
  Load load;
  load.Set(0, 0, 1);
  LoadReporter reporter(Options(plane->address()), [&load] { return load.Get(); });
  reporter.Start();
  ASSERT_TRUE(plane->WaitForReport([](const v1::WorkerLoadReport&) { return true; }).has_value());
  plane->Stop();
  plane.reset();
  load.Set(0, 0, 2);
  std::unique_ptr<FakeControlPlane> restarted = FakeControlPlane::Start(port);
  ASSERT_NE(restarted, nullptr);
  ASSERT_TRUE(restarted->WaitForRegistrations(1));
  EXPECT_TRUE(
      restarted
          ->WaitForReport([](const v1::WorkerLoadReport& r) { return r.kv_blocks_used() == 2; })
          .has_value());
  EXPECT_GE(reporter.sessions_started(), 2);
}

TEST(LoadReporterTest, RegistersAgainOnNotFound) {
  std::unique_ptr<FakeControlPlane> plane = FakeControlPlane::Start();
  plane->RejectNextStream();
  Load load;
  LoadReporter reporter(Options(plane->address()), [&load] { return load.Get(); });
  reporter.Start();
  EXPECT_TRUE(plane->WaitForRegistrations(2));
}

TEST(LoadReporterTest, StopSendsALastReport) {
  std::unique_ptr<FakeControlPlane> plane = FakeControlPlane::Start();
  Load load;
  load.Set(0, 3, 9);
  LoadReporter reporter(Options(plane->address()), [&load] { return load.Get(); });
  reporter.Start();
  ASSERT_TRUE(plane->WaitForReport([](const v1::WorkerLoadReport&) { return true; }).has_value());
  load.Set(0, 3, 9, /*draining=*/true);
  reporter.Stop();
  const std::vector<v1::WorkerLoadReport> reports = plane->reports();
  ASSERT_FALSE(reports.empty());
  EXPECT_TRUE(reports.back().draining());
  EXPECT_EQ(reporter.reports_sent(), static_cast<int64_t>(reports.size()));
}

TEST(LoadReporterTest, StopWithoutAControlPlaneReturns) {
  LoadReporter reporter(Options("127.0.0.1:" + std::to_string(FreePort())),
                        [] { return WorkerSnapshot(); });
  reporter.Start();
  reporter.Stop();
  EXPECT_EQ(reporter.reports_sent(), 0);
}

}  // namespace
}  // namespace onecard::services
