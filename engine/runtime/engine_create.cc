// Engine::Create: opens the checkpoint, builds its tokenizer and the backend
// runner (OpenTokenizer: tokenizer.h; CreateModelRunner: engine.h), then
// hands them to CreateEngine (engine_impl.h).
// Tested by tests/engine/runtime/engine_cpu_test.cc (SmolLM2 on the cpu
// backend) and engine_impl_test.cc (bad paths and backends).
#include "absl/strings/str_cat.h"
#include "engine/common/log.h"
#include "engine/common/status_macros.h"
#include "engine/model/checkpoint.h"
#include "engine/runtime/cpu/cpu_model_runner.h"
#include "engine/runtime/engine_impl.h"
#if defined(ONECARD_HAVE_CUDA)
#include "engine/runtime/cuda/cuda_model_runner.h"
#endif

namespace onecard::engine {

absl::StatusOr<std::unique_ptr<ModelRunner>> CreateModelRunner(const Checkpoint& checkpoint,
                                                               const EngineOptions& options) {
  if (options.backend == "cpu") {
    return CreateCpuModelRunner(checkpoint, {.num_threads = options.num_threads,
                                             .kv_block_size = options.kv_block_size,
                                             .num_kv_blocks = options.num_kv_blocks,
                                             .kv_cache_bytes = options.kv_cache_bytes,
                                             .kv_cache_dtype = options.kv_cache_dtype,
                                             .weight_format = options.cpu_weight_format});
  }
  if (options.backend == "cuda") {
#if defined(ONECARD_HAVE_CUDA)
    CudaRunnerOptions cuda;
    cuda.gpu_memory_budget = options.gpu_memory_budget;
    cuda.kv_block_size = options.kv_block_size;
    cuda.num_kv_blocks = options.num_kv_blocks;
    cuda.max_context = options.max_context;
    cuda.max_num_seqs = options.max_num_seqs;
    cuda.max_batched_tokens = options.max_batched_tokens;
    cuda.tune_gemms = options.tune_gemms;
    cuda.tuning_cache = options.tuning_cache;
    cuda.cpu_memory_budget = options.cpu_memory_budget;
    cuda.offload_ring_layers = options.offload_ring_layers;
    cuda.gpu_layers = options.gpu_layers;
    cuda.offload_cpu_threads = options.offload_cpu_threads;
    cuda.offload_cpu_layers = options.offload_cpu_layers;
    cuda.fp8_compute = options.fp8_compute;
    cuda.kv_cache_dtype = options.kv_cache_dtype;
    return CreateCudaModelRunner(checkpoint, cuda);
#else
    return absl::UnimplementedError(
        "EngineOptions.backend: \"cuda\" is not in this build (built without CUDA); "
        "supported backends: cpu");
#endif
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "EngineOptions.backend: unknown \"", options.backend, "\"; supported backends: cpu, cuda"));
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  const absl::Time start = absl::Now();
  EngineParts parts;
  parts.checkpoint = std::make_unique<Checkpoint>();
  ASSIGN_OR_RETURN(*parts.checkpoint, OpenCheckpoint(options.model_path));
  ASSIGN_OR_RETURN(parts.tokenizer, OpenTokenizer(*parts.checkpoint));
  ASSIGN_OR_RETURN(parts.runner, CreateModelRunner(*parts.checkpoint, options));
  Log(LogLevel::kInfo, "engine", "loaded %s on %s in %.2f s (%d KV blocks of %d)",
      options.model_path, parts.runner->name(), absl::ToDoubleSeconds(absl::Now() - start),
      parts.runner->kv_layout().num_blocks, parts.runner->kv_layout().block_size);
  return CreateEngine(std::move(parts), options);
}

}  // namespace onecard::engine
