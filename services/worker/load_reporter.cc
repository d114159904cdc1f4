// Registration and load-report streaming to the control plane. See
// load_reporter.h.
#include "services/worker/load_reporter.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/random/random.h"
#include "absl/time/clock.h"
#include "engine/common/log.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "services/common/config_bounds.h"
#include "services/common/proto_time.h"
#include "services/common/request_convert.h"
#include "services/common/status.h"

namespace onecard::services {
namespace {

// Every class, zeros included, so the classes always sum to `waiting`.
void AddWaitingByPriority(const engine::EngineStats& stats, v1::WorkerLoadReport* report) {
  std::array<int64_t, 4> depth = {};  // by v1::Priority
  for (const auto& [priority, count] : stats.num_waiting_by_priority) {
    depth[ProtoPriority(priority)] += count;
  }
  for (v1::Priority p : {v1::PRIORITY_INTERACTIVE, v1::PRIORITY_STANDARD, v1::PRIORITY_BATCH}) {
    v1::PriorityQueueDepth* part = report->add_waiting_by_priority();
    part->set_priority(p);
    part->set_depth(depth[p]);
  }
}

std::shared_ptr<grpc::Channel> MakeChannel(const LoadReporterOptions& o) {
  grpc::ChannelArguments args;
  // gRPC's own reconnect backoff (up to 120 s by default) would hide a
  // control plane that came back; keep it within ours.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(o.initial_backoff)));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(o.initial_backoff)));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(o.max_backoff)));
  return grpc::CreateCustomChannel(
      o.control_plane_address,
      o.auth != nullptr ? o.auth->ChannelCredentials() : grpc::InsecureChannelCredentials(), args);
}

}  // namespace

LoadReporter::LoadReporter(LoadReporterOptions options, std::function<WorkerSnapshot()> snapshot)
    : options_(std::move(options)),
      snapshot_(std::move(snapshot)),
      stub_(v1::ControlPlane::NewStub(MakeChannel(options_))) {}

LoadReporter::~LoadReporter() { Stop(); }

void LoadReporter::Start() {
  {
    absl::MutexLock lock(&mu_);
    started_ = true;
  }
  thread_ = std::thread([this] { Run(); });
}

void LoadReporter::Notify() {
  absl::MutexLock lock(&mu_);
  notified_ = true;
}

void LoadReporter::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (!started_) return;
    // The last report and the stream's close get a short while; a control
    // plane that does not answer is cut off.
    if (!mu_.AwaitWithTimeout(absl::Condition(&finished_), options_.rpc_timeout) &&
        stream_context_ != nullptr) {
      stream_context_->TryCancel();
    }
  }
  if (thread_.joinable()) thread_.join();
}

int64_t LoadReporter::reports_sent() const {
  absl::MutexLock lock(&mu_);
  return reports_sent_;
}

int64_t LoadReporter::sessions_started() const {
  absl::MutexLock lock(&mu_);
  return sessions_;
}

void LoadReporter::Run() {
  absl::BitGen gen;
  absl::Duration backoff = options_.initial_backoff;
  while (true) {
    bool registered = false;
    const absl::Status status = Session(&registered);
    if (registered) backoff = options_.initial_backoff;
    if (Stopping()) break;
    const absl::Duration wait = backoff * absl::Uniform(gen, 0.8, 1.2);
    Log(LogLevel::kWarn, "worker", "control plane %s: %s; retrying in %s",
        options_.control_plane_address, status.ToString(), absl::FormatDuration(wait));
    if (WaitForStop(wait)) break;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
  absl::MutexLock lock(&mu_);
  finished_ = true;
}

bool LoadReporter::Stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

bool LoadReporter::WaitForStop(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&stopping_), timeout);
}

