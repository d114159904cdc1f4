// onecard-bench scenarios of the serving path (../shared/benchmarks.md):
//   serve            load against --target (a router or a worker): --mix
//                    (serve-mix = the four request classes), closed-loop
//                    --users or Poisson --rate, --requests / --duration,
//                    --warmup; per-class P50/P95/P99 TTFT, TPOT, e2e and
//                    throughput (scenario "serve-mix" for the preset mix,
//                    else "serve"); --json PATH writes the full result.
//   serve-priority   FIFO vs priority routers in front of one local worker,
//                    90 % short / 10 % long by default; case
//                    short-p95-ttft-ratio = FIFO P95 / priority P95.
//   serve-load       a local worker behind a router: --users closed-loop
//                    users (default 150, 128/128) while the worker's gauges
//                    are sampled; then serve-priority's comparison
//                    (--priority_mix, --priority_requests) with records
//                    under serve-load.
//   stability        a local worker behind a router: --requests (default
//                    1000) after a warm-up; P99 TTFT/TPOT, failures, the
//                    card's used memory and the worker's RSS before/after.
//   router-overhead  the same requests straight to a local worker and
//                    through a local router; added P50/P99 latency.
// --model takes synthetic:<shape>[:<weights>] too; --worker_args passes
// flags to the local workers (e.g. "--backend cuda --tuning-cache F").
// The local scenarios start onecard-worker and onecard-router from the build
// tree (--worker-bin / --router-bin override) with logs in --log-dir.
// Run by hand; the library under it is tested by tests/tools/bench/serve/
// and tests/integration/router_*_test.cc.
#include <algorithm>
#include <fstream>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/common/status_macros.h"
#include "tools/bench/bench_registry.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/serve/experiments.h"
#include "tools/bench/serve/load_runner.h"

ABSL_FLAG(std::string, target, "", "serve: host:port of a router or worker");
ABSL_FLAG(std::string, api_key, "", "serve: API key (authorization: Bearer)");
ABSL_FLAG(std::string, mix, "",
          "request classes: serve-mix, a class of it, or NAME=W:PROMPT/NEW[xTURNS][@PRIORITY],...");
ABSL_FLAG(int32_t, users, 0, "closed loop: concurrent users (0 = the scenario's default)");
ABSL_FLAG(double, rate, 0, "Poisson arrivals per second (0 = closed loop / scenario default)");
ABSL_FLAG(int64_t, requests, 0, "requests (conversations) to send (0 = the scenario's default)");
ABSL_FLAG(std::string, duration, "", "run this long instead of --requests, e.g. 60s");
ABSL_FLAG(int64_t, warmup, -1, "warm-up requests, not counted (-1 = the scenario's default)");
ABSL_FLAG(uint64_t, seed, 1, "seed of class choice, arrival gaps and prompts");
ABSL_FLAG(std::string, json, "", "write the full result as JSON to this path");
ABSL_FLAG(int32_t, max_in_flight, 4096, "Poisson: most open requests");
ABSL_FLAG(std::string, log_dir, "/tmp", "local scenarios: process logs");
ABSL_FLAG(std::string, worker_bin, "", "local scenarios: onecard-worker (default: build tree)");
ABSL_FLAG(std::string, router_bin, "", "local scenarios: onecard-router (default: build tree)");
ABSL_FLAG(int32_t, pairs, 200, "router-overhead: request pairs");
ABSL_FLAG(int32_t, router_max_in_flight, 1, "serve-priority: requests in flight per worker");
ABSL_FLAG(std::string, case_prefix, "",
          "serve: put this before every record's case (e.g. the model, when one run serves "
          "several)");
ABSL_FLAG(std::string, worker_args, "",
          "local scenarios: extra onecard-worker flags, space-separated (e.g. \"--backend cuda\")");
ABSL_FLAG(int32_t, prompt_vocab, 49152,
          "prompt ids are drawn below this (at most the model's vocabulary)");
ABSL_FLAG(int32_t, calibration_users, 0,
          "serve-priority / serve-load: calibrate the capacity with this many closed-loop users "
          "(0 = --router_max_in_flight)");
ABSL_FLAG(std::string, priority_mix, "short=0.9:32/4@interactive,long=0.1:512/4@batch",
          "serve-load: the mix of its priority comparison");
ABSL_FLAG(int64_t, priority_requests, 200, "serve-load: requests of each priority-comparison run");
ABSL_FLAG(double, target_load, 0.8,
          "serve-priority without --rate/--users: Poisson at this multiple of the worker's "
          "calibrated capacity for the mix");

