// Worker configuration defaults and checks. See worker_config.h.
#include "services/worker/worker_config.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/model/synthetic_shapes.h"
#include "services/common/config.h"
#include "services/common/config_bounds.h"
#include "services/common/proto_time.h"

namespace onecard::services {
namespace {

constexpr int64_t kMaxKvBlockSize = 1024;  // tokens
constexpr int64_t kMaxNumSeqs = 16384;
constexpr int64_t kMaxWaiting = 1000000;

void SetDurationIfUnset(google::protobuf::Duration* d, absl::Duration value) {
  if (d->seconds() != 0 || d->nanos() != 0) return;
  ToProtoDuration(value, d);
}

absl::Status FieldError(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

absl::Status Prefixed(absl::Status status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat("worker config: ", status.message()));
}

absl::Status Bad(absl::string_view field, absl::string_view why) {
  return Prefixed(FieldError(field, why));
}

// A size field such as "24GiB"; empty: 0.
absl::StatusOr<int64_t> ByteSizeField(absl::string_view field, const std::string& text) {
  if (text.empty()) return 0;
  absl::StatusOr<int64_t> bytes = ParseByteSize(text);
  if (!bytes.ok()) return FieldError(field, bytes.status().message());
  return bytes;
}

// What sizes the engine: threads, the KV pool, the batch, the context.
absl::Status ValidateEngineFields(const v1::WorkerConfig& c) {
  RETURN_IF_ERROR(CheckThreads("num_threads", c.num_threads()));
  RETURN_IF_ERROR(engine::ParseCpuWeightFormat(c.cpu_weights(), "cpu_weights").status());
  RETURN_IF_ERROR(engine::ParseKvCacheDtype(c.kv_cache_dtype(), "kv_cache_dtype").status());
  RETURN_IF_ERROR(engine::ParseFp8Compute(c.fp8_compute(), "fp8_compute").status());
  const v1::KvCacheConfig& kv = c.kv_cache();
  RETURN_IF_ERROR(CheckRange("kv_cache.block_size", kv.block_size(), 1, kMaxKvBlockSize));
  RETURN_IF_ERROR(
      CheckRange("kv_cache.num_blocks", kv.num_blocks(), 0, std::numeric_limits<int32_t>::max()));
  ASSIGN_OR_RETURN(const int64_t swap_bytes, ByteSizeField("kv_cache.swap_space", kv.swap_space()));
  RETURN_IF_ERROR(CheckHostBytes("kv_cache.swap_space", swap_bytes));
  if (c.backend() == "cpu") {
    RETURN_IF_ERROR(CheckHostBytes("kv_cache.cache_bytes", kv.cache_bytes()));
  } else {
    RETURN_IF_ERROR(CheckRange("kv_cache.cache_bytes", kv.cache_bytes(), 0,
                               std::numeric_limits<int64_t>::max()));
  }
  const v1::SchedulerConfig& s = c.scheduler();
  RETURN_IF_ERROR(CheckRange("scheduler.max_num_seqs", s.max_num_seqs(), 1, kMaxNumSeqs));
  RETURN_IF_ERROR(
      CheckRange("scheduler.max_batched_tokens", s.max_batched_tokens(), 1, kMaxTokens));
  RETURN_IF_ERROR(CheckRange("scheduler.max_context", s.max_context(), 0, kMaxTokens));
  RETURN_IF_ERROR(CheckRange("scheduler.long_prefill_token_threshold",
                             s.long_prefill_token_threshold(), 0, kMaxTokens));
  RETURN_IF_ERROR(CheckDurationRange("scheduler.aging_interval",
                                     FromProtoDuration(s.aging_interval()), absl::ZeroDuration(),
                                     kMaxConfigDuration));
  RETURN_IF_ERROR(CheckRange("admission.max_waiting", c.admission().max_waiting(), 0, kMaxWaiting));
  RETURN_IF_ERROR(
      CheckDoubleRange("admission.kv_watermark", c.admission().kv_watermark(), 0.0, 1.0));
  RETURN_IF_ERROR(CheckRange("default_max_tokens", c.default_max_tokens(), 1, kMaxTokens));
  return CheckRange("max_request_bytes", c.max_request_bytes(), 1, kMaxMessageBytes);
}

// The CUDA backend's budgets and weight offload. cpu_memory_budget is
// pinned host memory, so the host's memory bounds it.
absl::Status ValidateCudaFields(const v1::CudaConfig& cuda) {
  RETURN_IF_ERROR(ByteSizeField("cuda.memory_budget", cuda.memory_budget()).status());
  ASSIGN_OR_RETURN(const int64_t cpu_bytes,
                   ByteSizeField("cuda.cpu_memory_budget", cuda.cpu_memory_budget()));
  RETURN_IF_ERROR(CheckHostBytes("cuda.cpu_memory_budget", cpu_bytes));
  constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
  RETURN_IF_ERROR(CheckRange("cuda.gpu_layers", cuda.gpu_layers(), -1, kMaxInt32));
  RETURN_IF_ERROR(CheckRange("cuda.offload_ring_layers", cuda.offload_ring_layers(), 1, kMaxInt32));
  RETURN_IF_ERROR(CheckRange("cuda.offload_cpu_threads", cuda.offload_cpu_threads(), -1, 4096));
  RETURN_IF_ERROR(CheckRange("cuda.offload_cpu_layers", cuda.offload_cpu_layers(), -1, kMaxInt32));
  if (cuda.offload_cpu_layers() > 0 && cuda.offload_cpu_threads() < 0) {
    return FieldError("cuda.offload_cpu_layers",
                      absl::StrCat(cuda.offload_cpu_layers(),
                                   " layers on the CPU, but cuda.offload_cpu_threads -1 gives it "
                                   "no threads"));
  }
  if (cuda.gpu_layers() >= 0 && cpu_bytes == 0) {
    return FieldError("cuda.gpu_layers",
                      absl::StrCat(cuda.gpu_layers(),
                                   " needs cuda.cpu_memory_budget: the layers past them are "
                                   "streamed from pinned host memory"));
  }
  return absl::OkStatus();
}

// Periods of the worker's own loops and waits.
absl::Status ValidateServiceFields(const v1::WorkerConfig& c) {
  RETURN_IF_ERROR(CheckDurationRange("load_report_interval",
                                     FromProtoDuration(c.load_report_interval()),
                                     kMinConfigInterval, absl::Hours(1)));
  const absl::Duration initial = FromProtoDuration(c.reconnect().initial_backoff());
  RETURN_IF_ERROR(
      CheckDurationRange("reconnect.initial_backoff", initial, kMinConfigInterval, absl::Hours(1)));
  RETURN_IF_ERROR(CheckDurationRange("reconnect.max_backoff",
                                     FromProtoDuration(c.reconnect().max_backoff()), initial,
                                     absl::Hours(1)));
  RETURN_IF_ERROR(CheckDurationRange("admission.retry_after",
                                     FromProtoDuration(c.admission().retry_after()),
                                     absl::ZeroDuration(), absl::Hours(1)));
  return CheckDurationRange("grace_period", FromProtoDuration(c.grace_period()),
                            absl::ZeroDuration(), kMaxConfigDuration);
}

}  // namespace

void ApplyWorkerDefaults(v1::WorkerConfig* c) {
  if (c->backend().empty()) c->set_backend("cpu");
  if (c->cpu_weights().empty()) {
    c->set_cpu_weights(engine::CpuWeightFormatName(engine::CpuWeightFormat::kNative));
  }
  if (c->kv_cache_dtype().empty()) {
    c->set_kv_cache_dtype(engine::KvCacheDtypeName(engine::KvCacheDtype::kAuto));
  }
  if (c->fp8_compute().empty()) {
    c->set_fp8_compute(engine::Fp8ComputeName(engine::Fp8Compute::kW8A8));
  }
  if (c->listen_address().empty()) c->set_listen_address("0.0.0.0:50051");
  if (c->metrics_listen_address().empty()) c->set_metrics_listen_address("0.0.0.0:9400");
  v1::KvCacheConfig* kv = c->mutable_kv_cache();
  if (kv->block_size() == 0) kv->set_block_size(16);
  if (kv->cache_bytes() == 0) kv->set_cache_bytes(256ll << 20);
  if (!kv->has_enable_prefix_caching()) kv->set_enable_prefix_caching(true);
  v1::SchedulerConfig* sched = c->mutable_scheduler();
  if (sched->max_num_seqs() == 0) sched->set_max_num_seqs(64);
  if (sched->max_batched_tokens() == 0) sched->set_max_batched_tokens(512);
  // Presence, not zero, marks it unset: 0s switches aging off.
  if (!sched->has_aging_interval()) {
    ToProtoDuration(absl::Seconds(10), sched->mutable_aging_interval());
  }
  SetDurationIfUnset(c->mutable_admission()->mutable_retry_after(), absl::Milliseconds(100));
  SetDurationIfUnset(c->mutable_grace_period(), absl::Seconds(30));
  SetDurationIfUnset(c->mutable_load_report_interval(), absl::Milliseconds(250));
  SetDurationIfUnset(c->mutable_reconnect()->mutable_initial_backoff(), absl::Milliseconds(100));
  SetDurationIfUnset(c->mutable_reconnect()->mutable_max_backoff(), absl::Seconds(5));
  if (c->max_request_bytes() == 0) c->set_max_request_bytes(4 << 20);
  if (c->default_max_tokens() == 0) c->set_default_max_tokens(256);
  v1::CudaConfig* cuda = c->mutable_cuda();
  if (!cuda->has_tune_gemms()) cuda->set_tune_gemms(true);
  // Presence, not zero, marks it unset: 0 keeps every layer in host memory.
  if (!cuda->has_gpu_layers()) cuda->set_gpu_layers(-1);
  if (cuda->offload_ring_layers() == 0) cuda->set_offload_ring_layers(2);
  if (!cuda->has_offload_cpu_threads()) cuda->set_offload_cpu_threads(0);
  if (!cuda->has_offload_cpu_layers()) cuda->set_offload_cpu_layers(-1);
}

absl::Status ValidateWorkerConfig(const v1::WorkerConfig& c) {
  if (c.model_path().empty()) return Bad("model_path", "required (a .gguf file or HF directory)");
  if (c.backend() != "cpu" && c.backend() != "cuda") {
    return Bad("backend", absl::StrCat("\"", c.backend(), "\" is not one of cpu, cuda"));
  }
  if (engine::IsSyntheticModelPath(c.model_path())) {
    if (absl::StatusOr<engine::SyntheticModelPath> p =
            engine::ParseSyntheticModelPath(c.model_path());
        !p.ok()) {
      return Bad("model_path", p.status().message());
    }
    if (c.backend() != "cuda") {
      return Bad("model_path",
                 "a synthetic model needs backend cuda (its weights are made on the card)");
    }
  }
  RETURN_IF_ERROR(Prefixed(ValidateEngineFields(c)));
  RETURN_IF_ERROR(Prefixed(ValidateServiceFields(c)));
  return Prefixed(ValidateCudaFields(c.cuda()));
}

engine::EngineOptions EngineOptionsFromConfig(const v1::WorkerConfig& c) {
  engine::EngineOptions o;
  o.model_path = c.model_path();
  o.backend = c.backend();
  o.num_threads = c.num_threads();
  // Validated by ValidateWorkerConfig (ApplyWorkerDefaults fills it).
  o.cpu_weight_format = engine::ParseCpuWeightFormat(c.cpu_weights(), "cpu_weights")
                            .value_or(engine::CpuWeightFormat::kNative);
  o.kv_cache_dtype = engine::ParseKvCacheDtype(c.kv_cache_dtype(), "kv_cache_dtype")
                         .value_or(engine::KvCacheDtype::kAuto);
  o.fp8_compute =
      engine::ParseFp8Compute(c.fp8_compute(), "fp8_compute").value_or(engine::Fp8Compute::kW8A8);
  o.kv_block_size = c.kv_cache().block_size();
  o.num_kv_blocks = c.kv_cache().num_blocks();
  o.kv_cache_bytes = c.kv_cache().cache_bytes();
  o.enable_prefix_caching = c.kv_cache().enable_prefix_caching();
  // Validated by ValidateWorkerConfig; empty (or unparsable): none.
  o.swap_space_bytes = ParseByteSize(c.kv_cache().swap_space()).value_or(0);
  o.max_num_seqs = c.scheduler().max_num_seqs();
  o.max_batched_tokens = c.scheduler().max_batched_tokens();
  o.max_context = c.scheduler().max_context();
  o.aging_interval = FromProtoDuration(c.scheduler().aging_interval());
  o.fifo_scheduling = c.scheduler().fifo();
  o.async_scheduling = c.scheduler().async_scheduling();
  o.long_prefill_token_threshold = c.scheduler().long_prefill_token_threshold();
  o.max_waiting = c.admission().max_waiting();
  // Validated by ValidateWorkerConfig; empty (or unparsable): the card's memory.
  o.gpu_memory_budget = ParseByteSize(c.cuda().memory_budget()).value_or(0);
  o.tune_gemms = c.cuda().tune_gemms();  // ApplyWorkerDefaults sets it
  o.tuning_cache = c.cuda().tuning_cache();
  o.cpu_memory_budget = ParseByteSize(c.cuda().cpu_memory_budget()).value_or(0);
  // Unset (no ApplyWorkerDefaults): the engine's defaults, not proto zeros.
  if (c.cuda().has_gpu_layers()) o.gpu_layers = c.cuda().gpu_layers();
  if (c.cuda().offload_ring_layers() > 0) o.offload_ring_layers = c.cuda().offload_ring_layers();
  if (c.cuda().has_offload_cpu_threads()) o.offload_cpu_threads = c.cuda().offload_cpu_threads();
  if (c.cuda().has_offload_cpu_layers()) o.offload_cpu_layers = c.cuda().offload_cpu_layers();
  return o;
}

std::string ServedModelName(const v1::WorkerConfig& c) {
  if (!c.model_name().empty()) return c.model_name();
  std::string path = c.model_path();
  while (!path.empty() && path.back() == '/') path.pop_back();
  const size_t slash = path.rfind('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  for (const char* ext : {".gguf", ".safetensors"}) {
    const std::string e(ext);
    if (base.size() > e.size() && base.compare(base.size() - e.size(), e.size(), e) == 0) {
      base.resize(base.size() - e.size());
    }
  }
  return base;
}

}  // namespace onecard::services