absl::Status LoadReporter::Register(absl::Duration* interval) {
  v1::RegisterWorkerRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_address(options_.address);
  request.set_metrics_address(options_.metrics_address);
  *request.mutable_info() = options_.info;
  v1::RegisterWorkerResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  if (options_.auth != nullptr) options_.auth->Attach(ServiceRole::kWorker, &context);
  const grpc::Status status = stub_->RegisterWorker(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  const absl::Duration asked = FromProtoDuration(response.report_interval());
  *interval = asked > absl::ZeroDuration() ? std::min(asked, options_.interval) : options_.interval;
  // A server asking for reports faster than any config may not make the
  // worker spin.
  *interval = std::max(*interval, kMinConfigInterval);
  return absl::OkStatus();
}

absl::Status LoadReporter::Session(bool* registered) {
  if (Stopping()) return absl::CancelledError("stopping");
  absl::Duration interval;
  if (absl::Status s = Register(&interval); !s.ok()) return s;
  *registered = true;
  grpc::ClientContext context;
  if (options_.auth != nullptr) options_.auth->Attach(ServiceRole::kWorker, &context);
  {
    absl::MutexLock lock(&mu_);
    ++sessions_;
    stream_context_ = &context;
  }
  Log(LogLevel::kInfo, "worker", "registered with the control plane %s as %s",
      options_.control_plane_address, options_.worker_id);
  v1::ReportLoadResponse ack;
  std::unique_ptr<grpc::ClientWriter<v1::WorkerLoadReport>> writer =
      stub_->ReportWorkerLoad(&context, &ack);
  const bool stopped = StreamReports(writer.get(), interval);
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  {
    absl::MutexLock lock(&mu_);
    stream_context_ = nullptr;
  }
  if (stopped) return absl::CancelledError("stopping");
  if (status.ok()) return absl::UnavailableError("the control plane closed the report stream");
  return FromGrpcStatus(status);
}

bool LoadReporter::StreamReports(grpc::ClientWriter<v1::WorkerLoadReport>* writer,
                                 absl::Duration interval) {
  LoadKey last_key;
  absl::Time last_sent = absl::InfinitePast();
  bool stopped = false;
  while (!stopped) {
    stopped = Stopping();  // still sends one last report
    const WorkerSnapshot snapshot = snapshot_();
    const LoadKey key{snapshot.stats.num_waiting, snapshot.stats.num_running,
                      snapshot.stats.kv_blocks_used, snapshot.stats.kv_blocks_total,
                      snapshot.draining};
    const absl::Time now = absl::Now();
    if (stopped || !(key == last_key) || now - last_sent >= interval) {
      if (!writer->Write(MakeReport(snapshot))) return false;
      last_key = key;
      last_sent = now;
      absl::MutexLock lock(&mu_);
      ++reports_sent_;
    }
    if (!stopped) WaitForWork(std::min(options_.poll, last_sent + interval - now));
  }
  return true;
}

v1::WorkerLoadReport LoadReporter::MakeReport(const WorkerSnapshot& snapshot) {
  const engine::EngineStats& s = snapshot.stats;
  v1::WorkerLoadReport report;
  report.set_worker_id(options_.worker_id);
  report.set_address(options_.address);
  report.set_model(options_.info.model().id());
  report.set_waiting(s.num_waiting);
  AddWaitingByPriority(s, &report);
  report.set_running(s.num_running);
  report.set_kv_blocks_used(s.kv_blocks_used);
  report.set_kv_blocks_total(s.kv_blocks_total);
  report.set_tokens_per_second(s.tokens_per_second);
  report.set_draining(snapshot.draining);
  ToProtoTimestamp(absl::Now(), report.mutable_timestamp());
  report.set_sequence(++sequence_);
  report.set_preemptions_total(s.num_preemptions);
  report.set_generation_tokens_total(s.generation_tokens_total);
  return report;
}

void LoadReporter::WaitForWork(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return notified_ || stopping_; };
  mu_.AwaitWithTimeout(absl::Condition(&woken), std::max(timeout, absl::ZeroDuration()));
  notified_ = false;
}

}  // namespace onecard::services
