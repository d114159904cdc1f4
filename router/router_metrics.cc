// The router's Prometheus metrics (see router_metrics.h and
// docs/metrics.md). Tested by tests/router/router_metrics_test.cc.
#include "router/router_metrics.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/support/status_code_enum.h"
#include "prometheus/client_metric.h"
#include "prometheus/metric_family.h"
#include "services/common/status.h"

namespace onecard::router {
namespace {

// Seconds, from 5 ms to 10 min: queue waits and TTFT on a loaded CPU worker
// and on a GPU alike.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* const buckets = new prometheus::Histogram::BucketBoundaries{
      0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
  return *buckets;
}

template <typename T>
std::array<T*, kNumPriorityClasses> PerClass(
    prometheus::Family<T>& family,
    const std::function<T&(prometheus::Family<T>&, const prometheus::Labels&)>& add) {
  std::array<T*, kNumPriorityClasses> out{};
  for (int c = 0; c < kNumPriorityClasses; ++c) {
    out[c] = &add(family, {{"priority", PriorityClassName(static_cast<PriorityClass>(c))}});
  }
  return out;
}

// One histogram per class, each also labelled `extra` (may be empty).
std::array<prometheus::Histogram*, kNumPriorityClasses> PerClassHistograms(
    prometheus::Family<prometheus::Histogram>& family, const prometheus::Labels& extra) {
  return PerClass<prometheus::Histogram>(
      family,
      [&extra](prometheus::Family<prometheus::Histogram>& f,
               const prometheus::Labels& l) -> prometheus::Histogram& {
        prometheus::Labels labels = l;
        labels.insert(extra.begin(), extra.end());
        return f.Add(labels, LatencyBuckets());
      });
}

prometheus::Family<prometheus::Histogram>& HistogramFamily(prometheus::Registry& r,
                                                           const std::string& name,
                                                           const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r);
}

std::array<prometheus::Histogram*, kNumPriorityClasses> Histograms(prometheus::Registry& r,
                                                                   const std::string& name,
                                                                   const std::string& help) {
  return PerClassHistograms(HistogramFamily(r, name, help), {});
}

// One histogram per door and class.
std::array<std::array<prometheus::Histogram*, kNumPriorityClasses>, kNumFrontDoors>
PerDoorHistograms(prometheus::Registry& r, const std::string& name, const std::string& help) {
  auto& family = HistogramFamily(r, name, help);
  std::array<std::array<prometheus::Histogram*, kNumPriorityClasses>, kNumFrontDoors> out;
  for (int d = 0; d < kNumFrontDoors; ++d) {
    out[d] = PerClassHistograms(family, {{"api", FrontDoorLabel(static_cast<FrontDoor>(d))}});
  }
  return out;
}

prometheus::ClientMetric Gauge(double value, prometheus::Labels labels) {
  prometheus::ClientMetric m;
  for (auto& [k, v] : labels) m.label.push_back(prometheus::ClientMetric::Label{k, v});
  m.gauge.value = value;
  return m;
}

prometheus::MetricFamily GaugeFamily(const std::string& name, const std::string& help) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = prometheus::MetricType::Gauge;
  return f;
}

class GaugeCollector : public prometheus::Collectable {
 public:
  explicit GaugeCollector(std::function<RouterGauges()> source) : source_(std::move(source)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::function<RouterGauges()> source_;
};

std::vector<prometheus::MetricFamily> GaugeCollector::Collect() const {
  const RouterGauges g = source_();
  auto depth = GaugeFamily("onecard_router_queue_depth",
                           "Requests waiting in the router's queue, by priority class.");
  for (int c = 0; c < kNumPriorityClasses; ++c) {
    depth.metric.push_back(Gauge(static_cast<double>(g.queue_depth[c]),
                                 {{"priority", PriorityClassName(static_cast<PriorityClass>(c))}}));
  }
  auto in_flight = GaugeFamily("onecard_router_worker_in_flight",
                               "Requests this router has dispatched to a worker and not ended.");
  std::array<int64_t, 3> states = {0, 0, 0};  // healthy, ejected, unhealthy
  for (const WorkerSnapshot& w : g.workers) {
    in_flight.metric.push_back(Gauge(static_cast<double>(w.in_flight), {{"worker", w.id}}));
    ++states[w.ejected ? 1 : (w.healthy ? 0 : 2)];
  }
  auto workers = GaugeFamily("onecard_router_workers",
                             "Workers in the router's table by state (healthy, ejected after "
                             "failures, unhealthy per the control plane).");
  workers.metric.push_back(Gauge(states[0], {{"state", "healthy"}}));
  workers.metric.push_back(Gauge(states[1], {{"state", "ejected"}}));
  workers.metric.push_back(Gauge(states[2], {{"state", "unhealthy"}}));
  auto streams = GaugeFamily("onecard_router_open_streams",
                             "Generate calls open at the router (queued or streaming).");
  streams.metric.push_back(Gauge(static_cast<double>(g.open_streams), {}));
  auto draining = GaugeFamily("onecard_router_draining",
                              "1 while the router refuses new requests and finishes old ones.");
  draining.metric.push_back(Gauge(g.draining ? 1 : 0, {}));
  return {depth, in_flight, workers, streams, draining};
}

}  // namespace

const char* FrontDoorLabel(FrontDoor door) { return door == FrontDoor::kHttp ? "http" : "grpc"; }

