// The worker's metric families. See worker_metrics.h; names and meanings
// are documented in docs/metrics.md (keep the two in step).
#include "services/worker/worker_metrics.h"

#include <utility>
#include <vector>

#include "prometheus/gauge.h"

namespace onecard::services {
namespace {

using prometheus::Histogram;
using prometheus::MetricFamily;
using prometheus::MetricType;

// clang-format off
const char* const kOutcomes[] = {
    "stop",  "length", "eos", "stop_string", "cancelled", "deadline", "preempted", "error",
    "invalid_argument", "resource_exhausted", "unavailable", "unauthenticated",
    "permission_denied"};
// clang-format on

Histogram& AddHistogram(prometheus::Registry& registry, const std::string& name,
                        const std::string& help, Histogram::BucketBoundaries buckets) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add(
      {}, std::move(buckets));
}

MetricFamily One(const std::string& name, const std::string& help, MetricType type, double value) {
  MetricFamily family{name, help, type, {}};
  prometheus::ClientMetric metric;
  if (type == MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
  return family;
}

// A counter family with one metric a swap direction: out (device to host),
// in (host to device).
MetricFamily ByDirection(const std::string& name, const std::string& help, double out, double in) {
  MetricFamily family{name, help, MetricType::Counter, {}};
  for (const auto& [direction, value] : {std::pair{"out", out}, std::pair{"in", in}}) {
    prometheus::ClientMetric metric;
    metric.label.push_back({"direction", direction});
    metric.counter.value = value;
    family.metric.push_back(std::move(metric));
  }
  return family;
}

class EngineStatsCollectable : public prometheus::Collectable {
 public:
  explicit EngineStatsCollectable(std::function<WorkerSnapshot()> source)
      : source_(std::move(source)) {}

  std::vector<MetricFamily> Collect() const override {
    const WorkerSnapshot s = source_();
    const engine::EngineStats& e = s.stats;
    const double usage =
        e.kv_blocks_total > 0 ? static_cast<double>(e.kv_blocks_used) / e.kv_blocks_total : 0.0;
    constexpr MetricType kGauge = MetricType::Gauge;
    constexpr MetricType kCounter = MetricType::Counter;
    return {
        One("onecard_worker_requests_waiting", "Requests admitted, not yet scheduled.", kGauge,
            e.num_waiting),
        One("onecard_worker_requests_running", "Requests in the engine's batch.", kGauge,
            e.num_running),
        One("onecard_worker_kv_cache_blocks_used", "KV-cache blocks in use.", kGauge,
            e.kv_blocks_used),
        One("onecard_worker_kv_cache_blocks_total", "KV-cache blocks in the pool.", kGauge,
            e.kv_blocks_total),
        One("onecard_worker_kv_cache_usage_ratio", "Used share of the KV-cache blocks.", kGauge,
            usage),
        One("onecard_worker_generation_tokens_per_second",
            "Tokens generated per second over the last few seconds.", kGauge, e.tokens_per_second),
        One("onecard_worker_streams_active", "Open Generate streams.", kGauge, s.active_streams),
        One("onecard_worker_ready", "1 when the model is loaded and the worker admits requests.",
            kGauge, s.ready ? 1 : 0),
        One("onecard_worker_draining", "1 while draining (refusing new requests).", kGauge,
            s.draining ? 1 : 0),
        One("onecard_worker_prompt_tokens_total", "Prompt tokens processed (prefill).", kCounter,
            e.prompt_tokens_total),
        One("onecard_worker_generation_tokens_total", "Tokens generated.", kCounter,
            e.generation_tokens_total),
        One("onecard_worker_preemptions_total", "Sequences preempted for lack of KV blocks.",
            kCounter, e.num_preemptions),
        One("onecard_worker_engine_steps_total", "Engine steps run.", kCounter, e.steps_total),
        One("onecard_worker_requests_swapped",
            "Requests waiting with their KV blocks in the swap space (also counted as waiting).",
            kGauge, e.num_swapped),
        One("onecard_worker_kv_swap_blocks_used", "Swap space blocks holding swapped-out KV.",
            kGauge, e.kv_swap_blocks_used),
        One("onecard_worker_kv_swap_blocks_total", "Blocks of the swap space (0: no KV swap).",
            kGauge, e.kv_swap_blocks_total),
        One("onecard_worker_kv_swap_preemptions_total",
            "Preemptions that swapped the sequence's KV out (the rest recomputed it).", kCounter,
            e.num_swap_preemptions),
        ByDirection("onecard_worker_kv_swapped_blocks_total",
                    "KV blocks copied to the swap space (out) and back (in).",
                    e.kv_swapped_out_blocks_total, e.kv_swapped_in_blocks_total),
        ByDirection("onecard_worker_kv_swap_bytes_total",
                    "Bytes of KV swap copies to the swap space (out) and back (in).",
                    e.kv_swap_out_bytes_total, e.kv_swap_in_bytes_total),
    };
  }

 private:
  std::function<WorkerSnapshot()> source_;
};

}  // namespace

WorkerMetrics::WorkerMetrics(prometheus::Registry& registry, const std::string& model,
                             const std::string& backend)
    : requests_(prometheus::BuildCounter()
                    .Name("onecard_worker_requests_total")
                    .Help("Generate requests by how they ended.")
                    .Register(registry)),
      ttft_(AddHistogram(registry, "onecard_worker_time_to_first_token_seconds",
                         "Worker-side time from a request's arrival to its first token.",
                         {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80})),
      tpot_(AddHistogram(registry, "onecard_worker_time_per_output_token_seconds",
                         "Mean time between a request's tokens after the first.",
                         {0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56})),
      e2e_(AddHistogram(registry, "onecard_worker_e2e_request_latency_seconds",
                        "Worker-side time from a request's arrival to its end.",
                        {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640})),
      prefix_cache_hit_tokens_(
          prometheus::BuildCounter()
              .Name("onecard_worker_prefix_cache_hit_tokens_total")
              .Help("Prompt tokens served from the prefix cache (their KV blocks were reused).")
              .Register(registry)
              .Add({})),
      prefix_cache_miss_tokens_(prometheus::BuildCounter()
                                    .Name("onecard_worker_prefix_cache_miss_tokens_total")
                                    .Help("Prompt tokens computed (not in the prefix cache).")
                                    .Register(registry)
                                    .Add({})),
      step_(AddHistogram(registry, "onecard_worker_step_duration_seconds",
                         "Duration of one engine step (schedule, forward, sample).",
                         {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5})),
      step_host_(AddHistogram(
          registry, "onecard_worker_step_host_seconds",
          "Host work of one engine step: its duration less the model's call, plus the "
          "runner's own host work in that call where it reports it (schedule, batch, packing "
          "and launches, sampling on the host, detokenization, callbacks).",
          {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1})),
      model_gap_(AddHistogram(
          registry, "onecard_worker_model_idle_gap_seconds",
          "Between two consecutive engine steps while requests were in flight: the device's "
          "idle time between their work where the runner measures it (cuda), else from the "
          "end of one model call to the start of the next.",
          {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1})) {
  for (const char* outcome : kOutcomes) {
    requests_by_outcome_[outcome] = &requests_.Add({{"outcome", outcome}});
  }
  prometheus::BuildGauge()
      .Name("onecard_worker_info")
      .Help("Always 1; labels name the served model and the backend.")
      .Register(registry)
      .Add({{"model", model}, {"backend", backend}})
      .Set(1);
}

void WorkerMetrics::ObserveRequest(const RequestRecord& record) {
  const auto it = requests_by_outcome_.find(record.outcome);
  (it != requests_by_outcome_.end() ? *it->second : *requests_by_outcome_.at("error")).Increment();
  if (record.prompt_tokens > 0) {
    prefix_cache_hit_tokens_.Increment(static_cast<double>(record.cached_tokens));
    prefix_cache_miss_tokens_.Increment(
        static_cast<double>(record.prompt_tokens - record.cached_tokens));
  }
  if (record.time_to_first_token.has_value()) {
    ttft_.Observe(absl::ToDoubleSeconds(*record.time_to_first_token));
  }
  if (record.time_per_output_token.has_value()) {
    tpot_.Observe(absl::ToDoubleSeconds(*record.time_per_output_token));
  }
  e2e_.Observe(absl::ToDoubleSeconds(record.e2e_latency));
}

void WorkerMetrics::ObserveStep(const engine::StepInfo& step) {
  step_.Observe(absl::ToDoubleSeconds(step.duration));
  step_host_.Observe(absl::ToDoubleSeconds(step.duration - step.forward + step.runner_host));
  if (step.device_gap.has_value()) {
    model_gap_.Observe(absl::ToDoubleSeconds(*step.device_gap));
  } else if (step.gap > absl::ZeroDuration()) {
    model_gap_.Observe(absl::ToDoubleSeconds(step.gap));
  }
}

std::shared_ptr<prometheus::Collectable> WorkerMetrics::EngineCollectable(
    std::function<WorkerSnapshot()> source) {
  return std::make_shared<EngineStatsCollectable>(std::move(source));
}

}  // namespace onecard::services
