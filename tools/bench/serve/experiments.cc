// serve-priority, serve-load, stability and router-overhead on a local cluster
// (see experiments.h).
// Tested by tests/integration/router_priority_test.cc and
// router_overhead_test.cc.
#include "tools/bench/serve/experiments.h"

#include <signal.h>

#include <array>
#include <cstdio>
#include <limits>
#include <memory>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "engine/common/status_macros.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "onecard/v1/generation.grpc.pb.h"
#include "services/common/server_main.h"
#include "tests/services/testing/http_get.h"
#include "tools/bench/serve/load_runner.h"
#include "tools/bench/serve/local_cluster.h"

namespace onecard::bench::serve {
namespace {

absl::StatusOr<std::unique_ptr<ChildProcess>> StartWorker(const ClusterOptions& c,
                                                          const std::string& name) {
  std::vector<std::string> args = {"--model",     c.model_path,       "--listen",
                                   "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"};
  args.insert(args.end(), c.worker_args.begin(), c.worker_args.end());
  return ChildProcess::Start(c.worker_bin, args, absl::StrCat(c.log_dir, "/", name, ".log"));
}

absl::StatusOr<std::unique_ptr<ChildProcess>> StartRouter(const ClusterOptions& c,
                                                          const std::string& name,
                                                          const std::string& workers,
                                                          std::vector<std::string> extra) {
  std::vector<std::string> args = {
      "--model",     c.model_path,       "--listen", "127.0.0.1:0",   "--metrics-listen",
      "127.0.0.1:0", "--static-workers", workers,    "--http-listen", "127.0.0.1:0"};
  args.push_back("--allow-unauthenticated=true");  // a local cluster; no effect with tenants
  args.insert(args.end(), c.router_args.begin(), c.router_args.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return ChildProcess::Start(c.router_bin, args, absl::StrCat(c.log_dir, "/", name, ".log"));
}

const ClassStats* FindClass(const LoadResult& r, const std::string& name) {
  for (const ClassStats& c : r.classes) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

struct Timed {
  bool ok = false;
  double ttft_s = 0;
  double e2e_s = 0;
};

// The same request through the router's HTTP API, streamed: TTFT at the
// first event with text (a token), end-to-end at the end of the stream.
Timed TimeOneHttp(httplib::Client& client, const onecard::v1::GenerateRequest& request) {
  const std::vector<int32_t> ids(request.token_ids().ids().begin(),
                                 request.token_ids().ids().end());
  const nlohmann::json body = {{"prompt", ids},
                               {"max_tokens", request.stopping().max_tokens()},
                               {"temperature", 0},
                               {"ignore_eos", true},
                               {"stream", true}};
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = {{"Content-Type", "application/json"}};
  req.body = body.dump();
  Timed t;
  std::string received;
  const absl::Time start = absl::Now();
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    received.append(data, size);
    if (t.ttft_s == 0 && received.find("\"text\":\"") != std::string::npos) {
      t.ttft_s = absl::ToDoubleSeconds(absl::Now() - start);
    }
    return true;
  };
  httplib::Response res;
  httplib::Error error;
  const bool sent = client.send(req, res, error);
  t.e2e_s = absl::ToDoubleSeconds(absl::Now() - start);
  t.ok = sent && res.status == 200 && absl::EndsWith(received, "data: [DONE]\n\n") && t.ttft_s > 0;
  return t;
}

Timed TimeOne(onecard::v1::Generation::Stub* stub, const onecard::v1::GenerateRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Minutes(2)));
  Timed t;
  const absl::Time start = absl::Now();
  auto reader = stub->Generate(&context, request);
  onecard::v1::GenerateResponse chunk;
  bool first = true;
  while (reader->Read(&chunk)) {
    if (first && chunk.token_ids_size() > 0) {
      t.ttft_s = absl::ToDoubleSeconds(absl::Now() - start);
      first = false;
    }
  }
  t.ok = reader->Finish().ok();
  t.e2e_s = absl::ToDoubleSeconds(absl::Now() - start);
  return t;
}

// Where a round's requests go.
struct Targets {
  onecard::v1::Generation::Stub* direct;
  onecard::v1::Generation::Stub* grpc;
  httplib::Client* http;
};

// Round `i`: one request straight to the worker, one through each of the
// router's APIs, each with a prompt of its own; the order rotates with i.
std::array<Timed, 3> TimeRound(const RouterOverheadOptions& o, int32_t i, const Targets& to) {
  onecard::v1::GenerateRequest request;
  request.mutable_stopping()->set_max_tokens(o.max_tokens);
  request.mutable_stopping()->set_ignore_eos(true);
  request.mutable_sampling()->set_temperature(0);
  std::array<Timed, 3> out;  // direct, gRPC, HTTP
  for (int turn = 0; turn < 3; ++turn) {
    const int leg = (turn + i + 3) % 3;  // i >= -2 (the warm-up rounds)
    std::vector<int32_t> ids = SyntheticPrompt(o.seed, 3 * (i + 2) + leg, o.prompt_tokens, 49152);
    request.mutable_token_ids()->mutable_ids()->Assign(ids.begin(), ids.end());
    out[leg] = leg == 2 ? TimeOneHttp(*to.http, request)
                        : TimeOne(leg == 0 ? to.direct : to.grpc, request);
  }
  return out;
}

absl::StatusOr<double> AdmittedTotal(const ChildProcess& router) {
  ASSIGN_OR_RETURN(onecard::testing::HttpResponse r,
                   onecard::testing::HttpGet(router.metrics_address(), "/metrics"));
  double total = 0;
  for (absl::string_view line : absl::StrSplit(r.body, '\n')) {
    if (!absl::ConsumePrefix(&line, "onecard_router_requests_admitted_total{")) continue;
    double v = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) total += v;
  }
  return total;
}

