// Tests of the worker's metric families: names and types as listed in
// docs/metrics.md, outcomes counted by label, histograms fed, and the
// engine gauges read from the snapshot at scrape time. The text goes
// through prometheus-cpp's serializer and the strict test parser, as a
// scrape would.
#include "services/worker/worker_metrics.h"

#include <sstream>

#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "tests/services/testing/prom_text.h"

namespace onecard::services {
namespace {

testing::PromText Scrape(prometheus::Registry& registry, prometheus::Collectable& extra) {
  std::vector<prometheus::MetricFamily> families = registry.Collect();
  for (auto& f : extra.Collect()) families.push_back(std::move(f));
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  absl::StatusOr<testing::PromText> parsed = testing::ParsePromText(out.str());
  EXPECT_TRUE(parsed.ok()) << parsed.status() << "\n" << out.str();
  return parsed.ok() ? *parsed : testing::PromText();
}

TEST(WorkerMetricsTest, EveryFamilyHasItsType) {
  prometheus::Registry registry;
  WorkerMetrics metrics(registry, "smol", "cpu");
  auto gauges = WorkerMetrics::EngineCollectable([] { return WorkerSnapshot(); });
  const testing::PromText text = Scrape(registry, *gauges);
  const std::map<std::string, std::string> expected = {
      {"onecard_worker_requests_total", "counter"},
      {"onecard_worker_time_to_first_token_seconds", "histogram"},
      {"onecard_worker_time_per_output_token_seconds", "histogram"},
      {"onecard_worker_e2e_request_latency_seconds", "histogram"},
      {"onecard_worker_step_duration_seconds", "histogram"},
      {"onecard_worker_step_host_seconds", "histogram"},
      {"onecard_worker_model_idle_gap_seconds", "histogram"},
      {"onecard_worker_info", "gauge"},
      {"onecard_worker_requests_waiting", "gauge"},
      {"onecard_worker_requests_running", "gauge"},
      {"onecard_worker_kv_cache_blocks_used", "gauge"},
      {"onecard_worker_kv_cache_blocks_total", "gauge"},
      {"onecard_worker_kv_cache_usage_ratio", "gauge"},
      {"onecard_worker_generation_tokens_per_second", "gauge"},
      {"onecard_worker_streams_active", "gauge"},
      {"onecard_worker_ready", "gauge"},
      {"onecard_worker_draining", "gauge"},
      {"onecard_worker_prompt_tokens_total", "counter"},
      {"onecard_worker_generation_tokens_total", "counter"},
      {"onecard_worker_preemptions_total", "counter"},
      {"onecard_worker_engine_steps_total", "counter"},
      {"onecard_worker_requests_swapped", "gauge"},
      {"onecard_worker_kv_swap_blocks_used", "gauge"},
      {"onecard_worker_kv_swap_blocks_total", "gauge"},
      {"onecard_worker_kv_swap_preemptions_total", "counter"},
      {"onecard_worker_kv_swapped_blocks_total", "counter"},
      {"onecard_worker_kv_swap_bytes_total", "counter"},
      {"onecard_worker_prefix_cache_hit_tokens_total", "counter"},
      {"onecard_worker_prefix_cache_miss_tokens_total", "counter"},
  };
  EXPECT_EQ(text.types, expected);
  EXPECT_EQ(text.Value("onecard_worker_info", {{"model", "smol"}, {"backend", "cpu"}}), 1);
  EXPECT_EQ(text.Value("onecard_worker_requests_total", {{"outcome", "deadline"}}), 0)
      << "every outcome is exported from the start";
  EXPECT_EQ(text.Value("onecard_worker_kv_swap_bytes_total", {{"direction", "in"}}), 0)
      << "both swap directions are exported from the start";
}

// The KV swap figures of Engine::Stats: gauges, and counters a direction
// whose rate() is the swap traffic.
TEST(WorkerMetricsTest, KvSwapFiguresComeFromTheEngineStats) {
  prometheus::Registry registry;
  WorkerMetrics metrics(registry, "smol", "cuda");
  WorkerSnapshot snapshot;
  snapshot.stats.num_swapped = 2;
  snapshot.stats.kv_swap_blocks_used = 30;
  snapshot.stats.kv_swap_blocks_total = 4096;
  snapshot.stats.num_swap_preemptions = 5;
  snapshot.stats.kv_swapped_out_blocks_total = 70;
  snapshot.stats.kv_swapped_in_blocks_total = 40;
  snapshot.stats.kv_swap_out_bytes_total = 70 << 20;
  snapshot.stats.kv_swap_in_bytes_total = 40 << 20;
  auto gauges = WorkerMetrics::EngineCollectable([&] { return snapshot; });
  const testing::PromText text = Scrape(registry, *gauges);
  EXPECT_EQ(text.Value("onecard_worker_requests_swapped"), 2);
  EXPECT_EQ(text.Value("onecard_worker_kv_swap_blocks_used"), 30);
  EXPECT_EQ(text.Value("onecard_worker_kv_swap_blocks_total"), 4096);
  EXPECT_EQ(text.Value("onecard_worker_kv_swap_preemptions_total"), 5);
  EXPECT_EQ(text.Value("onecard_worker_kv_swapped_blocks_total", {{"direction", "out"}}), 70);
  EXPECT_EQ(text.Value("onecard_worker_kv_swapped_blocks_total", {{"direction", "in"}}), 40);
  EXPECT_EQ(text.Value("onecard_worker_kv_swap_bytes_total", {{"direction", "out"}}), 70 << 20);
  EXPECT_EQ(text.Value("onecard_worker_kv_swap_bytes_total", {{"direction", "in"}}), 40 << 20);
}

// Hits are the prompt tokens served from the prefix cache, misses the rest;
// a request refused before the engine (no usage) counts neither.
TEST(WorkerMetricsTest, PrefixCacheHitsAndMissesCountPromptTokens) {
  prometheus::Registry registry;
  WorkerMetrics metrics(registry, "smol", "cpu");
  metrics.ObserveRequest({.outcome = "stop", .prompt_tokens = 40, .cached_tokens = 32});
  metrics.ObserveRequest({.outcome = "length", .prompt_tokens = 10, .cached_tokens = 0});
  metrics.ObserveRequest({.outcome = "resource_exhausted"});
  auto gauges = WorkerMetrics::EngineCollectable([] { return WorkerSnapshot(); });
  const testing::PromText text = Scrape(registry, *gauges);
  EXPECT_EQ(text.Value("onecard_worker_prefix_cache_hit_tokens_total"), 32);
  EXPECT_EQ(text.Value("onecard_worker_prefix_cache_miss_tokens_total"), 8 + 10);
}

TEST(WorkerMetricsTest, RequestsAndSteps) {
  prometheus::Registry registry;
  WorkerMetrics metrics(registry, "smol", "cpu");
  metrics.ObserveRequest(
      {"length", absl::Milliseconds(30), absl::Milliseconds(15), absl::Milliseconds(400)});
  metrics.ObserveRequest({"length", std::nullopt, std::nullopt, absl::Seconds(2)});
  metrics.ObserveRequest({"invalid_argument", std::nullopt, std::nullopt, absl::ZeroDuration()});
  metrics.ObserveRequest({"something new", std::nullopt, std::nullopt, absl::ZeroDuration()});
  metrics.ObserveStep({.duration = absl::Milliseconds(3),
                       .forward = absl::Milliseconds(2),
                       .gap = absl::Microseconds(400),
                       .num_seqs = 4,
                       .num_tokens = 4});
  metrics.ObserveStep({.duration = absl::Milliseconds(3), .forward = absl::Milliseconds(3)});
  auto gauges = WorkerMetrics::EngineCollectable([] { return WorkerSnapshot(); });
  const testing::PromText text = Scrape(registry, *gauges);
  EXPECT_EQ(text.Value("onecard_worker_requests_total", {{"outcome", "length"}}), 2);
  EXPECT_EQ(text.Value("onecard_worker_requests_total", {{"outcome", "invalid_argument"}}), 1);
  EXPECT_EQ(text.Value("onecard_worker_requests_total", {{"outcome", "error"}}), 1)
      << "unknown outcomes count as errors";
  EXPECT_EQ(text.Value("onecard_worker_time_to_first_token_seconds_count"), 1);
  EXPECT_DOUBLE_EQ(*text.Value("onecard_worker_time_to_first_token_seconds_sum"), 0.03);
  EXPECT_EQ(text.Value("onecard_worker_time_to_first_token_seconds_bucket", {{"le", "0.05"}}), 1);
  EXPECT_EQ(text.Value("onecard_worker_time_to_first_token_seconds_bucket", {{"le", "0.025"}}), 0);
  EXPECT_EQ(text.Value("onecard_worker_time_per_output_token_seconds_count"), 1);
  EXPECT_EQ(text.Value("onecard_worker_e2e_request_latency_seconds_count"), 4);
  EXPECT_EQ(text.Value("onecard_worker_step_duration_seconds_count"), 2);
  EXPECT_EQ(text.Value("onecard_worker_step_duration_seconds_bucket", {{"le", "0.005"}}), 2);
  // Host work: 1 ms and 0 ms; the gap only where a step had one (400 us).
  EXPECT_EQ(text.Value("onecard_worker_step_host_seconds_count"), 2);
  EXPECT_DOUBLE_EQ(*text.Value("onecard_worker_step_host_seconds_sum"), 0.001);
  EXPECT_EQ(text.Value("onecard_worker_step_host_seconds_bucket", {{"le", "0.0005"}}), 1);
  EXPECT_EQ(text.Value("onecard_worker_model_idle_gap_seconds_count"), 1);
  EXPECT_EQ(text.Value("onecard_worker_model_idle_gap_seconds_bucket", {{"le", "0.0005"}}), 1);
  EXPECT_EQ(text.Value("onecard_worker_model_idle_gap_seconds_bucket", {{"le", "0.00025"}}), 0);
}

// A runner that reports its own host work and the device's idle gap (cuda):
// the step's host work adds the runner's; the gap is the device's where the
// engine passes one (two consecutive steps, or steps launched ahead, whose
// engine gap is zero), else the engine's.
TEST(WorkerMetricsTest, StepsWithTheRunnersTimes) {
  prometheus::Registry registry;
  WorkerMetrics metrics(registry, "smol", "cuda");
  metrics.ObserveStep({.duration = absl::Milliseconds(10),
                       .forward = absl::Milliseconds(9),
                       .runner_host = absl::Microseconds(300),
                       .gap = absl::Microseconds(400),
                       .device_gap = absl::Microseconds(900)});
  metrics.ObserveStep({.duration = absl::Milliseconds(10),
                       .forward = absl::Milliseconds(10),
                       .runner_host = absl::Microseconds(200)});  // the first: no gap at all
  metrics.ObserveStep({.duration = absl::Milliseconds(10),
                       .forward = absl::Milliseconds(10),
                       .runner_host = absl::Microseconds(100),
                       .device_gap = absl::Microseconds(50)});  // launched ahead
  auto gauges = WorkerMetrics::EngineCollectable([] { return WorkerSnapshot(); });
  const testing::PromText text = Scrape(registry, *gauges);
  EXPECT_EQ(text.Value("onecard_worker_step_host_seconds_count"), 3);
  EXPECT_NEAR(*text.Value("onecard_worker_step_host_seconds_sum"), 0.0013 + 0.0002 + 0.0001, 1e-12);
  EXPECT_EQ(text.Value("onecard_worker_model_idle_gap_seconds_count"), 2);
  EXPECT_NEAR(*text.Value("onecard_worker_model_idle_gap_seconds_sum"), 0.0009 + 0.00005, 1e-12);
}

TEST(WorkerMetricsTest, EngineGaugesComeFromTheSnapshotAtScrapeTime) {
  prometheus::Registry registry;
  WorkerSnapshot snapshot;
  auto gauges = WorkerMetrics::EngineCollectable([&snapshot] { return snapshot; });
  snapshot.stats.num_waiting = 3;
  snapshot.stats.num_running = 5;
  snapshot.stats.kv_blocks_used = 25;
  snapshot.stats.kv_blocks_total = 100;
  snapshot.stats.tokens_per_second = 12.5;
  snapshot.stats.num_preemptions = 2;
  snapshot.stats.prompt_tokens_total = 1000;
  snapshot.stats.generation_tokens_total = 500;
  snapshot.stats.steps_total = 77;
  snapshot.active_streams = 8;
  snapshot.ready = true;
  const testing::PromText text = Scrape(registry, *gauges);
  EXPECT_EQ(text.Value("onecard_worker_requests_waiting"), 3);
  EXPECT_EQ(text.Value("onecard_worker_requests_running"), 5);
  EXPECT_EQ(text.Value("onecard_worker_kv_cache_blocks_used"), 25);
  EXPECT_EQ(text.Value("onecard_worker_kv_cache_blocks_total"), 100);
  EXPECT_EQ(text.Value("onecard_worker_kv_cache_usage_ratio"), 0.25);
  EXPECT_EQ(text.Value("onecard_worker_generation_tokens_per_second"), 12.5);
  EXPECT_EQ(text.Value("onecard_worker_preemptions_total"), 2);
  EXPECT_EQ(text.Value("onecard_worker_prompt_tokens_total"), 1000);
  EXPECT_EQ(text.Value("onecard_worker_generation_tokens_total"), 500);
  EXPECT_EQ(text.Value("onecard_worker_engine_steps_total"), 77);
  EXPECT_EQ(text.Value("onecard_worker_streams_active"), 8);
  EXPECT_EQ(text.Value("onecard_worker_ready"), 1);
  EXPECT_EQ(text.Value("onecard_worker_draining"), 0);
  snapshot.draining = true;
  snapshot.stats.kv_blocks_used = 0;
  const testing::PromText later = Scrape(registry, *gauges);
  EXPECT_EQ(later.Value("onecard_worker_draining"), 1);
  EXPECT_EQ(later.Value("onecard_worker_kv_cache_usage_ratio"), 0);
}

}  // namespace
}  // namespace onecard::services