const char* RejectReasonLabel(RejectReason reason) {
  switch (reason) {
    case RejectReason::kUnauthenticated:
      return "unauthenticated";
    case RejectReason::kPermissionDenied:
      return "permission_denied";
    case RejectReason::kInvalidArgument:
      return "invalid_argument";
    case RejectReason::kRateLimited:
      return "rate_limited";
    case RejectReason::kQueueFull:
      return "queue_full";
    case RejectReason::kNoWorker:
      return "no_worker";
    case RejectReason::kDraining:
      return "draining";
    case RejectReason::kQueueTimeout:
      return "queue_timeout";
  }
  return "unknown";
}

RouterMetrics::RouterMetrics(prometheus::Registry& r)
    : rate_limited_(prometheus::BuildCounter()
                        .Name("onecard_router_rate_limited_total")
                        .Help("Requests refused by a tenant's token bucket, by tenant and limit "
                              "(requests or tokens).")
                        .Register(r)),
      retries_(prometheus::BuildCounter()
                   .Name("onecard_router_retries_total")
                   .Help("Retries: requests sent to another worker after one failed before "
                         "any token.")
                   .Register(r)
                   .Add({})),
      queue_wait_(Histograms(r, "onecard_router_queue_wait_seconds",
                             "Time from admission to dispatch to a worker, by priority.")),
      ttft_(PerDoorHistograms(r, "onecard_router_time_to_first_token_seconds",
                              "Time from the request's arrival at the router to its first token "
                              "sent to the client, by API (grpc, http) and priority.")),
      e2e_(Histograms(r, "onecard_router_request_duration_seconds",
                      "Time from the request's arrival at the router to its end (any "
                      "outcome), by priority.")),
      requests_(prometheus::BuildCounter()
                    .Name("onecard_router_requests_total")
                    .Help("Generate calls (gRPC) and completions (HTTP) ended, by API and "
                          "status code.")
                    .Register(r)) {
  auto& admitted = prometheus::BuildCounter()
                       .Name("onecard_router_requests_admitted_total")
                       .Help("Requests admitted into the router's queue, by priority.")
                       .Register(r);
  admitted_ = PerClass<prometheus::Counter>(
      admitted,
      [](prometheus::Family<prometheus::Counter>& f,
         const prometheus::Labels& l) -> prometheus::Counter& { return f.Add(l); });
  auto& rejected = prometheus::BuildCounter()
                       .Name("onecard_router_requests_rejected_total")
                       .Help(
                           "Requests refused or ended by the router without a worker's "
                           "answer, by reason.")
                       .Register(r);
  for (int i = 0; i < kNumRejectReasons; ++i) {
    rejected_[i] = &rejected.Add({{"reason", RejectReasonLabel(static_cast<RejectReason>(i))}});
  }
  for (int d = 0; d < kNumFrontDoors; ++d) {
    for (int code : {0, 1, 3, 4, 5, 7, 8, 13, 14, 16}) {
      requests_.Add({{"api", FrontDoorLabel(static_cast<FrontDoor>(d))},
                     {"code", services::GrpcCodeName(code)}});
    }
  }
}

void RouterMetrics::Admitted(PriorityClass p) { admitted_[static_cast<int>(p)]->Increment(); }

void RouterMetrics::Rejected(RejectReason reason) {
  rejected_[static_cast<int>(reason)]->Increment();
}

void RouterMetrics::RateLimited(const std::string& tenant, const std::string& limit) {
  absl::MutexLock lock(&mu_);
  RateLimitedCounter(tenant, limit).Increment();
}

void RouterMetrics::DeclareTenants(const std::vector<std::string>& tenants) {
  absl::MutexLock lock(&mu_);
  for (const std::string& tenant : tenants) {
    for (const char* limit : {"requests", "tokens", "streams"}) RateLimitedCounter(tenant, limit);
  }
}

prometheus::Counter& RouterMetrics::RateLimitedCounter(const std::string& tenant,
                                                       const std::string& limit) {
  const std::string key = absl::StrCat(tenant, "\n", limit);
  auto it = rate_limited_by_.find(key);
  if (it == rate_limited_by_.end()) {
    it = rate_limited_by_.emplace(key, &rate_limited_.Add({{"tenant", tenant}, {"limit", limit}}))
             .first;
  }
  return *it->second;
}

int64_t RouterMetrics::admitted_total() const {
  double total = 0;
  for (const prometheus::Counter* c : admitted_) total += c->Value();
  return static_cast<int64_t>(total);
}

int64_t RouterMetrics::rejected_total() const {
  double total = 0;
  for (const prometheus::Counter* c : rejected_) total += c->Value();
  return static_cast<int64_t>(total);
}

void RouterMetrics::Retried() { retries_.Increment(); }

void RouterMetrics::QueueWait(PriorityClass p, absl::Duration wait) {
  queue_wait_[static_cast<int>(p)]->Observe(absl::ToDoubleSeconds(wait));
}

void RouterMetrics::FirstToken(FrontDoor door, PriorityClass p, absl::Duration ttft) {
  ttft_[static_cast<int>(door)][static_cast<int>(p)]->Observe(absl::ToDoubleSeconds(ttft));
}

void RouterMetrics::Finished(FrontDoor door, PriorityClass p, int code, absl::Duration e2e) {
  e2e_[static_cast<int>(p)]->Observe(absl::ToDoubleSeconds(e2e));
  requests_.Add({{"api", FrontDoorLabel(door)}, {"code", services::GrpcCodeName(code)}})
      .Increment();
}

std::shared_ptr<prometheus::Collectable> RouterMetrics::GaugeCollectable(
    std::function<RouterGauges()> source) {
  return std::make_shared<GaugeCollector>(std::move(source));
}

}  // namespace onecard::router
