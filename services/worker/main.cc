// onecard-worker: one engine behind streaming gRPC. Flags live here only;
// each overrides one field of the typed config (--config FILE, YAML or
// JSON: a WorkerConfig, or an OnecardConfig with a `worker:` section).
// Flag names take dashes or underscores (--metrics-listen, --metrics_listen).
//
// Prints "LISTENING grpc HOST:PORT", "LISTENING metrics HOST:PORT" once bound
// and "READY" once the model is loaded. SIGTERM or SIGINT: drain (stop
// admitting, finish in-flight streams within --grace-period) and exit 0.
// Exit 1 when it cannot start, 2 on a bad flag or config.
// Tested by tests/services/worker/worker_main_test.cc (the real process).
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/common/log.h"
#include "engine/common/status_macros.h"
#include "services/common/command_line.h"
#include "services/common/config.h"
#include "services/common/proto_time.h"
#include "services/common/server_main.h"
#include "services/common/service_auth_flags.h"
#include "services/worker/worker_config.h"
#include "services/worker/worker_server.h"

ABSL_FLAG(std::string, config, "", "Config file (YAML or JSON)");
ABSL_FLAG(std::string, model, "", "Model: a .gguf file or an HF checkpoint directory");
ABSL_FLAG(std::string, model_name, "", "Name requests use for the model (default: file stem)");
ABSL_FLAG(std::string, backend, "", "cpu or cuda (default cpu)");
ABSL_FLAG(std::string, listen, "", "gRPC listen address (default 0.0.0.0:50051; port 0 = any)");
ABSL_FLAG(std::string, metrics_listen, "", "/metrics listen address (default 0.0.0.0:9400)");
ABSL_FLAG(std::string, control_plane, "", "Control plane host:port for load reports");
ABSL_FLAG(std::string, advertise, "", "Address routers dial (default: host:bound port)");
ABSL_FLAG(std::string, worker_id, "", "Worker id (default: the advertised address)");
ABSL_FLAG(int32_t, threads, -1, "CPU backend threads (0 = all cores)");
ABSL_FLAG(std::string, cpu_weights, "",
          "CPU backend: native (a GGUF file's quantized weights as stored; default) or f32 "
          "(every weight dequantized to fp32: the reference)");
ABSL_FLAG(std::string, fp8_compute, "",
          "CUDA backend: how FP8 projections multiply past the GEMV's rows: w8a8 (activations "
          "in E4M3, FP8 tensor cores; default) or w8a16 (weights dequantized to BF16)");
ABSL_FLAG(int32_t, kv_block_size, -1, "Tokens per KV block");
ABSL_FLAG(int64_t, kv_blocks, -1, "KV blocks in the pool (0 = from --kv-cache-mib)");
ABSL_FLAG(int64_t, kv_cache_mib, -1, "KV cache size in MiB");
ABSL_FLAG(std::string, kv_cache_dtype, "",
          "How K and V are held: auto (the backend's own: cpu fp32, cuda BF16; default), bf16, "
          "or fp8 (E4M3, scales from the checkpoint or calibrated at load; cpu backend)");
ABSL_FLAG(std::string, prefix_caching, "", "true or false");
ABSL_FLAG(std::string, swap_space, "",
          "Host memory for KV swap (pinned on the CUDA backend): preempted requests' KV blocks "
          "wait there instead of being recomputed, e.g. 16GiB (default: none)");
ABSL_FLAG(int32_t, max_num_seqs, -1, "Sequences per engine step");
ABSL_FLAG(int32_t, max_batched_tokens, -1, "Token budget per engine step");
ABSL_FLAG(int32_t, max_context, -1, "Context length served (0 = the model's)");
ABSL_FLAG(std::string, aging_interval, "",
          "A request's priority rises one class per this much time in the engine, e.g. 10s "
          "(default 10s; 0s = off)");
ABSL_FLAG(std::string, fifo, "",
          "true: arrival order only, request priorities ignored (the benchmarks' baseline; "
          "default false)");
ABSL_FLAG(int32_t, long_prefill_token_threshold, -1,
          "Tokens a prefill chunk takes at most, so a long prompt spreads over steps (0 = off)");
ABSL_FLAG(std::string, async_scheduling, "",
          "true: plan and launch the next step while the device runs this one (one step of "
          "look-ahead; cuda backend; default false)");
