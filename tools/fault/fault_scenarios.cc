// The fault scenarios (see fault_scenarios.h).
#include "tools/fault/fault_scenarios.h"

#include <signal.h>

#include <algorithm>
#include <functional>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "tools/bench/serve/load_runner.h"

namespace onecard::fault {
namespace {

using Prompts = std::vector<std::vector<int32_t>>;

constexpr int kPrompts = 6;
constexpr int kPromptTokens = 12;
constexpr int32_t kMaxTokens = 24;  // of the references and the ordinary load
constexpr absl::Duration kFaultWait = absl::Seconds(120);
constexpr absl::Duration kIdleWait = absl::Seconds(60);

struct Context {
  FaultCluster& cluster;
  const ScenarioOptions& options;
  Prompts prompts;
  Prompts references;
};

Prompts MakePrompts() {
  Prompts p;
  for (int i = 0; i < kPrompts; ++i) {
    p.push_back(bench::serve::SyntheticPrompt(22, i, kPromptTokens, 49152));
  }
  return p;
}

// A wait or deadline of a normal build, times the cluster's time_scale.
absl::Duration Scaled(const Context& c, absl::Duration d) { return c.cluster.options().Scaled(d); }

FaultLoadSpec Load(const Context& c, int64_t requests, int32_t concurrency) {
  FaultLoadSpec s;
  s.deadline = Scaled(c, s.deadline);
  s.lost_after = Scaled(c, s.lost_after);
  s.target = c.cluster.router().grpc_address();
  s.api_key = kFaultApiKey;
  s.prompts = c.prompts;
  s.max_tokens = kMaxTokens;
  s.num_requests = requests;
  s.concurrency = concurrency;
  return s;
}

// The greedy answer to each prompt, one request at a time through the router.
absl::StatusOr<Prompts> References(const Context& c) {
  FaultLoadSpec s = Load(c, kPrompts, 1);
  absl::StatusOr<std::vector<StreamRecord>> records = RunFaultLoad(s);
  if (!records.ok()) return records.status();
  Prompts out;
  for (const StreamRecord& r : *records) {
    if (r.code != 0 || r.tokens.size() != kMaxTokens) {
      return absl::UnavailableError(absl::StrCat("reference ", r.index, ": code ", r.code, " ",
                                                 r.message, ", ", r.tokens.size(), " tokens"));
    }
    out.push_back(r.tokens);
  }
  return out;
}

double Counter(const std::string& address, const std::string& name) {
  absl::StatusOr<testing::PromText> t = ScrapeMetrics(address);
  return t.ok() ? t->Sum(name) : 0;
}

// Waits until worker `i` has generated `tokens` more tokens than `base`.
absl::Status AwaitStreaming(FaultCluster& cluster, int i, double base, int tokens) {
  if (AwaitMetrics(
          cluster.worker(i).metrics_address(),
          [&](const testing::PromText& t) {
            return t.Sum("onecard_worker_generation_tokens_total") >= base + tokens;
          },
          cluster.options().Scaled(kFaultWait))) {
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(absl::StrCat("worker-", i, " never streamed"));
}

absl::Status AwaitHealthy(FaultCluster& cluster, int workers) {
  if (AwaitMetrics(
          cluster.router().metrics_address(),
          [workers](const testing::PromText& t) {
            return t.Value("onecard_router_workers", {{"state", "healthy"}}) == workers;
          },
          cluster.options().Scaled(kFaultWait))) {
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(absl::StrCat("the router never had ", workers, " healthy"));
}

// Runs `spec` on a thread while `fault` runs here; the fault's status wins.
absl::Status WithLoad(const FaultLoadSpec& spec, const std::function<absl::Status()>& fault,
                      StreamAccount* account, const Prompts& references) {
  absl::StatusOr<std::vector<StreamRecord>> records;
  std::thread load([&] { records = RunFaultLoad(spec); });
  const absl::Status fault_status = fault();
  load.join();
  if (!records.ok()) return records.status();
  *account = CheckStreams(*records, references, spec.max_tokens);
  return fault_status;
}

absl::Status WorkerSigkill(Context& c, ScenarioResult* r) {
  r->allowed_codes = {"UNAVAILABLE"};  // streams that had tokens on the dead worker
  const double base =
      Counter(c.cluster.worker(1).metrics_address(), "onecard_worker_generation_tokens_total");
  return WithLoad(
      Load(c, 48, 12),
      [&] {
        if (absl::Status s = AwaitStreaming(c.cluster, 1, base, 8); !s.ok()) return s;
        c.cluster.KillWorker(1);
        return absl::OkStatus();
      },
      &r->account, c.references);
}

absl::Status WorkerSigstop(Context& c, ScenarioResult* r) {
  r->allowed_codes = {"DEADLINE_EXCEEDED", "UNAVAILABLE"};
  FaultLoadSpec spec = Load(c, 40, 8);
  spec.deadline = Scaled(c, absl::Seconds(20));
  ChildProcess& hung = c.cluster.worker(1);
  const double base = Counter(hung.metrics_address(), "onecard_worker_generation_tokens_total");
  absl::Status s = WithLoad(
      spec,
      [&] {
        if (absl::Status s = AwaitStreaming(c.cluster, 1, base, 4); !s.ok()) return s;
        hung.Signal(SIGSTOP);
        const absl::Time stopped = absl::Now();
        if (absl::Status s = AwaitHealthy(c.cluster, 1); !s.ok()) return s;
        absl::StrAppendFormat(&r->note, "ejected %.1fs after SIGSTOP; ",
                              absl::ToDoubleSeconds(absl::Now() - stopped));
        return absl::OkStatus();
      },
      &r->account, c.references);
  hung.Signal(SIGCONT);
  if (!s.ok()) return s;
  const absl::Time resumed = absl::Now();
  if (absl::Status h = AwaitHealthy(c.cluster, 2); !h.ok()) return h;
  absl::StrAppendFormat(&r->note, "back %.1fs after SIGCONT",
                        absl::ToDoubleSeconds(absl::Now() - resumed));
  return absl::OkStatus();
}

absl::Status MetricsRestart(Context& c, ScenarioResult* r) {
  const double base =
      Counter(c.cluster.worker(0).metrics_address(), "onecard_worker_generation_tokens_total");
  absl::Status s = WithLoad(
      Load(c, 48, 12),
      [&] {
        if (absl::Status s = AwaitStreaming(c.cluster, 0, base, 8); !s.ok()) return s;
        return c.cluster.RestartMetrics();
      },
      &r->account, c.references);
  if (!s.ok()) return s;
  return AwaitHealthy(c.cluster, 2);  // the table rebuilt from the new service
}

absl::Status RouterRestart(Context& c, ScenarioResult* r) {
  r->allowed_codes = {"UNAVAILABLE"};  // streams open at the killed router
  FaultLoadSpec spec = Load(c, 48, 12);
  spec.wait_for_ready = true;  // new requests wait for the router to be back
  const double base =
      Counter(c.cluster.worker(0).metrics_address(), "onecard_worker_generation_tokens_total");
  return WithLoad(
      spec,
      [&] {
        if (absl::Status s = AwaitStreaming(c.cluster, 0, base, 8); !s.ok()) return s;
        const absl::Time killed = absl::Now();
        if (absl::Status s = c.cluster.RestartRouter(); !s.ok()) return s;
        absl::StrAppendFormat(&r->note, "router back in %.1fs",
                              absl::ToDoubleSeconds(absl::Now() - killed));
        return absl::OkStatus();
      },
      &r->account, c.references);
}

absl::Status Disconnect(Context& c, ScenarioResult* r) {
  r->allowed_codes = {"CANCELLED"};  // every client hangs up after its first token
  const int n = c.options.disconnect_clients;
  FaultLoadSpec spec = Load(c, n, n);
  spec.max_tokens = 64;
  spec.cancel_after_tokens = 1;
  spec.deadline = Scaled(c, absl::Minutes(10));
  absl::StatusOr<std::vector<StreamRecord>> records = RunFaultLoad(spec);
  if (!records.ok()) return records.status();
  r->account = CheckStreams(*records, c.references, spec.max_tokens);
  r->note = absl::StrCat(n, " clients at once");
  return absl::OkStatus();
}

int64_t MaxRss(FaultCluster& c, bool workers) {
  int64_t rss = 0;
  if (!workers) return c.router().RssBytes();
  for (int i = 0; i < c.num_workers(); ++i) rss = std::max(rss, c.worker(i).RssBytes());
  return rss;
}

absl::Status SlowReaders(Context& c, ScenarioResult* r) {
  r->allowed_codes = {"CANCELLED"};  // the slow readers give up
  FaultLoadSpec slow = Load(c, c.options.slow_readers, c.options.slow_readers);
  slow.max_tokens = 128;
  slow.slow_reader_for = Scaled(c, absl::Seconds(20));
  slow.deadline = Scaled(c, absl::Minutes(2));
  FaultLoadSpec normal = Load(c, 24, 4);
  normal.deadline = Scaled(c, absl::Minutes(2));
  const int64_t router_before = MaxRss(c.cluster, false), worker_before = MaxRss(c.cluster, true);
  int64_t router_peak = router_before, worker_peak = worker_before;
  absl::StatusOr<std::vector<StreamRecord>> slow_records, normal_records;
  std::thread slow_thread([&] { slow_records = RunFaultLoad(slow); });
  std::thread normal_thread([&] { normal_records = RunFaultLoad(normal); });
  const absl::Time end = absl::Now() + slow.slow_reader_for;
  while (absl::Now() < end) {  // sampling memory while the readers stall
    router_peak = std::max(router_peak, MaxRss(c.cluster, false));
    worker_peak = std::max(worker_peak, MaxRss(c.cluster, true));
    absl::SleepFor(absl::Milliseconds(250));
  }
  slow_thread.join();
  normal_thread.join();
  if (!slow_records.ok()) return slow_records.status();
  if (!normal_records.ok()) return normal_records.status();
  const StreamAccount normal_account = CheckStreams(*normal_records, c.references, kMaxTokens);
  // One account over both groups; the normal group must also complete.
  r->account = CheckStreams(*slow_records, c.references, slow.max_tokens);
  r->account.sent += normal_account.sent;
  r->account.completed += normal_account.completed;
  r->account.lost += normal_account.lost;
  r->account.bad_streams += normal_account.bad_streams;
  for (const auto& [code, count] : normal_account.failed) r->account.failed[code] += count;
  const int64_t router_growth = (router_peak - router_before) >> 20;
  const int64_t worker_growth = (worker_peak - worker_before) >> 20;
  r->note = absl::StrCat(c.options.slow_readers, " never-reading + 24 normal clients; RSS growth ",
                         "router ", router_growth, " MiB, worker ", worker_growth, " MiB");
  if (normal_account.completed != normal_account.sent) {
    return absl::FailedPreconditionError("normal clients failed beside the slow readers");
  }
  if (router_growth > 256 || worker_growth > 256) {
    return absl::FailedPreconditionError("memory grew past 256 MiB under slow readers");
  }
  return absl::OkStatus();
}

absl::Status DrainSigterm(Context& c, ScenarioResult* r) {
  const double base =
      Counter(c.cluster.worker(1).metrics_address(), "onecard_worker_generation_tokens_total");
  int exit_code = -1;
  absl::Status s = WithLoad(
      Load(c, 48, 12),
      [&] {
        if (absl::Status s = AwaitStreaming(c.cluster, 1, base, 8); !s.ok()) return s;
        const absl::Time signalled = absl::Now();
        exit_code = c.cluster.TerminateWorker(1, Scaled(c, absl::Seconds(90)));
        absl::StrAppendFormat(&r->note, "drained and exited %d in %.1fs", exit_code,
                              absl::ToDoubleSeconds(absl::Now() - signalled));
        return absl::OkStatus();
      },
      &r->account, c.references);
  if (!s.ok()) return s;
  if (exit_code != 0) return absl::FailedPreconditionError("the draining worker did not exit 0");
  return absl::OkStatus();
}

using ScenarioFn = absl::Status (*)(Context&, ScenarioResult*);

const std::map<std::string, ScenarioFn>& Scenarios() {
  static const auto* scenarios = new std::map<std::string, ScenarioFn>{
      {"worker-sigkill", WorkerSigkill},   {"worker-sigstop", WorkerSigstop},
      {"metrics-restart", MetricsRestart}, {"router-restart", RouterRestart},
      {"disconnect", Disconnect},          {"slow-readers", SlowReaders},
      {"drain-sigterm", DrainSigterm}};
  return *scenarios;
}

}  // namespace

std::vector<std::string> ScenarioNames() {
  return {"worker-sigkill", "worker-sigstop", "metrics-restart", "router-restart",
          "disconnect",     "slow-readers",   "drain-sigterm"};
}

ScenarioResult RunScenario(const std::string& name, const ScenarioOptions& options) {
  ScenarioResult r;
  r.name = name;
  const absl::Time start = absl::Now();
  auto fn = Scenarios().find(name);
  if (fn == Scenarios().end()) {
    r.setup = absl::InvalidArgumentError("no scenario " + name);
    return r;
  }
  FaultClusterOptions cluster_options = options.cluster;
  cluster_options.work_dir = absl::StrCat(options.cluster.work_dir, "/", name);
  if (name == "disconnect") cluster_options.max_num_seqs = 32;
  if (name == "drain-sigterm") cluster_options.worker_grace = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<FaultCluster>> cluster = FaultCluster::Start(cluster_options);
  if (!cluster.ok()) {
    r.setup = cluster.status();
    return r;
  }
  Context c{**cluster, options, MakePrompts(), {}};
  absl::StatusOr<Prompts> references = References(c);
  if (!references.ok()) {
    r.setup = references.status();
    return r;
  }
  c.references = *std::move(references);
  r.setup = fn->second(c, &r);
  r.idle = (*cluster)->AwaitIdle(cluster_options.Scaled(kIdleWait));
  r.wall = absl::Now() - start;
  return r;
}

bool ScenarioResult::passed() const { return Why().empty(); }

std::string ScenarioResult::Why() const {
  std::string why;
  if (!setup.ok()) absl::StrAppend(&why, setup.ToString(), "; ");
  if (!idle.ok()) absl::StrAppend(&why, idle.ToString(), "; ");
  int64_t failed = 0;
  for (const auto& [code, count] : account.failed) {
    failed += count;
    if (!allowed_codes.contains(code)) absl::StrAppend(&why, count, " failed with ", code, "; ");
  }
  if (account.completed + failed + account.lost != account.sent) {
    absl::StrAppend(&why, "sent != completed + failed + lost; ");
  }
  if (account.lost != 0) absl::StrAppend(&why, account.lost, " lost; ");
  if (account.bad_streams != 0) absl::StrAppend(&why, account.bad_streams, " bad streams; ");
  for (const std::string& p : account.problems) absl::StrAppend(&why, p, "; ");
  return why;
}

std::string ResultsTable(const std::vector<ScenarioResult>& results) {
  std::string out =
      "| scenario | sent | completed | failed by code | lost | bad streams | gauges at zero | "
      "notes | result |\n|---|---:|---:|---|---:|---:|---|---|---|\n";
  for (const ScenarioResult& r : results) {
    absl::StrAppendFormat(&out, "| %s | %d | %d | %s | %d | %d | %s | %s (%.0fs) | %s |\n", r.name,
                          r.account.sent, r.account.completed, FailedText(r.account.failed),
                          r.account.lost, r.account.bad_streams, r.idle.ok() ? "yes" : "**no**",
                          r.note, absl::ToDoubleSeconds(r.wall),
                          r.passed() ? "pass" : "**FAIL**: " + r.Why());
  }
  return out;
}

}  // namespace onecard::fault
