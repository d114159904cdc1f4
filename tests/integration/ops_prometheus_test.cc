// A real Prometheus (Debian's `prometheus`) runs deploy/prometheus's config
// and rules (scrape and evaluation every 1 s instead of 15 s) against the
// real router, worker and metrics service on loopback. After load through
// the router (three priorities, a rate-limited tenant, a bad key), every
// dashboard query, every prometheus-adapter query and every recording rule
// is asked through the HTTP API (/api/v1/query) and must return the expected
// series with plausible values. Prometheus's port is picked free (it cannot
// report a port 0 it bound); readiness and "scraped the load" are polled
// with deadlines since nothing else signals them.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "tests/deploy/deploy_testing.h"
#include "tests/integration/ops_cluster.h"
#include "tests/services/testing/http_get.h"
#include "tests/testing/time_scale.h"

namespace onecard::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr char kNamespace[] = "onecard-it";
constexpr int kLoadRequests = 12;
constexpr int kMaxBursts = 5;

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

struct Sample {
  std::map<std::string, std::string> labels;
  double value = 0;
};

class OpsPrometheusTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void SetUp() override { ASSERT_TRUE(ready_) << "the cluster or Prometheus did not start"; }

  // Instant query; the samples, or an error naming the query.
  static absl::StatusOr<std::vector<Sample>> Query(const std::string& expr);
  // Grafana's rate window is 1 minute (scaled: under a sanitizer the
  // queries run minutes after the load).
  static std::string Substitute(const std::string& expr) {
    return absl::StrReplaceAll(expr, {{"$__rate_interval", absl::StrCat(60 * kTestTimeScale, "s")},
                                      {"$namespace", kNamespace}});
  }

  static fs::path* dir_;
  static LocalCluster* cluster_;
  static ChildProcess* prometheus_;
  static std::string* prometheus_address_;
  static bool ready_;
};

fs::path* OpsPrometheusTest::dir_ = nullptr;
LocalCluster* OpsPrometheusTest::cluster_ = nullptr;
ChildProcess* OpsPrometheusTest::prometheus_ = nullptr;
std::string* OpsPrometheusTest::prometheus_address_ = nullptr;
bool OpsPrometheusTest::ready_ = false;

// deploy/prometheus with 1 s intervals and targets pointing at the cluster.
void WritePrometheusDir(const fs::path& dir, const LocalCluster& cluster) {
  fs::create_directories(dir / "rules");
  fs::create_directories(dir / "targets");
  fs::copy_file("deploy/prometheus/rules/onecard.rules.yml", dir / "rules/onecard.rules.yml");
  absl::StatusOr<std::string> config = ReadTextFile("deploy/prometheus/prometheus.yml");
  ASSERT_TRUE(config.ok()) << config.status();
  std::ofstream(dir / "prometheus.yml")
      << absl::StrReplaceAll(*config, {{"scrape_interval: 15s", "scrape_interval: 1s"},
                                       {"scrape_timeout: 10s", "scrape_timeout: 1s"},
                                       {"evaluation_interval: 15s", "evaluation_interval: 1s"}});
  const std::vector<std::tuple<std::string, std::string, std::string>> targets = {
      {"router", cluster.router().metrics, "router-0"},
      {"worker", cluster.worker().metrics, "worker-0"},
      {"metrics", cluster.metrics().metrics, "metrics-0"}};
  for (const auto& [component, address, pod] : targets) {
    std::ofstream(dir / "targets" / (component + ".json"))
        << json::array(
               {{{"targets", {address}},
                 {"labels",
                  {{"namespace", kNamespace}, {"pod", pod}, {"service", "onecard-" + component}}}}})
               .dump();
  }
  std::ofstream(dir / "targets/kube-state-metrics.json") << "[]";
}

// One burst of kLoadRequests through the router (three priorities), more
// than the worker's two sequence slots take at once, so requests queue.
void DriveBurst(LocalCluster& cluster) {
  auto stub = cluster.RouterStub();
  std::vector<std::thread> threads;
  std::vector<grpc::StatusCode> codes(kLoadRequests);
  const v1::Priority classes[] = {v1::PRIORITY_INTERACTIVE, v1::PRIORITY_STANDARD,
                                  v1::PRIORITY_BATCH};
  for (int i = 0; i < kLoadRequests; ++i) {
    threads.emplace_back([&, i] {
      codes[i] =
          Generate(*stub, kOpsApiKey, absl::StrCat("Count to ", i + 3, "."), 6, classes[i % 3])
              .status.error_code();
    });
  }
  for (std::thread& t : threads) t.join();
  for (grpc::StatusCode code : codes) EXPECT_EQ(code, grpc::StatusCode::OK);
}