ABSL_FLAG(int32_t, max_waiting, -1, "Waiting requests before RESOURCE_EXHAUSTED (0 = no limit)");
ABSL_FLAG(double, kv_watermark, -1, "KV usage ratio that refuses new requests (0 = off)");
ABSL_FLAG(int32_t, default_max_tokens, -1, "max_tokens of requests that set none");
ABSL_FLAG(std::string, grace_period, "", "Drain time on SIGTERM, e.g. 30s");
ABSL_FLAG(
    std::string, gpu_memory_budget, "",
    "CUDA backend: device memory to plan within, e.g. 24GiB (default: the card's free memory)");
ABSL_FLAG(std::string, tune_gemms, "", "CUDA backend: true or false (default true)");
ABSL_FLAG(std::string, tuning_cache, "", "CUDA backend: file keeping tuned GEMM choices");
ABSL_FLAG(std::string, cpu_memory_budget, "",
          "CUDA backend: pinned host memory for the layers the card cannot hold, streamed each "
          "step, e.g. 96GiB (default: none; such a model is refused)");
ABSL_FLAG(std::optional<int32_t>, gpu_layers, std::nullopt,
          "CUDA backend: at most this many layers on the card, the rest streamed from host "
          "memory (needs --cpu-memory-budget; default -1: as many as fit)");
ABSL_FLAG(std::optional<int32_t>, offload_ring_layers, std::nullopt,
          "CUDA backend: device slots the streamed layers pass through (default 2)");
ABSL_FLAG(std::optional<int32_t>, offload_cpu_threads, std::nullopt,
          "CUDA backend: threads the CPU computes offloaded layers with (default 0: every "
          "hardware thread but one; -1: the CPU computes none, every offloaded layer streams)");
ABSL_FLAG(std::optional<int32_t>, offload_cpu_layers, std::nullopt,
          "CUDA backend: this many offloaded layers on the CPU (default -1: the cost model's "
          "count)");

