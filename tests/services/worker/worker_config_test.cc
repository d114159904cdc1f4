// Tests of the worker's config handling: the defaults written in
// config.proto, one refusal per out-of-range field (naming it), the engine
// options derived from the config (scheduler.aging_interval and the cuda
// offload fields from YAML too), and the served model name.
#include "services/worker/worker_config.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/config.h"
#include "services/common/proto_time.h"

namespace onecard::services {
namespace {

using ::testing::HasSubstr;

v1::WorkerConfig Defaults() {
  v1::WorkerConfig c;
  c.set_model_path("models/m.gguf");
  ApplyWorkerDefaults(&c);
  return c;
}

TEST(WorkerConfigTest, DefaultsFromTheProto) {
  const v1::WorkerConfig c = Defaults();
  EXPECT_EQ(c.backend(), "cpu");
  EXPECT_EQ(c.cpu_weights(), "native");
  EXPECT_EQ(c.kv_cache_dtype(), "auto");
  EXPECT_EQ(c.fp8_compute(), "w8a8");
  EXPECT_EQ(c.listen_address(), "0.0.0.0:50051");
  EXPECT_EQ(c.metrics_listen_address(), "0.0.0.0:9400");
  EXPECT_EQ(c.kv_cache().block_size(), 16);
  EXPECT_EQ(c.kv_cache().cache_bytes(), 256ll << 20);
  EXPECT_TRUE(c.kv_cache().enable_prefix_caching());
  EXPECT_EQ(c.scheduler().max_num_seqs(), 64);
  EXPECT_EQ(c.scheduler().max_batched_tokens(), 512);
  EXPECT_EQ(FromProtoDuration(c.scheduler().aging_interval()), absl::Seconds(10));
  EXPECT_EQ(FromProtoDuration(c.admission().retry_after()), absl::Milliseconds(100));
  EXPECT_EQ(FromProtoDuration(c.grace_period()), absl::Seconds(30));
  EXPECT_EQ(FromProtoDuration(c.load_report_interval()), absl::Milliseconds(250));
  EXPECT_EQ(FromProtoDuration(c.reconnect().initial_backoff()), absl::Milliseconds(100));
  EXPECT_EQ(FromProtoDuration(c.reconnect().max_backoff()), absl::Seconds(5));
  EXPECT_EQ(c.max_request_bytes(), 4 << 20);
  EXPECT_EQ(c.default_max_tokens(), 256);
  EXPECT_TRUE(c.cuda().tune_gemms());
  EXPECT_EQ(c.cuda().memory_budget(), "");
  EXPECT_EQ(c.cuda().cpu_memory_budget(), "");  // no offload
  EXPECT_EQ(c.kv_cache().swap_space(), "");     // no KV swap
  EXPECT_EQ(c.cuda().gpu_layers(), -1);         // as many as fit
  EXPECT_EQ(c.cuda().offload_ring_layers(), 2);
  EXPECT_EQ(c.cuda().offload_cpu_threads(), 0);  // every hardware thread but one
  EXPECT_EQ(c.cuda().offload_cpu_layers(), -1);  // the cost model's count
  EXPECT_TRUE(ValidateWorkerConfig(c).ok());
}

TEST(WorkerConfigTest, DefaultsKeepSetFields) {
  v1::WorkerConfig c;
  c.set_backend("cuda");
  c.set_cpu_weights("f32");
  c.set_kv_cache_dtype("fp8");
  c.set_fp8_compute("w8a16");
  c.mutable_kv_cache()->set_enable_prefix_caching(false);
  c.mutable_grace_period()->set_seconds(5);
  c.mutable_cuda()->set_cpu_memory_budget("1GiB");
  c.mutable_cuda()->set_gpu_layers(0);  // present, so not the default -1
  c.mutable_cuda()->set_offload_ring_layers(4);
  c.mutable_cuda()->set_offload_cpu_threads(-1);
  c.mutable_cuda()->set_offload_cpu_layers(0);  // present, so not the default -1
  ApplyWorkerDefaults(&c);
  EXPECT_EQ(c.backend(), "cuda");
  EXPECT_EQ(c.cpu_weights(), "f32");
  EXPECT_EQ(c.kv_cache_dtype(), "fp8");
  EXPECT_EQ(c.fp8_compute(), "w8a16");
  EXPECT_FALSE(c.kv_cache().enable_prefix_caching());
  EXPECT_EQ(c.grace_period().seconds(), 5);
  EXPECT_EQ(c.cuda().cpu_memory_budget(), "1GiB");
  EXPECT_EQ(c.cuda().gpu_layers(), 0);
  EXPECT_EQ(c.cuda().offload_ring_layers(), 4);
  EXPECT_EQ(c.cuda().offload_cpu_threads(), -1);
  EXPECT_EQ(c.cuda().offload_cpu_layers(), 0);
}

struct BadCase {
  void (*edit)(v1::WorkerConfig*);
  const char* field;
};

class WorkerConfigBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(WorkerConfigBadTest, NamesTheField) {
  v1::WorkerConfig c = Defaults();
  GetParam().edit(&c);
  const absl::Status s = ValidateWorkerConfig(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(std::string(GetParam().field) + ":"));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, WorkerConfigBadTest,
    ::testing::Values(
        BadCase{[](auto* c) { c->clear_model_path(); }, "model_path"},
        BadCase{[](auto* c) { c->set_backend("tpu"); }, "backend"},
        BadCase{[](auto* c) { c->set_model_path("synthetic:llama3-8b"); }, "model_path"},
        BadCase{[](auto* c) {
                  c->set_backend("cuda");
                  c->set_model_path("synthetic:llama3-9b");
                },
                "model_path"},
        BadCase{[](auto* c) {
                  c->set_backend("cuda");
                  c->set_model_path("synthetic:llama3-8b:int4:g64");
                },
                "model_path"},
        BadCase{[](auto* c) { c->set_num_threads(-1); }, "num_threads"},
        BadCase{[](auto* c) { c->set_cpu_weights("q4"); }, "cpu_weights"},
        BadCase{[](auto* c) { c->set_kv_cache_dtype("int8"); }, "kv_cache_dtype"},
        BadCase{[](auto* c) { c->set_kv_cache_dtype("FP8"); }, "kv_cache_dtype"},
        BadCase{[](auto* c) { c->set_fp8_compute("w4a16"); }, "fp8_compute"},
        BadCase{[](auto* c) { c->mutable_kv_cache()->set_block_size(-16); }, "kv_cache.block_size"},
        BadCase{[](auto* c) { c->mutable_kv_cache()->set_num_blocks(-1); }, "kv_cache.num_blocks"},
        BadCase{[](auto* c) { c->mutable_scheduler()->set_max_num_seqs(-1); },
                "scheduler.max_num_seqs"},
        BadCase{[](auto* c) { c->mutable_scheduler()->set_max_context(-1); },
                "scheduler.max_context"},
        BadCase{[](auto* c) { c->mutable_scheduler()->mutable_aging_interval()->set_seconds(-1); },
                "scheduler.aging_interval"},
        BadCase{[](auto* c) {
                  c->mutable_scheduler()->mutable_aging_interval()->set_seconds(25 * 3600);
                },
                "scheduler.aging_interval"},
        BadCase{[](auto* c) { c->mutable_admission()->set_max_waiting(-1); },
                "admission.max_waiting"},
        BadCase{[](auto* c) { c->mutable_admission()->set_kv_watermark(1.5); },
                "admission.kv_watermark"},
        BadCase{[](auto* c) { c->set_max_request_bytes(-1); }, "max_request_bytes"},
        BadCase{[](auto* c) { c->set_default_max_tokens(-5); }, "default_max_tokens"},
        BadCase{[](auto* c) { c->mutable_reconnect()->mutable_max_backoff()->set_seconds(0); },
                "reconnect.max_backoff"},
        BadCase{[](auto* c) { c->mutable_cuda()->set_memory_budget("24GB"); },
                "cuda.memory_budget"},
        BadCase{[](auto* c) { c->mutable_cuda()->set_cpu_memory_budget("96GB"); },
                "cuda.cpu_memory_budget"},
        BadCase{[](auto* c) { c->mutable_cuda()->set_cpu_memory_budget("-1GiB"); },
                "cuda.cpu_memory_budget"},
        BadCase{[](auto* c) { c->mutable_kv_cache()->set_swap_space("16GB"); },
                "kv_cache.swap_space"},
        BadCase{[](auto* c) { c->mutable_kv_cache()->set_swap_space("1000000TiB"); },
                "kv_cache.swap_space"},
        BadCase{[](auto* c) { c->mutable_cuda()->set_gpu_layers(-2); }, "cuda.gpu_layers"},
        BadCase{[](auto* c) { c->mutable_cuda()->set_gpu_layers(0); }, "cuda.gpu_layers"},
        BadCase{[](auto* c) { c->mutable_cuda()->set_offload_ring_layers(-1); },
                "cuda.offload_ring_layers"},
        BadCase{[](auto* c) { c->mutable_cuda()->set_offload_cpu_threads(-2); },
                "cuda.offload_cpu_threads"},
        BadCase{[](auto* c) { c->mutable_cuda()->set_offload_cpu_threads(5000); },
                "cuda.offload_cpu_threads"},
        BadCase{[](auto* c) { c->mutable_cuda()->set_offload_cpu_layers(-2); },
                "cuda.offload_cpu_layers"},
        BadCase{[](auto* c) {
                  c->mutable_cuda()->set_offload_cpu_threads(-1);
                  c->mutable_cuda()->set_offload_cpu_layers(3);
                },
                "cuda.offload_cpu_layers"},
        // Issue 22: values that exhausted memory or threads, or spun a core.
        BadCase{[](auto* c) { c->set_num_threads(100000); }, "num_threads"},
        BadCase{[](auto* c) { c->mutable_kv_cache()->set_cache_bytes(1000000000000000); },
                "kv_cache.cache_bytes"},
        BadCase{[](auto* c) { c->mutable_cuda()->set_cpu_memory_budget("1000000TiB"); },
                "cuda.cpu_memory_budget"},
        BadCase{[](auto* c) { c->mutable_kv_cache()->set_block_size(1 << 20); },
                "kv_cache.block_size"},
        BadCase{[](auto* c) { c->mutable_kv_cache()->set_num_blocks(1ll << 40); },
                "kv_cache.num_blocks"},
        BadCase{[](auto* c) { c->mutable_scheduler()->set_max_num_seqs(1 << 30); },
                "scheduler.max_num_seqs"},
        BadCase{[](auto* c) { c->mutable_scheduler()->set_max_batched_tokens(1 << 30); },
                "scheduler.max_batched_tokens"},
        BadCase{[](auto* c) { c->mutable_scheduler()->set_max_context(1 << 30); },
                "scheduler.max_context"},
        BadCase{[](auto* c) { c->set_max_request_bytes(1 << 30); }, "max_request_bytes"},
        BadCase{[](auto* c) { c->mutable_load_report_interval()->set_nanos(1); },
                "load_report_interval"},
        BadCase{[](auto* c) { c->mutable_reconnect()->mutable_initial_backoff()->set_nanos(1); },
                "reconnect.initial_backoff"},
        BadCase{[](auto* c) { c->mutable_grace_period()->set_seconds(-1); }, "grace_period"}));

// The refusal names the allowed range too.
TEST(WorkerConfigTest, BoundsNameTheRange) {
  v1::WorkerConfig c = Defaults();
  c.set_num_threads(100000);
  EXPECT_THAT(ValidateWorkerConfig(c).message(),
              HasSubstr("worker config: num_threads: 100000 is outside [0, "));
  c = Defaults();
  c.mutable_load_report_interval()->set_seconds(0);
  c.mutable_load_report_interval()->set_nanos(1);
  EXPECT_THAT(ValidateWorkerConfig(c).message(),
              HasSubstr("load_report_interval: 1ns is outside [10ms, 1h]"));
  // A CUDA worker's KV cache is planned in device memory: cache_bytes is not
  // bounded by the host's.
  c = Defaults();
  c.set_backend("cuda");
  c.mutable_kv_cache()->set_cache_bytes(1000000000000000);
  EXPECT_TRUE(ValidateWorkerConfig(c).ok());
}

// Weight offload: gpu_layers caps the card's layers only with host memory
// for the rest, and the refusal names both fields; a budget of "0" is none.
// cpu_memory_budget is pinned host memory, so the host's memory bounds it.
TEST(WorkerConfigTest, GpuLayersNeedACpuMemoryBudget) {
  v1::WorkerConfig c = Defaults();
  c.set_backend("cuda");
  c.mutable_cuda()->set_gpu_layers(20);
  for (const char* none : {"", "0", "0GiB"}) {
    c.mutable_cuda()->set_cpu_memory_budget(none);
    const absl::Status s = ValidateWorkerConfig(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << none;
    EXPECT_THAT(s.message(), HasSubstr("worker config: cuda.gpu_layers: 20 needs "
                                       "cuda.cpu_memory_budget"))
        << none;
  }
  for (int32_t gpu_layers : {-1, 0, 20}) {
    c.mutable_cuda()->set_gpu_layers(gpu_layers);
    c.mutable_cuda()->set_cpu_memory_budget("1GiB");
    c.mutable_cuda()->set_offload_ring_layers(1);
    EXPECT_TRUE(ValidateWorkerConfig(c).ok()) << gpu_layers << ": " << ValidateWorkerConfig(c);
  }
  c.mutable_cuda()->set_cpu_memory_budget("1000000TiB");
  EXPECT_THAT(ValidateWorkerConfig(c).message(),
              HasSubstr("cuda.cpu_memory_budget: 1099511627776000000 is outside [0, "));
  c = Defaults();
  c.mutable_cuda()->set_offload_ring_layers(-1);
  EXPECT_THAT(ValidateWorkerConfig(c).message(),
              HasSubstr("cuda.offload_ring_layers: -1 is outside [1, 2147483647]"));
}

// The config takes fp8 on either backend: both hold an fp8 KV cache (the
// cuda one refuses it at load only for a head_dim that is not a multiple
// of 16, naming kv_cache_dtype).
TEST(WorkerConfigTest, KvCacheDtypeFp8IsLeftToTheEngine) {
  for (const char* backend : {"cpu", "cuda"}) {
    v1::WorkerConfig c = Defaults();
    c.set_backend(backend);
    c.set_kv_cache_dtype("fp8");
    EXPECT_TRUE(ValidateWorkerConfig(c).ok()) << backend;
  }
}

TEST(WorkerConfigTest, EngineOptions) {
  v1::WorkerConfig c = Defaults();
  c.set_num_threads(3);
  c.mutable_kv_cache()->set_num_blocks(77);
  c.mutable_scheduler()->set_max_context(1024);
  c.mutable_admission()->set_max_waiting(9);
  const engine::EngineOptions o = EngineOptionsFromConfig(c);
  EXPECT_EQ(o.model_path, "models/m.gguf");
  EXPECT_EQ(o.backend, "cpu");
  EXPECT_EQ(o.num_threads, 3);
  EXPECT_EQ(o.cpu_weight_format, engine::CpuWeightFormat::kNative);
  EXPECT_EQ(o.kv_cache_dtype, engine::KvCacheDtype::kAuto);
  EXPECT_EQ(o.fp8_compute, engine::Fp8Compute::kW8A8);
  EXPECT_EQ(o.kv_block_size, 16);
  EXPECT_EQ(o.num_kv_blocks, 77);
  EXPECT_EQ(o.kv_cache_bytes, 256ll << 20);
  EXPECT_TRUE(o.enable_prefix_caching);
  EXPECT_EQ(o.max_num_seqs, 64);
  EXPECT_EQ(o.max_batched_tokens, 512);
  EXPECT_EQ(o.max_context, 1024);
  EXPECT_EQ(o.aging_interval, absl::Seconds(10));
  EXPECT_EQ(o.max_waiting, 9);
  EXPECT_EQ(o.gpu_memory_budget, 0);  // the card's free memory
  EXPECT_TRUE(o.tune_gemms);
  EXPECT_EQ(o.cpu_memory_budget, 0);  // no offload
  EXPECT_EQ(o.gpu_layers, -1);
  EXPECT_EQ(o.offload_ring_layers, 2);
  EXPECT_EQ(o.swap_space_bytes, 0);  // no KV swap

  c.mutable_kv_cache()->set_swap_space("16GiB");
  EXPECT_EQ(EngineOptionsFromConfig(c).swap_space_bytes, 16ll << 30);
  c.mutable_kv_cache()->set_swap_space("0");
  EXPECT_EQ(EngineOptionsFromConfig(c).swap_space_bytes, 0);
  c.set_cpu_weights("f32");
  EXPECT_EQ(EngineOptionsFromConfig(c).cpu_weight_format, engine::CpuWeightFormat::kF32);
  c.set_kv_cache_dtype("fp8");
  EXPECT_EQ(EngineOptionsFromConfig(c).kv_cache_dtype, engine::KvCacheDtype::kFp8E4m3);
  c.set_kv_cache_dtype("bf16");
  EXPECT_EQ(EngineOptionsFromConfig(c).kv_cache_dtype, engine::KvCacheDtype::kBf16);
  c.set_fp8_compute("w8a16");
  EXPECT_EQ(EngineOptionsFromConfig(c).fp8_compute, engine::Fp8Compute::kW8A16);

  c.mutable_cuda()->set_memory_budget("24GiB");
  c.mutable_cuda()->set_tune_gemms(false);
  c.mutable_cuda()->set_tuning_cache("/var/cache/onecard/h200.json");
  c.mutable_cuda()->set_cpu_memory_budget("96GiB");
  c.mutable_cuda()->set_gpu_layers(0);
  c.mutable_cuda()->set_offload_ring_layers(3);
  c.mutable_cuda()->set_offload_cpu_threads(12);
  c.mutable_cuda()->set_offload_cpu_layers(7);
  const engine::EngineOptions cuda = EngineOptionsFromConfig(c);
  EXPECT_EQ(cuda.gpu_memory_budget, 24ll << 30);
  EXPECT_FALSE(cuda.tune_gemms);
  EXPECT_EQ(cuda.tuning_cache, "/var/cache/onecard/h200.json");
  EXPECT_EQ(cuda.cpu_memory_budget, 96ll << 30);
  EXPECT_EQ(cuda.gpu_layers, 0);
  EXPECT_EQ(cuda.offload_ring_layers, 3);
  EXPECT_EQ(cuda.offload_cpu_threads, 12);
  EXPECT_EQ(cuda.offload_cpu_layers, 7);
}

// Without ApplyWorkerDefaults the unset offload fields keep the engine's
// defaults: an absent gpu_layers is not 0 (every layer in host memory).
TEST(WorkerConfigTest, EngineOptionsOfUnsetOffloadFields) {
  v1::WorkerConfig c;
  c.set_model_path("models/m.gguf");
  const engine::EngineOptions o = EngineOptionsFromConfig(c);
  EXPECT_EQ(o.cpu_memory_budget, 0);
  EXPECT_EQ(o.gpu_layers, -1);
  EXPECT_EQ(o.offload_ring_layers, 2);
  EXPECT_EQ(o.offload_cpu_threads, 0);
  EXPECT_EQ(o.offload_cpu_layers, -1);
}

// The offload fields from a YAML file, by proto name and lowerCamelCase.
TEST(WorkerConfigTest, OffloadFieldsFromYaml) {
  const std::vector<std::string> files = {
      "model_path: m.gguf\nbackend: cuda\n"
      "cuda: {cpu_memory_budget: 1GiB, gpu_layers: 0, offload_ring_layers: 3, "
      "offload_cpu_threads: 6, offload_cpu_layers: 4}\n",
      "model_path: m.gguf\nbackend: cuda\n"
      "cuda: {cpuMemoryBudget: 1GiB, gpuLayers: 0, offloadRingLayers: 3, offloadCpuThreads: 6, "
      "offloadCpuLayers: 4}\n",
  };
  for (const std::string& yaml : files) {
    SCOPED_TRACE(yaml);
    v1::WorkerConfig c;
    ASSERT_TRUE(ParseConfigText(yaml, "worker.yaml", &c).ok());
    ApplyWorkerDefaults(&c);
    ASSERT_TRUE(ValidateWorkerConfig(c).ok()) << ValidateWorkerConfig(c);
    const engine::EngineOptions o = EngineOptionsFromConfig(c);
    EXPECT_EQ(o.cpu_memory_budget, 1ll << 30);
    EXPECT_EQ(o.gpu_layers, 0);
    EXPECT_EQ(o.offload_ring_layers, 3);
    EXPECT_EQ(o.offload_cpu_threads, 6);
    EXPECT_EQ(o.offload_cpu_layers, 4);
  }
}

// scheduler.aging_interval from a YAML file: a duration, and 0s (present,
// unlike an absent field) switches aging off rather than taking the default.
TEST(WorkerConfigTest, AgingIntervalFromYaml) {
  const std::vector<std::pair<std::string, absl::Duration>> cases = {
      {"model_path: m.gguf\nscheduler: {aging_interval: 2.5s}\n", absl::Milliseconds(2500)},
      {"model_path: m.gguf\nscheduler: {aging_interval: 0s}\n", absl::ZeroDuration()},
      {"model_path: m.gguf\nscheduler: {max_num_seqs: 8}\n", absl::Seconds(10)},
  };
  for (const auto& [yaml, want] : cases) {
    SCOPED_TRACE(yaml);
    v1::WorkerConfig c;
    ASSERT_TRUE(ParseConfigText(yaml, "worker.yaml", &c).ok());
    ApplyWorkerDefaults(&c);
    ASSERT_TRUE(ValidateWorkerConfig(c).ok()) << ValidateWorkerConfig(c);
    EXPECT_EQ(EngineOptionsFromConfig(c).aging_interval, want);
  }
}

TEST(WorkerConfigTest, SyntheticModelsOnTheCudaBackend) {
  v1::WorkerConfig c = Defaults();
  c.set_backend("cuda");
  c.set_model_path("synthetic:llama3-70b:int4");
  EXPECT_TRUE(ValidateWorkerConfig(c).ok()) << ValidateWorkerConfig(c);
  EXPECT_EQ(EngineOptionsFromConfig(c).model_path, "synthetic:llama3-70b:int4");
  EXPECT_EQ(ServedModelName(c), "synthetic:llama3-70b:int4");
  c.set_backend("cpu");
  EXPECT_THAT(ValidateWorkerConfig(c).message(), HasSubstr("needs backend cuda"));
}

TEST(WorkerConfigTest, SchedulerSwitchesFromYaml) {
  struct Case {
    std::string yaml;
    bool fifo, async_scheduling;
  };
  for (const Case& want :
       std::vector<Case>{{"model_path: m.gguf\nscheduler: {fifo: true}\n", true, false},
                         {"model_path: m.gguf\nscheduler: {async_scheduling: true}\n", false, true},
                         {"model_path: m.gguf\n", false, false}}) {
    SCOPED_TRACE(want.yaml);
    v1::WorkerConfig c;
    ASSERT_TRUE(ParseConfigText(want.yaml, "worker.yaml", &c).ok());
    ApplyWorkerDefaults(&c);
    ASSERT_TRUE(ValidateWorkerConfig(c).ok()) << ValidateWorkerConfig(c);
    const engine::EngineOptions o = EngineOptionsFromConfig(c);
    EXPECT_EQ(o.fifo_scheduling, want.fifo);
    EXPECT_EQ(o.async_scheduling, want.async_scheduling);
  }
}

TEST(WorkerConfigTest, LongPrefillTokenThreshold) {
  v1::WorkerConfig c;
  ASSERT_TRUE(
      ParseConfigText("model_path: m.gguf\nscheduler: {long_prefill_token_threshold: 256}\n",
                      "worker.yaml", &c)
          .ok());
  ApplyWorkerDefaults(&c);
  ASSERT_TRUE(ValidateWorkerConfig(c).ok()) << ValidateWorkerConfig(c);
  EXPECT_EQ(EngineOptionsFromConfig(c).long_prefill_token_threshold, 256);
  c.mutable_scheduler()->set_long_prefill_token_threshold(-1);
  EXPECT_THAT(ValidateWorkerConfig(c).message(),
              HasSubstr("scheduler.long_prefill_token_threshold"));
}

TEST(WorkerConfigTest, ServedModelName) {
  v1::WorkerConfig c;
  c.set_model_path("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  EXPECT_EQ(ServedModelName(c), "SmolLM2-135M-Instruct.Q4_1");
  c.set_model_path("/ckpt/Qwen2-7B/");
  EXPECT_EQ(ServedModelName(c), "Qwen2-7B");
  c.set_model_name("smol");
  EXPECT_EQ(ServedModelName(c), "smol");
}

}  // namespace
}  // namespace onecard::services