// A rate-limited tenant's second request and an unknown key: three requests.
void DriveRejections(LocalCluster& cluster) {
  auto stub = cluster.RouterStub();
  EXPECT_TRUE(Generate(*stub, kLimitedApiKey, "Hi.", 2, v1::PRIORITY_BATCH).status.ok());
  EXPECT_EQ(Generate(*stub, kLimitedApiKey, "Hi.", 2, v1::PRIORITY_BATCH).status.error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(Generate(*stub, "no-such-key", "Hi.", 2, v1::PRIORITY_BATCH).status.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

// Polls until `expr` has a sample >= `at_least` (Prometheus scrapes and
// evaluates on its own clock), or `timeout` (ScaledTime'd) passes.
absl::Status WaitForQuery(const std::string& expr, double at_least, absl::Duration timeout,
                          absl::StatusOr<std::vector<Sample>> (*query)(const std::string&)) {
  const absl::Time deadline = absl::Now() + ScaledTime(timeout);
  std::string last;
  while (absl::Now() < deadline) {
    absl::StatusOr<std::vector<Sample>> samples = query(expr);
    if (samples.ok() && !samples->empty() && samples->front().value >= at_least) {
      return absl::OkStatus();
    }
    last = samples.ok() ? absl::StrCat(samples->size(), " samples") : samples.status().ToString();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // poll interval
  }
  return absl::DeadlineExceededError(absl::StrCat("waiting for ", expr, ": ", last));
}

void OpsPrometheusTest::SetUpTestSuite() {
  dir_ = new fs::path(fs::temp_directory_path() / ("ops-prom-" + std::to_string(getpid())));
  fs::create_directories(*dir_);
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
      LocalCluster::Start({.work_dir = dir_->string(), .max_num_seqs = 2});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  cluster_ = cluster->release();
  WritePrometheusDir(*dir_ / "prometheus", *cluster_);
  absl::StatusOr<int> port = PickFreePort();
  ASSERT_TRUE(port.ok());
  prometheus_address_ = new std::string(absl::StrCat("127.0.0.1:", *port));
  absl::StatusOr<std::unique_ptr<ChildProcess>> prometheus = ChildProcess::Start(
      {"/usr/bin/prometheus", "--config.file=" + (*dir_ / "prometheus/prometheus.yml").string(),
       "--storage.tsdb.path=" + (*dir_ / "prometheus/data").string(),
       "--web.listen-address=" + *prometheus_address_, "--log.level=warn"},
      (*dir_ / "prometheus.log").string());
  ASSERT_TRUE(prometheus.ok()) << prometheus.status() << " (scripts/setup.sh installs it)";
  prometheus_ = prometheus->release();

  // Load only once every target has been scraped: rate() sees counters rise
  // from their first sample, never from before it.
  ASSERT_TRUE(WaitForQuery(absl::StrCat("count(up{namespace=\"", kNamespace, "\"} == 1)"), 3,
                           absl::Seconds(60), &Query)
                  .ok());
  // The queue depth is a gauge: a burst can start and drain between two
  // scrapes (1 s apart), so bursts repeat until a scrape has seen requests
  // waiting, at most kMaxBursts (QueueDepthRoseUnderLoad fails if none did).
  int bursts = 0;
  const std::string queued = absl::StrCat("max_over_time(onecard_cluster_queue_depth{namespace=\"",
                                          kNamespace, "\"}[5m])");
  do {
    DriveBurst(*cluster_);
    ++bursts;
  } while (bursts < kMaxBursts && !WaitForQuery(queued, 1, absl::Seconds(3), &Query).ok());
  DriveRejections(*cluster_);
  const int total = bursts * kLoadRequests + 3;
  ASSERT_TRUE(WaitForQuery(absl::StrCat("sum(onecard_router_requests_total{namespace=\"",
                                        kNamespace, "\"})"),
                           total, absl::Seconds(60), &Query)
                  .ok());
  // The router creates each tenant's rate-limit counter at 0; rate() needs
  // two samples of it.
  ASSERT_TRUE(WaitForQuery("count_over_time(onecard_router_rate_limited_total[1m])", 2,
                           absl::Seconds(30), &Query)
                  .ok());
  // Two evaluations after the last scrape: recording rules see the load.
  for (const char* recorded : {"count(onecard:generation_tokens:rate1m > 0)",
                               "count(onecard:router_rate_limited:rate1m)"}) {
    ASSERT_TRUE(WaitForQuery(recorded, 1, absl::Seconds(30), &Query).ok()) << recorded;
  }
  ready_ = true;
}

void OpsPrometheusTest::TearDownTestSuite() {
  delete prometheus_;
  delete cluster_;
  if (dir_ != nullptr) fs::remove_all(*dir_);
  delete dir_;
  delete prometheus_address_;
}

absl::StatusOr<std::vector<Sample>> OpsPrometheusTest::Query(const std::string& expr) {
  absl::StatusOr<HttpResponse> response =
      HttpGet(*prometheus_address_, "/api/v1/query?query=" + UrlEncode(expr));
  if (!response.ok()) return response.status();
  const json body = json::parse(response->body, nullptr, false);
  if (body.is_discarded() || body.value("status", "") != "success") {
    return absl::InvalidArgumentError(absl::StrCat(expr, ": ", response->body));
  }
  std::vector<Sample> samples;
  for (const json& r : body["data"]["result"]) {
    Sample s;
    for (const auto& [k, v] : r["metric"].items()) s.labels[k] = v.get<std::string>();
    s.value = std::stod(r["value"][1].get<std::string>());
    samples.push_back(s);
  }
  return samples;
}

// Panel-specific expectations on top of "finite and >= 0".
void CheckPanel(const std::string& panel, const std::string& ref_id,
                const std::vector<Sample>& samples) {
  // nonzero_only: the router pre-creates its codes and tenants at 0.
  auto labels_of = [&](const std::string& key, bool nonzero_only = false) {
    std::set<std::string> values;
    for (const Sample& s : samples) {
      if (nonzero_only && s.value <= 0) continue;
      values.insert(s.labels.count(key) ? s.labels.at(key) : "");
    }
    return values;
  };
  auto all = [&](const std::function<bool(double)>& ok) {
    for (const Sample& s : samples) {
      EXPECT_TRUE(ok(s.value)) << panel << " " << s.value << " "
                               << ::testing::PrintToString(s.labels);
    }
  };
  if (panel == "Request rate" || panel == "Generated tokens/s" || panel == "Admitted by priority") {
    all([](double v) { return v > 0; });
  } else if (panel == "Errors by code") {
    EXPECT_EQ(labels_of("code", /*nonzero_only=*/true),
              (std::set<std::string>{"RESOURCE_EXHAUSTED", "UNAUTHENTICATED"}));
  } else if (panel == "Rate-limited requests by tenant") {
    EXPECT_EQ(labels_of("tenant", /*nonzero_only=*/true), std::set<std::string>{"limited"});
  } else if (panel == "Queue depth by priority") {
    EXPECT_EQ(labels_of("priority"), (std::set<std::string>{"batch", "interactive", "standard"}));
  } else if (panel == "KV-cache usage per worker") {
    EXPECT_EQ(labels_of("pod"), std::set<std::string>{"worker-0"});
    all([](double v) { return v <= 1; });
  } else if (panel == "Workers vs HPA desired replicas" && ref_id == "A") {
    all([](double v) { return v == 1; });  // one healthy worker
  } else if (panel == "Running requests" && ref_id == "B") {
    all([](double v) { return v == 2; });  // the worker's max_num_seqs
  } else if (absl::StrContains(panel, "latency") || absl::StrContains(panel, "token") ||
             absl::StrContains(panel, "duration") || absl::StrContains(panel, "wait")) {
    all([](double v) { return v < 300; });  // seconds; the run took far less
  }
}

TEST_F(OpsPrometheusTest, DashboardQueriesReturnPlausibleSeries) {
  absl::StatusOr<std::vector<DeployQuery>> queries = DashboardQueries();
  ASSERT_TRUE(queries.ok()) << queries.status();
  int checked = 0;
  for (const DeployQuery& q : *queries) {
    SCOPED_TRACE(q.source + ": " + q.expr);
    absl::StatusOr<std::vector<Sample>> samples = Query(Substitute(q.expr));
    ASSERT_TRUE(samples.ok()) << samples.status();
    if (absl::StrContains(q.expr, "kube_")) continue;  // kube-state-metrics: not here
    ASSERT_FALSE(samples->empty()) << "no series";
    for (const Sample& s : *samples) {
      EXPECT_TRUE(std::isfinite(s.value) && s.value >= 0)
          << s.value << " " << ::testing::PrintToString(s.labels)
          << (std::isnan(s.value) ? " (NaN: the histogram saw no observation under load)" : "");
    }
    const size_t colon = q.source.find(": ");
    const size_t bracket = q.source.rfind(" [");
    CheckPanel(q.source.substr(colon + 2, bracket - colon - 2), q.source.substr(bracket + 2, 1),
               *samples);
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

TEST_F(OpsPrometheusTest, AdapterQueriesReturnOneSeriesPerObject) {
  absl::StatusOr<std::vector<AdapterRule>> rules = AdapterRules();
  ASSERT_TRUE(rules.ok()) << rules.status();
  for (const AdapterRule& rule : *rules) {
    const bool pods = rule.resource == "pod";
    const std::string matchers = absl::StrCat("namespace=\"", kNamespace, "\",", rule.resource,
                                              "=~\"", pods ? "worker-0" : "onecard-metrics", "\"");
    const std::string expr = RenderAdapterQuery(rule, matchers, rule.resource);
    SCOPED_TRACE(expr);
    absl::StatusOr<std::vector<Sample>> samples = Query(expr);
    ASSERT_TRUE(samples.ok()) << samples.status();
    ASSERT_EQ(samples->size(), 1u);
    EXPECT_EQ(samples->front().labels.at(rule.resource), pods ? "worker-0" : "onecard-metrics");
    const double v = samples->front().value;
    EXPECT_TRUE(std::isfinite(v) && v >= 0) << v;
    if (absl::StrContains(rule.series_name, "ratio") &&
        !absl::StrContains(rule.series_name, "saturation")) {
      EXPECT_LE(v, 1.0);
    }
  }
}

TEST_F(OpsPrometheusTest, RecordingRulesProduceSeries) {
  absl::StatusOr<std::vector<DeployQuery>> rules = RuleQueries();
  ASSERT_TRUE(rules.ok()) << rules.status();
  for (const DeployQuery& rule : *rules) {
    const std::string name = rule.source.substr(rule.source.find(": ") + 2);
    if (!absl::StrContains(name, ":")) continue;  // alerts
    SCOPED_TRACE(name);
    absl::StatusOr<std::vector<Sample>> samples =
        Query(absl::StrCat(name, "{namespace=\"", kNamespace, "\"}"));
    ASSERT_TRUE(samples.ok()) << samples.status();
    EXPECT_FALSE(samples->empty());
  }
  absl::StatusOr<std::vector<Sample>> per_worker =
      Query("onecard:queue_depth_per_worker{namespace=\"onecard-it\"}");
  ASSERT_TRUE(per_worker.ok() && per_worker->size() == 1u);
  EXPECT_GE(per_worker->front().value, 0);
}

// Under the load (bursts of 12 requests, 2 sequence slots) requests queued:
// the cluster's queue depth and its saturation went above zero in some scrape.
TEST_F(OpsPrometheusTest, QueueDepthRoseUnderLoad) {
  for (const char* expr :
       {"max_over_time(onecard_cluster_queue_depth{namespace=\"onecard-it\"}[5m])",
        "max_over_time(onecard_cluster_saturation_ratio{namespace=\"onecard-it\"}[5m])"}) {
    absl::StatusOr<std::vector<Sample>> samples = Query(expr);
    ASSERT_TRUE(samples.ok() && samples->size() == 1u) << expr;
    EXPECT_GT(samples->front().value, 0) << expr;
  }
}

}  // namespace
}  // namespace onecard::testing