namespace onecard::services {

const CommandLineSpec kCommandLine = {
    .program = "onecard-worker",
    .usage = {"--model PATH [--listen HOST:PORT] [flags]", "--config worker.yaml [flags]"},
    .description =
        "One engine (one GPU, or the CPU backend) behind streaming gRPC (onecard.v1.Worker and\n"
        "onecard.v1.Generation). Runs in the foreground until SIGTERM or Ctrl-C, then drains.\n"
        "Prints \"LISTENING grpc ADDR\" and \"LISTENING metrics ADDR\" once bound and \"READY\"\n"
        "once the model is loaded.",
    .groups = {{"Configuration", {"config"}},
               {"Model",
                {"model", "model_name", "backend", "threads", "cpu_weights", "default_max_tokens"}},
               {"Network", {"listen", "metrics_listen", "control_plane", "advertise", "worker_id"}},
               {"KV cache",
                {"kv_block_size", "kv_blocks", "kv_cache_mib", "kv_cache_dtype", "prefix_caching",
                 "swap_space"}},
               {"Scheduler and admission",
                {"max_num_seqs", "max_batched_tokens", "long_prefill_token_threshold",
                 "max_context", "aging_interval", "fifo", "async_scheduling", "max_waiting",
                 "kv_watermark"}},
               {"CUDA backend",
                {"gpu_memory_budget", "cpu_memory_budget", "gpu_layers", "offload_ring_layers",
                 "offload_cpu_threads", "offload_cpu_layers", "tune_gemms", "tuning_cache",
                 "fp8_compute"}},
               ServiceIdentityFlagGroup(),
               {"Shutdown", {"grace_period"}}},
    .epilog = ServiceHelpEpilog(),
    .flags_only = true};

namespace {

void OverrideStrings(v1::WorkerConfig* c) {
  const auto set = [](const std::string& flag, std::string* field) {
    if (!flag.empty()) *field = flag;
  };
  set(absl::GetFlag(FLAGS_model), c->mutable_model_path());
  set(absl::GetFlag(FLAGS_model_name), c->mutable_model_name());
  set(absl::GetFlag(FLAGS_backend), c->mutable_backend());
  // These three are checked with the config.
  set(absl::GetFlag(FLAGS_cpu_weights), c->mutable_cpu_weights());
  set(absl::GetFlag(FLAGS_kv_cache_dtype), c->mutable_kv_cache_dtype());
  set(absl::GetFlag(FLAGS_fp8_compute), c->mutable_fp8_compute());
  set(absl::GetFlag(FLAGS_listen), c->mutable_listen_address());
  set(absl::GetFlag(FLAGS_metrics_listen), c->mutable_metrics_listen_address());
  set(absl::GetFlag(FLAGS_control_plane), c->mutable_control_plane_address());
  set(absl::GetFlag(FLAGS_advertise), c->mutable_advertise_address());
  set(absl::GetFlag(FLAGS_worker_id), c->mutable_worker_id());
  // Checked (ParseByteSize) with the rest of the config.
  set(absl::GetFlag(FLAGS_gpu_memory_budget), c->mutable_cuda()->mutable_memory_budget());
  set(absl::GetFlag(FLAGS_cpu_memory_budget), c->mutable_cuda()->mutable_cpu_memory_budget());
  set(absl::GetFlag(FLAGS_swap_space), c->mutable_kv_cache()->mutable_swap_space());
  set(absl::GetFlag(FLAGS_tuning_cache), c->mutable_cuda()->mutable_tuning_cache());
  OverrideServiceAuthFromFlags(c->mutable_service_auth());
}

absl::Status OverrideNumbers(v1::WorkerConfig* c) {
  if (int32_t v = absl::GetFlag(FLAGS_threads); v >= 0) c->set_num_threads(v);
  if (int32_t v = absl::GetFlag(FLAGS_kv_block_size); v >= 0)
    c->mutable_kv_cache()->set_block_size(v);
  if (int64_t v = absl::GetFlag(FLAGS_kv_blocks); v >= 0) c->mutable_kv_cache()->set_num_blocks(v);
  if (int64_t v = absl::GetFlag(FLAGS_kv_cache_mib); v >= 0) {
    if (v > (std::numeric_limits<int64_t>::max() >> 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--kv-cache-mib: ", v, " MiB is more than 2^63 bytes"));
    }
    c->mutable_kv_cache()->set_cache_bytes(v << 20);
  }
  if (int32_t v = absl::GetFlag(FLAGS_max_num_seqs); v >= 0)
    c->mutable_scheduler()->set_max_num_seqs(v);
  if (int32_t v = absl::GetFlag(FLAGS_max_batched_tokens); v >= 0) {
    c->mutable_scheduler()->set_max_batched_tokens(v);
  }
  if (int32_t v = absl::GetFlag(FLAGS_long_prefill_token_threshold); v >= 0) {
    c->mutable_scheduler()->set_long_prefill_token_threshold(v);
  }
  if (int32_t v = absl::GetFlag(FLAGS_max_context); v >= 0)
    c->mutable_scheduler()->set_max_context(v);
  if (int32_t v = absl::GetFlag(FLAGS_max_waiting); v >= 0)
    c->mutable_admission()->set_max_waiting(v);
  if (double v = absl::GetFlag(FLAGS_kv_watermark); v >= 0)
    c->mutable_admission()->set_kv_watermark(v);
  if (int32_t v = absl::GetFlag(FLAGS_default_max_tokens); v >= 0) c->set_default_max_tokens(v);
  // Unset is no value (gpu_layers -1 is one), so every given value is checked.
  if (std::optional<int32_t> v = absl::GetFlag(FLAGS_gpu_layers)) {
    c->mutable_cuda()->set_gpu_layers(*v);
  }
  if (std::optional<int32_t> v = absl::GetFlag(FLAGS_offload_ring_layers)) {
    c->mutable_cuda()->set_offload_ring_layers(*v);
  }
  if (std::optional<int32_t> v = absl::GetFlag(FLAGS_offload_cpu_threads)) {
    c->mutable_cuda()->set_offload_cpu_threads(*v);
  }
  if (std::optional<int32_t> v = absl::GetFlag(FLAGS_offload_cpu_layers)) {
    c->mutable_cuda()->set_offload_cpu_layers(*v);
  }
  return absl::OkStatus();
}

// A true/false flag: `set` called when given, an error naming `flag` when
// it is something else.
template <typename Set>
absl::Status OverrideBool(const char* flag, const std::string& value, Set set) {
  if (value == "true" || value == "false") {
    set(value == "true");
  } else if (!value.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": expected true or false"));
  }
  return absl::OkStatus();
}

// A duration flag (e.g. 30s): `set` called when given, an error naming
// `flag` when it is not a finite, non-negative duration.
template <typename Set>
absl::Status OverrideDuration(const char* flag, const std::string& value, Set set) {
  if (value.empty()) return absl::OkStatus();
  absl::Duration d;
  if (!absl::ParseDuration(value, &d) || d < absl::ZeroDuration() ||
      d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": expected a duration such as 30s"));
  }
  set(d);
  return absl::OkStatus();
}