// The worker paused, so that nothing is served: every request is admitted
// and then expires in the router's queue at its `deadline`.
absl::StatusOr<double> MeasureAdmissions(const ChildProcess& router, ChildProcess& worker,
                                         int32_t requests, absl::Duration deadline) {
  LoadSpec spec;
  spec.target = router.grpc_address();
  spec.mix = {RequestClass{"admission", 1, 16, 4}};
  spec.users = 64;
  spec.num_requests = requests;
  spec.request_timeout = deadline;
  spec.progress = false;
  ASSIGN_OR_RETURN(double before, AdmittedTotal(router));
  worker.Signal(SIGSTOP);
  absl::StatusOr<LoadRun> run = RunLoad(spec);
  worker.Signal(SIGCONT);
  if (!run.ok()) return run.status();
  ASSIGN_OR_RETURN(double after, AdmittedTotal(router));
  return (after - before) / absl::ToDoubleSeconds(run->result.wall);
}

std::unique_ptr<onecard::v1::Generation::Stub> Connect(const std::string& target) {
  return onecard::v1::Generation::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
}

// Requests per second one worker completes for `mix`, measured one request
// at a time through `target` (prompts of their own: seed + 1000).
absl::StatusOr<double> Calibrate(const LoadSpec& base, int32_t requests_per_class) {
  double seconds_per_request = 0, total_weight = 0;
  for (const RequestClass& c : base.mix) total_weight += c.weight;
  for (const RequestClass& c : base.mix) {
    LoadSpec one = base;
    one.mix = {c};
    one.mode = ArrivalMode::kClosedLoop;
    one.users = 1;
    one.num_requests = requests_per_class;
    one.duration = absl::ZeroDuration();
    one.warmup_requests = 1;
    one.seed = base.seed + 1000;
    ASSIGN_OR_RETURN(LoadRun run, RunLoad(one));
    if (run.result.total.ok == 0) return absl::UnavailableError("calibration requests failed");
    seconds_per_request += c.weight / total_weight * run.result.total.e2e.mean;
  }
  return 1.0 / seconds_per_request;
}

// Requests per second one worker completes for `mix` with `users` closed-loop
// users (requests_per_user each; prompts of their own: seed + 1000).
absl::StatusOr<double> CalibrateConcurrent(const LoadSpec& base, int32_t users,
                                           int32_t requests_per_user) {
  LoadSpec spec = base;
  spec.mode = ArrivalMode::kClosedLoop;
  spec.users = users;
  spec.num_requests = static_cast<int64_t>(users) * requests_per_user;
  spec.duration = absl::ZeroDuration();
  spec.warmup_requests = users;
  spec.seed = base.seed + 1000;
  ASSIGN_OR_RETURN(LoadRun run, RunLoad(spec));
  if (run.result.total.ok == 0) return absl::UnavailableError("calibration requests failed");
  return run.result.requests_per_second;
}

// The value of an unlabelled gauge in a Prometheus text page; 0 when absent.
double Gauge(absl::string_view page, absl::string_view name) {
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (!absl::ConsumePrefix(&line, name) || !absl::ConsumePrefix(&line, " ")) continue;
    double v = 0;
    if (absl::SimpleAtod(line, &v)) return v;
  }
  return 0;
}

// GPU 0's used memory from nvidia-smi, bytes; -1 when it gives none.
int64_t DeviceMemoryUsed() {
  FILE* pipe = ::popen(
      "nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null", "r");
  if (pipe == nullptr) return -1;
  char line[64] = {};
  const bool read = std::fgets(line, sizeof(line), pipe) != nullptr;
  ::pclose(pipe);
  int64_t mib = 0;
  if (!read || !absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &mib)) return -1;
  return mib << 20;
}

}  // namespace

