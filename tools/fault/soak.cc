// Soak (see soak.h).
#include "tools/fault/soak.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "tools/bench/serve/load_runner.h"
#include "tools/fault/fault_load.h"

namespace onecard::fault {
namespace {

int64_t StatusField(int pid, absl::string_view field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view l = line;
    if (!absl::ConsumePrefix(&l, field)) continue;
    l = absl::StripAsciiWhitespace(l);
    absl::ConsumeSuffix(&l, " kB");
    int64_t v = 0;
    return absl::SimpleAtoi(l, &v) ? v : -1;
  }
  return -1;
}

struct Sample {
  int64_t rss, fds, threads;
};

// Clients that hang up after their second token, in rounds until `until`.
void CancellingClients(const std::string& target, int32_t users, absl::Time until, int64_t* sent,
                       int64_t* cancelled, int64_t* other) {
  FaultLoadSpec spec;
  spec.target = target;
  spec.api_key = kFaultApiKey;
  for (int i = 0; i < 4; ++i) {
    spec.prompts.push_back(bench::serve::SyntheticPrompt(99, i, 24, 49152));
  }
  spec.max_tokens = 64;
  spec.cancel_after_tokens = 2;
  spec.concurrency = users;
  spec.num_requests = 4 * users;
  spec.deadline = absl::Minutes(2);
  while (absl::Now() < until) {
    absl::StatusOr<std::vector<StreamRecord>> records = RunFaultLoad(spec);
    if (!records.ok()) return;
    for (const StreamRecord& r : *records) {
      ++*sent;
      if (r.code == 1) {  // CANCELLED, by the client itself
        ++*cancelled;
      } else if (r.code != 0) {
        ++*other;
      }
    }
  }
}

}  // namespace

int64_t OpenFds(int pid) {
  std::error_code ec;
  int64_t n = 0;
  for (auto it = std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/fd"), ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return ec ? -1 : n;
}

int64_t Threads(int pid) { return StatusField(pid, "Threads:"); }

absl::StatusOr<SoakReport> RunSoak(const SoakOptions& options) {
  absl::StatusOr<std::unique_ptr<FaultCluster>> cluster = FaultCluster::Start(options.cluster);
  if (!cluster.ok()) return cluster.status();
  FaultCluster& c = **cluster;
  const absl::Time start = absl::Now();
  const absl::Time end = start + options.duration;

  bench::serve::LoadSpec spec;
  spec.target = c.router().grpc_address();
  spec.api_key = kFaultApiKey;
  spec.mix = *bench::serve::ParseMix("short=0.6:32/16,long=0.3:200/64,chat=0.1:48/16x3");
  spec.users = options.users;
  spec.num_requests = 0;
  spec.duration = options.duration;
  spec.request_timeout = absl::Minutes(5);
  spec.progress = false;
  absl::StatusOr<bench::serve::LoadRun> run;
  std::thread load([&] { run = bench::serve::RunLoad(spec); });
  int64_t c_sent = 0, c_cancelled = 0, c_other = 0;
  std::thread cancelling([&] {
    CancellingClients(spec.target, options.cancelling_users, end, &c_sent, &c_cancelled, &c_other);
  });

  std::vector<std::pair<std::string, ChildProcess*>> processes = {{"metrics", &c.metrics()},
                                                                  {"router", &c.router()}};
  for (int i = 0; i < c.num_workers(); ++i) {
    processes.push_back({absl::StrCat("worker-", i), &c.worker(i)});
  }
  std::map<std::string, std::vector<Sample>> samples;
  std::ofstream csv;
  if (!options.samples_csv.empty()) {
    csv.open(options.samples_csv);
    csv << "seconds,process,rss_bytes,fds,threads\n";
  }
  for (absl::Time next = start; next <= end; next += options.sample_every) {
    absl::SleepFor(next - absl::Now());  // the sampling period itself
    const double t = absl::ToDoubleSeconds(absl::Now() - start);
    for (auto& [name, p] : processes) {
      Sample s{p->RssBytes(), OpenFds(p->pid()), Threads(p->pid())};
      if (absl::Now() - start >= options.warmup) samples[name].push_back(s);
      if (csv.is_open()) {
        csv << absl::StrFormat("%.1f,%s,%d,%d,%d\n", t, name, s.rss, s.fds, s.threads);
      }
    }
    if (csv.is_open()) csv.flush();
  }
  load.join();
  cancelling.join();
  if (!run.ok()) return run.status();

  SoakReport report;
  report.ran = absl::Now() - start;
  report.sent = run->result.total.sent + c_sent;
  report.ok = run->result.total.ok;
  report.cancelled_by_clients = c_cancelled;
  for (const auto& [code, n] : run->result.total.errors) report.other_failures += n;
  report.other_failures += c_other;
  for (auto& [name, p] : processes) {
    const std::vector<Sample>& v = samples[name];
    if (v.empty()) continue;
    ProcessDrift d{name, v.front().rss,     v.back().rss,     0, v.front().fds, v.back().fds,
                   0,    v.front().threads, v.back().threads, 0};
    for (const Sample& s : v) {
      d.rss_max = std::max(d.rss_max, s.rss);
      d.fds_max = std::max(d.fds_max, s.fds);
      d.threads_max = std::max(d.threads_max, s.threads);
    }
    report.processes.push_back(d);
  }
  if (absl::Status idle = c.AwaitIdle(absl::Seconds(60)); !idle.ok()) return idle;
  return report;
}

std::string SoakReport::Table() const {
  std::string out = absl::StrFormat(
      "%.0f s: %d requests, %d completed, %d cancelled by their clients, %d other failures\n\n"
      "| process | RSS first → last (max), MiB | RSS drift | fds first → last (max) | "
      "threads first → last (max) |\n|---|---|---:|---|---|\n",
      absl::ToDoubleSeconds(ran), sent, ok, cancelled_by_clients, other_failures);
  for (const ProcessDrift& d : processes) {
    absl::StrAppendFormat(
        &out, "| %s | %.1f → %.1f (%.1f) | %+.1f MiB | %d → %d (%d) | %d → %d (%d) |\n", d.name,
        d.rss_first / 1048576.0, d.rss_last / 1048576.0, d.rss_max / 1048576.0,
        (d.rss_last - d.rss_first) / 1048576.0, d.fds_first, d.fds_last, d.fds_max, d.threads_first,
        d.threads_last, d.threads_max);
  }
  return out;
}

}  // namespace onecard::fault