absl::Status OverrideOthers(v1::WorkerConfig* c) {
  RETURN_IF_ERROR(OverrideBool("prefix-caching", absl::GetFlag(FLAGS_prefix_caching), [c](bool v) {
    c->mutable_kv_cache()->set_enable_prefix_caching(v);
  }));
  RETURN_IF_ERROR(OverrideBool("fifo", absl::GetFlag(FLAGS_fifo),
                               [c](bool v) { c->mutable_scheduler()->set_fifo(v); }));
  RETURN_IF_ERROR(OverrideBool("async-scheduling", absl::GetFlag(FLAGS_async_scheduling),
                               [c](bool v) { c->mutable_scheduler()->set_async_scheduling(v); }));
  RETURN_IF_ERROR(OverrideBool("tune-gemms", absl::GetFlag(FLAGS_tune_gemms),
                               [c](bool v) { c->mutable_cuda()->set_tune_gemms(v); }));
  RETURN_IF_ERROR(OverrideDuration(
      "aging-interval", absl::GetFlag(FLAGS_aging_interval), [c](absl::Duration d) {
        ToProtoDuration(d, c->mutable_scheduler()->mutable_aging_interval());
      }));
  return OverrideDuration("grace-period", absl::GetFlag(FLAGS_grace_period),
                          [c](absl::Duration d) { ToProtoDuration(d, c->mutable_grace_period()); });
}

absl::StatusOr<v1::WorkerConfig> BuildConfig() {
  absl::StatusOr<v1::WorkerConfig> config =
      LoadServiceConfig<v1::WorkerConfig>(absl::GetFlag(FLAGS_config), "worker");
  if (!config.ok()) return config.status();
  ApplyLogConfig(config->log());
  OverrideStrings(&*config);
  if (absl::Status s = OverrideNumbers(&*config); !s.ok()) return s;
  if (absl::Status s = OverrideOthers(&*config); !s.ok()) return s;
  ApplyWorkerDefaults(&*config);
  if (absl::Status s = ValidateWorkerConfig(*config); !s.ok()) return s;
  return config;
}

int Run(ShutdownSignals& signals) {
  absl::StatusOr<v1::WorkerConfig> config = BuildConfig();
  if (!config.ok()) {
    std::fprintf(stderr, "onecard-worker: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<WorkerServer>> server = WorkerServer::Create({*config, {}});
  if (!server.ok()) {
    std::fprintf(stderr, "onecard-worker: %s\n", server.status().ToString().c_str());
    return 1;
  }
  AnnounceListening("grpc", (*server)->address());
  AnnounceListening("metrics", (*server)->metrics_address());
  if (absl::Status s = (*server)->LoadEngine(); !s.ok()) {
    std::fprintf(stderr, "onecard-worker: cannot load the model: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("READY\n");
  std::fflush(stdout);
  const int sig = signals.Wait();
  const absl::Status drained = (*server)->Drain(FromProtoDuration(config->grace_period()));
  Log(LogLevel::kInfo, "worker", "signal %d: drained (%s); exiting", sig, drained.ToString());
  return 0;
}

}  // namespace
}  // namespace onecard::services

int main(int argc, char** argv) {
  // First, before any thread exists, so that every thread inherits the mask.
  absl::StatusOr<std::unique_ptr<onecard::services::ShutdownSignals>> signals =
      onecard::services::ShutdownSignals::Install();
  if (!signals.ok()) {
    std::fprintf(stderr, "onecard-worker: %s\n", signals.status().ToString().c_str());
    return 1;
  }
  const onecard::services::CommandLine cli =
      onecard::services::ParseCommandLine(onecard::services::kCommandLine, argc, argv);
  if (cli.exit_code) return *cli.exit_code;
  return onecard::services::Run(**signals);
}