ClusterOptions WithDefaultBinaries(ClusterOptions options) {
  if (options.worker_bin.empty()) options.worker_bin = FindBinary("services/worker/onecard-worker");
  if (options.router_bin.empty()) options.router_bin = FindBinary("router/onecard-router");
  return options;
}

absl::StatusOr<PriorityComparison> RunPriorityComparison(const PriorityComparisonOptions& o) {
  const ClusterOptions c = WithDefaultBinaries(o.cluster);
  const std::string in_flight = absl::StrCat(o.max_in_flight_per_worker);
  PriorityComparison out;
  for (bool fifo : {true, false}) {
    // A fresh worker per policy: no prefix cache carried from one run to the other.
    const std::string name = fifo ? "serve-priority-fifo" : "serve-priority";
    ClusterOptions arm = c;
    if (fifo) arm.worker_args.insert(arm.worker_args.end(), {"--fifo", "true"});
    ASSIGN_OR_RETURN(auto worker, StartWorker(arm, name + "-worker"));
    ASSIGN_OR_RETURN(auto router,
                     StartRouter(c, name + "-router", worker->grpc_address(),
                                 {"--fifo", fifo ? "true" : "false", "--max-in-flight-per-worker",
                                  in_flight, "--queue-max-depth", "100000", "--queue-timeout", "1h",
                                  "--aging-step", absl::FormatDuration(o.aging_step)}));
    LoadSpec load = o.load;
    load.target = router->grpc_address();
    if (fifo && o.target_load > 0) {
      ASSIGN_OR_RETURN(out.capacity_per_second,
                       o.calibration_users > 1
                           ? CalibrateConcurrent(load, o.calibration_users, o.calibration_requests)
                           : Calibrate(load, o.calibration_requests));
      out.rate_per_second = o.target_load * out.capacity_per_second;
    }
    if (out.rate_per_second > 0) {
      load.mode = ArrivalMode::kPoisson;
      load.rate_per_second = out.rate_per_second;
    }
    if (fifo && out.rate_per_second == 0 && load.mode == ArrivalMode::kPoisson) {
      out.rate_per_second = load.rate_per_second;
    }
    ASSIGN_OR_RETURN(LoadRun run, RunLoad(load));
    (fifo ? out.fifo : out.priority) = std::move(run.result);
    router->Terminate(absl::Seconds(30));
    worker->Terminate(absl::Seconds(30));
  }
  const ClassStats* fifo_short = FindClass(out.fifo, o.short_class);
  const ClassStats* prio_short = FindClass(out.priority, o.short_class);
  if (fifo_short == nullptr || prio_short == nullptr || fifo_short->ttft.count == 0 ||
      prio_short->ttft.count == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no completed '", o.short_class, "' requests to compare"));
  }
  out.short_p95_ttft_fifo_s = fifo_short->ttft.p95;
  out.short_p95_ttft_priority_s = prio_short->ttft.p95;
  out.ratio = out.short_p95_ttft_fifo_s / out.short_p95_ttft_priority_s;
  return out;
}

// A worker behind a router whose queue holds every request of a run; the
// load's target set to the router.
struct RoutedWorker {
  std::unique_ptr<ChildProcess> worker, router;
  LoadSpec load;
};

absl::StatusOr<RoutedWorker> StartRoutedWorker(const ClusterOptions& options,
                                               const std::string& name, const LoadSpec& load) {
  const ClusterOptions c = WithDefaultBinaries(options);
  RoutedWorker out;
  ASSIGN_OR_RETURN(out.worker, StartWorker(c, name + "-worker"));
  ASSIGN_OR_RETURN(out.router, StartRouter(c, name + "-router", out.worker->grpc_address(),
                                           {"--queue-max-depth", "100000"}));
  out.load = load;
  out.load.target = out.router->grpc_address();
  return out;
}

absl::StatusOr<ServeLoad> RunServeLoad(const ServeLoadOptions& o) {
  ASSIGN_OR_RETURN(RoutedWorker cluster, StartRoutedWorker(o.cluster, "serve-load", o.load));
  ChildProcess* worker = cluster.worker.get();
  ServeLoad out;  // samples: the poller's alone until it is joined
  absl::Notification done;
  const absl::Time start = absl::Now();
  std::thread poller([&] {
    while (!done.WaitForNotificationWithTimeout(o.metrics_interval)) {
      absl::StatusOr<onecard::testing::HttpResponse> page =
          onecard::testing::HttpGet(worker->metrics_address(), "/metrics");
      if (!page.ok()) continue;
      out.samples.push_back({absl::ToDoubleSeconds(absl::Now() - start),
                             Gauge(page->body, "onecard_worker_requests_waiting"),
                             Gauge(page->body, "onecard_worker_requests_running"),
                             Gauge(page->body, "onecard_worker_kv_cache_usage_ratio")});
    }
  });
  absl::StatusOr<LoadRun> run = RunLoad(cluster.load);
  done.Notify();
  poller.join();
  cluster.router->Terminate(absl::Seconds(30));
  worker->Terminate(absl::Seconds(30));
  if (!run.ok()) return run.status();
  out.result = std::move(run->result);
  return out;
}