namespace onecard::bench::serve {
namespace {

absl::StatusOr<LoadSpec> SpecFromFlags(const BenchOptions& options, const std::string& mix,
                                       int32_t users, int64_t requests, int64_t warmup) {
  LoadSpec s;
  s.target = absl::GetFlag(FLAGS_target);
  s.api_key = absl::GetFlag(FLAGS_api_key);
  ASSIGN_OR_RETURN(s.mix,
                   ParseMix(absl::GetFlag(FLAGS_mix).empty() ? mix : absl::GetFlag(FLAGS_mix)));
  s.users = absl::GetFlag(FLAGS_users) > 0 ? absl::GetFlag(FLAGS_users) : users;
  if (absl::GetFlag(FLAGS_rate) > 0) {
    s.mode = ArrivalMode::kPoisson;
    s.rate_per_second = absl::GetFlag(FLAGS_rate);
  }
  s.max_in_flight = absl::GetFlag(FLAGS_max_in_flight);
  s.num_requests = absl::GetFlag(FLAGS_requests) > 0 ? absl::GetFlag(FLAGS_requests) : requests;
  if (!absl::GetFlag(FLAGS_duration).empty()) {
    if (!absl::ParseDuration(absl::GetFlag(FLAGS_duration), &s.duration)) {
      return absl::InvalidArgumentError("--duration: expected a duration such as 60s");
    }
    s.num_requests = 0;
  }
  s.warmup_requests = absl::GetFlag(FLAGS_warmup) >= 0 ? absl::GetFlag(FLAGS_warmup) : warmup;
  s.seed = absl::GetFlag(FLAGS_seed);
  s.vocab_size = absl::GetFlag(FLAGS_prompt_vocab);
  (void)options;
  return s;
}

absl::Status WriteJson(const nlohmann::json& json) {
  const std::string path = absl::GetFlag(FLAGS_json);
  if (path.empty()) return absl::OkStatus();
  std::ofstream out(path);
  out << json.dump(2) << "\n";
  if (!out) return absl::UnavailableError(absl::StrCat("--json: cannot write ", path));
  std::cout << "wrote " << path << "\n";
  return absl::OkStatus();
}

ClusterOptions Cluster(const BenchOptions& options) {
  ClusterOptions c;
  c.model_path = options.model_path;
  c.log_dir = absl::GetFlag(FLAGS_log_dir);
  c.worker_bin = absl::GetFlag(FLAGS_worker_bin);
  c.router_bin = absl::GetFlag(FLAGS_router_bin);
  if (options.num_threads > 0) c.worker_args = {"--threads", absl::StrCat(options.num_threads)};
  // The cpu backend's weights (the worker checks the value; cuda ignores it).
  c.worker_args.insert(c.worker_args.end(), {"--cpu-weights", options.cpu_weights});
  for (absl::string_view arg :
       absl::StrSplit(absl::GetFlag(FLAGS_worker_args), ' ', absl::SkipEmpty())) {
    c.worker_args.emplace_back(arg);
  }
  return c;
}

absl::Status RunServe(const BenchOptions& options, BenchReporter& reporter) {
  ASSIGN_OR_RETURN(LoadSpec spec, SpecFromFlags(options, "serve-mix", 1, 10, 1));
  ASSIGN_OR_RETURN(LoadRun run, RunLoad(spec));
  const std::string mix = absl::GetFlag(FLAGS_mix);
  bool preset = mix.empty() || mix == "serve-mix";
  for (const RequestClass& c : ServeMixClasses()) preset = preset || mix == c.name;
  for (BenchRecord& r : ToBenchRecords(run.result, preset ? "serve-mix" : "serve")) {
    r.case_name = absl::GetFlag(FLAGS_case_prefix) + r.case_name;
    reporter.Add(std::move(r));
  }
  return WriteJson(ToJson(run.result));
}

// serve-priority's comparison (and serve-load's second part): records under
// `scenario`, the JSON it wrote.
absl::StatusOr<nlohmann::json> ComparePriorities(const PriorityComparisonOptions& o,
                                                 const std::string& scenario,
                                                 BenchReporter& reporter) {
  ASSIGN_OR_RETURN(PriorityComparison c, RunPriorityComparison(o));
  for (auto [name, result] : {std::pair{"fifo", &c.fifo}, std::pair{"priority", &c.priority}}) {
    for (BenchRecord r : ToBenchRecords(*result, scenario)) {
      r.case_name = absl::StrCat(name, "-", r.case_name);
      reporter.Add(std::move(r));
    }
  }
  reporter.Add({scenario, "short-p95-ttft-ratio", "short_p95_ttft_fifo_over_priority", c.ratio, "x",
                std::nullopt});
  reporter.Add(
      {scenario, "offered-load", "poisson_rate", c.rate_per_second, "req/s", std::nullopt});
  if (c.capacity_per_second > 0) {
    reporter.Add({scenario, "offered-load", "calibrated_capacity", c.capacity_per_second, "req/s",
                  std::nullopt});
  }
  return nlohmann::json{{"fifo", ToJson(c.fifo)},
                        {"priority", ToJson(c.priority)},
                        {"short_p95_ttft_fifo_s", c.short_p95_ttft_fifo_s},
                        {"short_p95_ttft_priority_s", c.short_p95_ttft_priority_s},
                        {"ratio", c.ratio},
                        {"rate_per_second", c.rate_per_second},
                        {"capacity_per_second", c.capacity_per_second},
                        {"max_in_flight_per_worker", o.max_in_flight_per_worker}};
}

PriorityComparisonOptions PriorityOptions(const BenchOptions& options) {
  PriorityComparisonOptions o;
  o.cluster = Cluster(options);
  o.max_in_flight_per_worker = absl::GetFlag(FLAGS_router_max_in_flight);
  o.calibration_users = absl::GetFlag(FLAGS_calibration_users) > 0
                            ? absl::GetFlag(FLAGS_calibration_users)
                            : o.max_in_flight_per_worker;
  if (absl::GetFlag(FLAGS_rate) <= 0 && absl::GetFlag(FLAGS_users) <= 0) {
    o.target_load = absl::GetFlag(FLAGS_target_load);  // Poisson at a calibrated rate
  }
  return o;
}

absl::Status RunServePriority(const BenchOptions& options, BenchReporter& reporter) {
  PriorityComparisonOptions o = PriorityOptions(options);
  ASSIGN_OR_RETURN(
      o.load, SpecFromFlags(options, "short=0.9:32/4@interactive,long=0.1:512/4@batch", 1, 200, 0));
  ASSIGN_OR_RETURN(nlohmann::json json, ComparePriorities(o, "serve-priority", reporter));
  return WriteJson(json);
}

absl::Status RunServeLoadScenario(const BenchOptions& options, BenchReporter& reporter) {
  ServeLoadOptions o;
  o.cluster = Cluster(options);
  ASSIGN_OR_RETURN(o.load, SpecFromFlags(options, "chat=1:128/128", 150, 450, 16));
  if (o.load.mode == ArrivalMode::kPoisson) {
    return absl::InvalidArgumentError(
        "serve-load: its first part is closed-loop (--users), not --rate");
  }
  ASSIGN_OR_RETURN(ServeLoad load, RunServeLoad(o));
  const std::string users = absl::StrCat("users", o.load.users);
  for (BenchRecord r : ToBenchRecords(load.result, "serve-load")) {
    r.case_name = absl::StrCat(users, "-", r.case_name);
    reporter.Add(std::move(r));
  }
  MetricsSample peak;
  nlohmann::json samples = nlohmann::json::array();
  for (const MetricsSample& m : load.samples) {
    peak.waiting = std::max(peak.waiting, m.waiting);
    peak.running = std::max(peak.running, m.running);
    peak.kv_usage_ratio = std::max(peak.kv_usage_ratio, m.kv_usage_ratio);
    samples.push_back({{"t_s", m.t_s},
                       {"waiting", m.waiting},
                       {"running", m.running},
                       {"kv_usage_ratio", m.kv_usage_ratio}});
  }
  const std::string metrics_case = absl::StrCat(users, "-worker-gauges");
  reporter.Add({"serve-load", metrics_case, "peak_requests_waiting", peak.waiting, "requests",
                std::nullopt});
  reporter.Add({"serve-load", metrics_case, "peak_requests_running", peak.running, "requests",
                std::nullopt});
  reporter.Add({"serve-load", metrics_case, "peak_kv_usage_ratio", peak.kv_usage_ratio, "ratio",
                std::nullopt});

  PriorityComparisonOptions p = PriorityOptions(options);
  p.load = o.load;  // target, key, seed and prompt ids; the rest is the comparison's
  ASSIGN_OR_RETURN(p.load.mix, ParseMix(absl::GetFlag(FLAGS_priority_mix)));
  p.load.num_requests = absl::GetFlag(FLAGS_priority_requests);
  p.load.duration = absl::ZeroDuration();
  p.load.warmup_requests = 0;
  p.target_load = absl::GetFlag(FLAGS_target_load);
  ASSIGN_OR_RETURN(nlohmann::json priority, ComparePriorities(p, "serve-load", reporter));
  return WriteJson({{"closed_loop", ToJson(load.result)},
                    {"users", o.load.users},
                    {"worker_gauges", samples},
                    {"priority", priority}});
}

absl::Status RunStabilityScenario(const BenchOptions& options, BenchReporter& reporter) {
  StabilityOptions o;
  o.cluster = Cluster(options);
  ASSIGN_OR_RETURN(o.load, SpecFromFlags(options, "chat=1:128/128", 32, 1000, 32));
  ASSIGN_OR_RETURN(Stability s, RunStability(o));
  const std::string c = absl::StrCat("requests", o.load.num_requests);
  for (BenchRecord r : ToBenchRecords(s.result, "stability")) {
    r.case_name = absl::StrCat(c, "-", r.case_name);
    reporter.Add(std::move(r));
  }
  const double mib = 1 << 20;
  if (s.device_memory_before >= 0 && s.device_memory_after >= 0) {
    reporter.Add({"stability", c, "device_memory_before", s.device_memory_before / mib, "MiB",
                  std::nullopt});
    reporter.Add(
        {"stability", c, "device_memory_after", s.device_memory_after / mib, "MiB", std::nullopt});
    reporter.Add({"stability", c, "device_memory_change",
                  (s.device_memory_after - s.device_memory_before) / mib, "MiB", std::nullopt});
  }
  reporter.Add(
      {"stability", c, "worker_rss_before", s.worker_rss_before / mib, "MiB", std::nullopt});
  reporter.Add({"stability", c, "worker_rss_after", s.worker_rss_after / mib, "MiB", std::nullopt});
  nlohmann::json json = ToJson(s.result);
  json["device_memory_before"] = s.device_memory_before;
  json["device_memory_after"] = s.device_memory_after;
  json["worker_rss_before"] = s.worker_rss_before;
  json["worker_rss_after"] = s.worker_rss_after;
  return WriteJson(json);
}

absl::Status RunRouterOverheadScenario(const BenchOptions& options, BenchReporter& reporter) {
  RouterOverheadOptions o;
  o.cluster = Cluster(options);
  o.pairs = absl::GetFlag(FLAGS_pairs);
  o.prompt_tokens = options.prompt_tokens;
  o.max_tokens = options.new_tokens;
  o.seed = absl::GetFlag(FLAGS_seed);
  ASSIGN_OR_RETURN(RouterOverhead r, RunRouterOverhead(o));
  const std::string c = absl::StrCat("prompt", o.prompt_tokens, "-new", o.max_tokens);
  const std::pair<const char*, double> figures[] = {
      // seconds; `_http`: the HTTP API's
      {"added_ttft_p50", r.added_ttft_p50_s},
      {"added_ttft_p99", r.added_ttft_p99_s},
      {"added_e2e_p50", r.added_e2e_p50_s},
      {"added_e2e_p99", r.added_e2e_p99_s},
      {"paired_ttft_difference_p50", r.paired_ttft_difference.p50},
      {"paired_ttft_difference_p99", r.paired_ttft_difference.p99},
      {"direct_ttft_p50", r.direct_ttft.p50},
      {"router_ttft_p50", r.router_ttft.p50},
      {"direct_e2e_p99", r.direct_e2e.p99},
      {"router_e2e_p99", r.router_e2e.p99},
      {"added_ttft_p50_http", r.added_http_ttft_p50_s},
      {"added_ttft_p99_http", r.added_http_ttft_p99_s},
      {"added_e2e_p50_http", r.added_http_e2e_p50_s},
      {"added_e2e_p99_http", r.added_http_e2e_p99_s},
      {"paired_ttft_difference_p50_http", r.paired_http_ttft_difference.p50},
      {"paired_ttft_difference_p99_http", r.paired_http_ttft_difference.p99},
      {"http_ttft_p50", r.http_ttft.p50},
  };
  for (const auto& [metric, seconds] : figures) {
    reporter.Add({"router-overhead", c, metric, seconds * 1000, "ms", std::nullopt});
  }
  reporter.Add({"router-overhead", c, "pairs", static_cast<double>(r.direct_e2e.count), "pairs",
                std::nullopt});
  reporter.Add({"router-overhead", "admission", "admissions_per_second", r.admissions_per_second,
                "req/s", std::nullopt});
  return absl::OkStatus();
}

const bool kRegistered =
    RegisterScenario({"serve", "gRPC load on --target: request classes, P50/P95/P99", &RunServe}) &&
    RegisterScenario(
        {"serve-priority", "short-request P95 TTFT, FIFO vs priority router", &RunServePriority}) &&
    RegisterScenario({"serve-load",
                      "closed-loop users through a local router (worker gauges sampled), then "
                      "priority vs FIFO",
                      &RunServeLoadScenario}) &&
    RegisterScenario({"stability",
                      "requests through a local router: P99, failures, device memory before/after",
                      &RunStabilityScenario}) &&
    RegisterScenario({"router-overhead",
                      "latency added by the router (gRPC and HTTP APIs) over a direct worker",
                      &RunRouterOverheadScenario});

}  // namespace
}  // namespace onecard::bench::serve