absl::StatusOr<Stability> RunStability(const StabilityOptions& o) {
  ASSIGN_OR_RETURN(RoutedWorker cluster, StartRoutedWorker(o.cluster, "stability", o.load));
  LoadSpec& load = cluster.load;
  ChildProcess* worker = cluster.worker.get();
  Stability out;
  if (load.warmup_requests > 0) {
    LoadSpec warmup = load;
    warmup.num_requests = load.warmup_requests;
    warmup.duration = absl::ZeroDuration();
    warmup.warmup_requests = 0;
    warmup.seed = load.seed + 2000;
    RETURN_IF_ERROR(RunLoad(warmup).status());
    load.warmup_requests = 0;
  }
  absl::SleepFor(absl::Seconds(1));  // the warm-up's last stream closed
  out.device_memory_before = DeviceMemoryUsed();
  out.worker_rss_before = worker->RssBytes();
  ASSIGN_OR_RETURN(LoadRun run, RunLoad(load));
  absl::SleepFor(absl::Seconds(1));
  out.device_memory_after = DeviceMemoryUsed();
  out.worker_rss_after = worker->RssBytes();
  out.result = std::move(run.result);
  cluster.router->Terminate(absl::Seconds(30));
  worker->Terminate(absl::Seconds(30));
  return out;
}

absl::StatusOr<RouterOverhead> RunRouterOverhead(const RouterOverheadOptions& o) {
  const ClusterOptions c = WithDefaultBinaries(o.cluster);
  ASSIGN_OR_RETURN(auto worker, StartWorker(c, "router-overhead-worker"));
  ASSIGN_OR_RETURN(auto router,
                   StartRouter(c, "router-overhead-router", worker->grpc_address(), {}));
  auto direct = Connect(worker->grpc_address());
  auto routed = Connect(router->grpc_address());
  ASSIGN_OR_RETURN(services::HostPort http_address,
                   services::ParseHostPort(router->http_address()));
  httplib::Client http(http_address.host, http_address.port);
  http.set_keep_alive(true);                     // as the gRPC legs keep their channels
  std::array<std::vector<double>, 3> ttft, e2e;  // direct, gRPC, HTTP
  std::vector<double> paired, paired_http;
  RouterOverhead out;
  for (int32_t i = -2; i < o.pairs; ++i) {  // two warm-up rounds
    const std::array<Timed, 3> t = TimeRound(o, i, {direct.get(), routed.get(), &http});
    if (i < 0) continue;
    if (!t[0].ok || !t[1].ok || !t[2].ok) {
      ++out.failed;
      continue;
    }
    for (int leg = 0; leg < 3; ++leg) {
      ttft[leg].push_back(t[leg].ttft_s);
      e2e[leg].push_back(t[leg].e2e_s);
    }
    paired.push_back(t[1].ttft_s - t[0].ttft_s);
    paired_http.push_back(t[2].ttft_s - t[0].ttft_s);
  }
  out.paired_ttft_difference = Summarize(paired);
  out.paired_http_ttft_difference = Summarize(paired_http);
  out.direct_ttft = Summarize(ttft[0]);
  out.router_ttft = Summarize(ttft[1]);
  out.http_ttft = Summarize(ttft[2]);
  out.direct_e2e = Summarize(e2e[0]);
  out.router_e2e = Summarize(e2e[1]);
  out.http_e2e = Summarize(e2e[2]);
  out.added_ttft_p50_s = out.router_ttft.p50 - out.direct_ttft.p50;
  out.added_ttft_p99_s = out.router_ttft.p99 - out.direct_ttft.p99;
  out.added_e2e_p50_s = out.router_e2e.p50 - out.direct_e2e.p50;
  out.added_e2e_p99_s = out.router_e2e.p99 - out.direct_e2e.p99;
  out.added_http_ttft_p50_s = out.http_ttft.p50 - out.direct_ttft.p50;
  out.added_http_ttft_p99_s = out.http_ttft.p99 - out.direct_ttft.p99;
  out.added_http_e2e_p50_s = out.http_e2e.p50 - out.direct_e2e.p50;
  out.added_http_e2e_p99_s = out.http_e2e.p99 - out.direct_e2e.p99;
  if (o.admission_requests > 0) {
    ASSIGN_OR_RETURN(
        out.admissions_per_second,
        MeasureAdmissions(*router, *worker, o.admission_requests, o.admission_deadline));
  }
  router->Terminate(absl::Seconds(30));
  worker->Terminate(absl::Seconds(30));
  return out;
}

}  // namespace onecard::bench::serve
