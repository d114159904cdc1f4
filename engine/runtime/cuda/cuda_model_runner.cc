// CudaRunnerImpl: creation (plan, arenas, weights, the tuning cache file), a step's host flow
// (check, pack, one copy in, graph or eager launch, one copy out) and the
// CUDA graphs of decode buckets. The kernels of a step: cuda_forward.cc.
// Tested by tests/gpu/cuda_model_runner_test.cc.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "engine/common/host_info.h"
#include "engine/common/log.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/cuda_check.h"
#include "engine/kernels/paged_attention_split.h"
#include "engine/kernels/rope.h"
#include "engine/model/synthetic_shapes.h"
#include "engine/runtime/cuda/cpu_span.h"
#include "engine/runtime/cuda/cuda_runner_impl.h"

namespace onecard::engine {
namespace {

double MicrosSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<int32_t> Buckets(int32_t max_num_seqs) {
  std::vector<int32_t> out;
  for (int32_t b : {1, 2, 3, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512}) {
    if (b < max_num_seqs) out.push_back(b);
  }
  out.push_back(max_num_seqs);
  return out;
}

// What a captured step runs, for the plan printout: "<n> kernels (<n> from
// libraries), <n> memsets, <n> other nodes; <n> of <n> edges programmatic".
// A library kernel (cuBLAS) is one whose name the runtime does not resolve
// or that is not in namespace onecard.
std::string DescribeGraph(cudaGraph_t graph) {
  size_t count = 0, edges = 0;
  if (cudaGraphGetNodes(graph, nullptr, &count) != cudaSuccess ||
      cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &edges) != cudaSuccess) {
    return "(not described)";
  }
  std::vector<cudaGraphNode_t> nodes(count), from(edges), to(edges);
  std::vector<cudaGraphEdgeData> data(edges);
  if (cudaGraphGetNodes(graph, nodes.data(), &count) != cudaSuccess ||
      cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &edges) != cudaSuccess) {
    return "(not described)";
  }
  int kernels = 0, library = 0, memsets = 0, other = 0, programmatic = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    cudaGraphNodeGetType(node, &type);
    if (type != cudaGraphNodeTypeKernel) {
      ++(type == cudaGraphNodeTypeMemset ? memsets : other);
      continue;
    }
    ++kernels;
    cudaKernelNodeParams params{};
    const char* name = nullptr;
    if (cudaGraphKernelNodeGetParams(node, &params) != cudaSuccess ||
        cudaFuncGetName(&name, params.func) != cudaSuccess || name == nullptr ||
        std::string_view(name).find("7onecard") == std::string_view::npos) {
      (void)cudaGetLastError();
      ++library;
    }
  }
  for (const cudaGraphEdgeData& e : data) {
    programmatic += e.type == cudaGraphDependencyTypeProgrammatic ? 1 : 0;
  }
  return absl::StrCat(kernels, " kernels (", library, " from libraries), ", memsets, " memsets, ",
                      other, " other nodes; ", programmatic, " of ", edges, " edges programmatic");
}

}  // namespace

MemoryPlanInput CudaMemoryPlanInput(const ModelConfig& config, const ModelWeightsSpec& spec,
                                    const CudaRunnerOptions& options, int64_t free_bytes,
                                    int32_t num_sms) {
  MemoryPlanInput in;
  in.config = config;
  in.weights = spec;
  in.budget_bytes = options.gpu_memory_budget > 0 ? options.gpu_memory_budget : free_bytes;
  in.max_context = options.max_context;
  in.max_num_seqs = options.max_num_seqs;
  in.max_batched_tokens = options.max_batched_tokens;
  in.kv_block_size = options.kv_block_size;
  in.num_kv_blocks = options.num_kv_blocks;
  in.kv_cache_dtype = options.kv_cache_dtype;
  in.num_sms = num_sms;
  return in;
}

absl::StatusOr<std::unique_ptr<CudaRunnerImpl>> CudaRunnerImpl::Create(
    const ModelConfig& config, const ModelWeightsSpec& spec, const CudaRunnerOptions& options) {
  if (options.gemm_splits < 0 || options.gemm_splits > kMaxGemmSplits) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaRunnerOptions.gemm_splits = ", options.gemm_splits, ": must be 0 to ",
                     kMaxGemmSplits));
  }
  if (!PagedAttentionSupportsHeadDim(static_cast<int32_t>(config.head_dim))) {
    return absl::UnimplementedError(
        absl::StrCat("cuda runner: ", config.name, " has head_dim ", config.head_dim,
                     ", which the CUDA attention kernels do not take (16, 24, 32, 64, 96 or 128)"));
  }
  if (options.kv_cache_dtype == KvCacheDtype::kFp8E4m3 && config.head_dim % 16 != 0) {
    return absl::UnimplementedError(
        absl::StrCat("kv_cache_dtype: an fp8 KV cache needs head_dim a multiple of 16 (16-byte "
                     "rows of codes); ",
                     config.name, " has head_dim ", config.head_dim, "; use bf16"));
  }
  std::unique_ptr<CudaRunnerImpl> r(new CudaRunnerImpl());
  r->config_ = config;
  r->spec_ = spec;
  r->options_ = options;
  ASSIGN_OR_RETURN(r->ctx_, DeviceContext::Create(options.device));
  RETURN_IF_ERROR(r->PlanDevice());
  if (options.print_plan) {
    std::fprintf(stderr, "%s\n%s", r->plan_.ToString().c_str(),
                 r->placement_.has_value() ? r->placement_->ToString().c_str() : "");
  }
  RETURN_IF_ERROR(r->Allocate());
  r->buckets_ = Buckets(options.max_num_seqs);
  return r;
}

CudaRunnerImpl::~CudaRunnerImpl() {
  if (step_start_ != nullptr) cudaEventDestroy(step_start_);
  for (cudaEvent_t e : step_ends_) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  if (!launched_.empty()) cudaStreamSynchronize(ctx_->stream());  // no copy into freed buffers
  for (int i = 0; i < 4; ++i) {
    if (ahead_starts_[i] != nullptr) cudaEventDestroy(ahead_starts_[i]);
    if (ahead_ends_[i] != nullptr) cudaEventDestroy(ahead_ends_[i]);
  }
  if (cpu_step_done_ != nullptr) cudaEventDestroy(cpu_step_done_);
  for (auto& [key, graph] : graphs_) {
    if (graph.exec != nullptr) cudaGraphExecDestroy(graph.exec);
  }
}

absl::Status CudaRunnerImpl::PlanDevice() {
  MemoryPlanInput in =
      CudaMemoryPlanInput(config_, spec_, options_, ctx_->free_bytes_at_start(), ctx_->num_sms());
  const int64_t num_layers = config_.num_layers;
  const bool offload = options_.cpu_memory_budget > 0;
  const bool layers_forced_off = options_.gpu_layers >= 0 && options_.gpu_layers < num_layers;
  if (!offload && layers_forced_off) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gpu_layers = ", options_.gpu_layers, " leaves layers of ", config_.name, " (", num_layers,
        ") off the card: needs a cpu_memory_budget (--cpu-memory-budget)"));
  }
  if (options_.offload_ring_layers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("offload_ring_layers = ", options_.offload_ring_layers, ": must be >= 1"));
  }
  absl::StatusOr<MemoryPlan> whole = PlanMemory(in);
  if (!offload || (whole.ok() && !layers_forced_off) ||
      (!whole.ok() && !absl::IsResourceExhausted(whole.status()))) {
    ASSIGN_OR_RETURN(plan_, std::move(whole));
    return absl::OkStatus();
  }
  PlacementInput place;
  place.config = config_;
  place.weights = spec_;
  ASSIGN_OR_RETURN(place.device_weight_bytes, DeviceBytesForWeights(in));
  place.host_weight_bytes = options_.cpu_memory_budget;
  place.ring_layers = options_.offload_ring_layers;
  place.expected_batch = options_.max_num_seqs;
  place.max_device_layers = options_.gpu_layers;
  place.cpu_layers = options_.offload_cpu_layers;
  ASSIGN_OR_RETURN(place.rates, MeasureOffloadRates(ctx_->cublas(), ctx_->stream()));
  if (CpuCanCompute()) {
    ThreadPool pool(CpuThreads());
    RETURN_IF_ERROR(MeasureCpuRates(pool, config_.hidden_size, ctx_->stream(), &place.rates));
  }
  ASSIGN_OR_RETURN(placement_, PlanPlacement(place));
  // Pinned pages cannot be swapped: more than the host has free would take
  // the machine down rather than fail.
  const int64_t host_bytes =
      placement_->streamed_bytes + placement_->cpu_bytes + placement_->host_embedding_bytes;
  const int64_t available = HostAvailableMemoryBytes();
  if (available > 0 && host_bytes > available) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: %.2f GiB of layers would live in host memory (--cpu-memory-budget %.2f GiB), but "
        "only %.2f GiB of the host's memory is available; free some or raise "
        "--gpu-memory-budget",
        config_.name, static_cast<double>(host_bytes) / kGiB,
        static_cast<double>(options_.cpu_memory_budget) / kGiB,
        static_cast<double>(available) / kGiB));
  }
  // The KV cache: num_kv_blocks, or what the budget holds beside the card's
  // weights (at least the one sequence DeviceBytesForWeights counted).
  in.device_weight_bytes = placement_->device_bytes + placement_->ring_bytes;
  in.offloaded_weight_bytes = host_bytes;
  ASSIGN_OR_RETURN(plan_, PlanMemory(in));
  return absl::OkStatus();
}

std::optional<WeightHomes> CudaRunnerImpl::Homes() {
  if (weight_stream_ == nullptr && host_embedding_ == nullptr) return std::nullopt;
  WeightHomes homes;
  if (host_embedding_ != nullptr) homes.embedding = host_embedding_->data();
  if (weight_stream_ == nullptr) return homes;
  WeightStream* stream = weight_stream_.get();
  cudaStream_t compute = ctx_->stream();
  homes.layer_arena = [stream](int64_t layer) { return stream->LayerArena(layer); };
  homes.filled = [stream, compute](int64_t layer) { return stream->StoreLayer(layer, compute); };
  return homes;
}

absl::Status CudaRunnerImpl::Allocate() {
  const WorkspaceSizes& w = plan_.workspace;
  ASSIGN_OR_RETURN(weight_arena_, DeviceArena::Create(plan_.weight_bytes, "weights"));
  if (placement_.has_value() && placement_->offloads()) {
    std::vector<int64_t> layer_bytes(config_.num_layers);
    for (int64_t l = 0; l < config_.num_layers; ++l) {
      layer_bytes[l] = LayerWeightBytes(config_, spec_, l);
    }
    ASSIGN_OR_RETURN(weight_stream_,
                     WeightStream::Create(placement_->layers, layer_bytes,
                                          options_.offload_ring_layers, weight_arena_.get()));
  }
  if (placement_.has_value() && placement_->host_embedding_bytes > 0) {
    absl::StatusOr<std::unique_ptr<PinnedBuffer>> table =
        PinnedBuffer::Create(placement_->host_embedding_bytes);
    if (!table.ok()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          config_.name, ": pinning the token embeddings in host memory: ", table.status().message(),
          "; lower --cpu-memory-budget or raise --gpu-memory-budget"));
    }
    host_embedding_ = *std::move(table);
  }
  ASSIGN_OR_RETURN(workspace_arena_, DeviceArena::Create(w.Total(), "workspace"));
  ASSIGN_OR_RETURN(kv_arena_, DeviceArena::Create(plan_.kv_bytes(), "kv cache"));
  DeviceArena& a = *workspace_arena_;
  ASSIGN_OR_RETURN(buf_.residual, a.Take(w.residual));
  ASSIGN_OR_RETURN(buf_.normed, a.Take(w.normed));
  ASSIGN_OR_RETURN(buf_.qkv, a.Take(w.qkv));
  ASSIGN_OR_RETURN(buf_.attn_out, a.Take(w.attn_out));
  ASSIGN_OR_RETURN(buf_.gate_up, a.Take(w.gate_up));
  ASSIGN_OR_RETURN(buf_.act, a.Take(w.act));
  ASSIGN_OR_RETURN(buf_.rows, a.Take(w.rows));
  ASSIGN_OR_RETURN(void* logits, a.Take(w.logits));
  buf_.logits = static_cast<float*>(logits);
  ASSIGN_OR_RETURN(buf_.attn_split, a.Take(w.attn_split));
  ASSIGN_OR_RETURN(void* partials, a.Take(w.gemm_partials));
  buf_.gemm_partials = static_cast<float*>(partials);
  ASSIGN_OR_RETURN(buf_.sample, a.Take(w.sample));
  ASSIGN_OR_RETURN(void* out_tokens, a.Take(w.out_tokens));
  buf_.out_tokens = static_cast<int32_t*>(out_tokens);
  ASSIGN_OR_RETURN(void* meta, a.Take(w.meta));
  buf_.meta = static_cast<char*>(meta);
  ASSIGN_OR_RETURN(void* rope, a.Take(w.rope));
  buf_.inv_freq = static_cast<float*>(rope);
  ASSIGN_OR_RETURN(buf_.cublas, a.Take(w.cublas));
  if (w.int4_gemm > 0) {
    ASSIGN_OR_RETURN(buf_.int4_gemm, a.Take(w.int4_gemm));
    ASSIGN_OR_RETURN(void* sums, a.Take(w.int4_norm_fold));
    buf_.norm_sum_sq = static_cast<float*>(sums);
    if (w.int4_gather > 0) {
      ASSIGN_OR_RETURN(buf_.int4_gather, a.Take(w.int4_gather));
    }
  }
  if (w.dequant > 0) {
    ASSIGN_OR_RETURN(buf_.dequant, a.Take(w.dequant));
  }
  if (w.fp8_gemm > 0) {
    ASSIGN_OR_RETURN(buf_.fp8_gemm, a.Take(w.fp8_gemm));
  }
  if (w.kv_scales > 0) {
    ASSIGN_OR_RETURN(void* scales, a.Take(w.kv_scales));
    const int64_t layer_heads = config_.num_layers * config_.num_kv_heads;
    kv_k_scale_ = static_cast<float*>(scales);
    kv_v_scale_ = kv_k_scale_ + layer_heads;
    kv_amax_ = kv_v_scale_ + layer_heads;
  }
  RETURN_IF_ERROR(ctx_->SetCublasWorkspace(buf_.cublas, w.cublas));
  if (w.fp8_gemm > 0) {  // cuBLASLt's FP8 products share the cuBLAS workspace (one stream)
    ASSIGN_OR_RETURN(fp8_matmul_, Fp8Matmul::Create(buf_.cublas, w.cublas));
  }

  RETURN_IF_ERROR(TakeKvPools(plan_.num_kv_blocks));
  cudaStream_t stream = ctx_->stream();
  // Zero sampling counters; a defined attention workspace.
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buf_.sample, 0, w.sample, stream));
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buf_.attn_split, 0, w.attn_split, stream));
  if (buf_.int4_gemm != nullptr) {  // its arrival counters start at zero
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buf_.int4_gemm, 0, w.int4_gemm, stream));
  }
  const std::vector<float> inv_freq =
      RopeInvFreq(static_cast<int32_t>(config_.head_dim), config_.rope_theta, config_.rope_scaling);
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buf_.inv_freq, inv_freq.data(), inv_freq.size() * 4,
                                       cudaMemcpyHostToDevice, stream));
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&step_start_));
  for (cudaEvent_t& e : step_ends_) CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
  for (cudaEvent_t& e : ahead_starts_) CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
  for (cudaEvent_t& e : ahead_ends_) CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
  ASSIGN_OR_RETURN(meta_host_, PinnedBuffer::Create(plan_.step_layout.size_bytes));
  ASSIGN_OR_RETURN(out_host_, PinnedBuffer::Create(w.logits));
  ASSIGN_OR_RETURN(meta_host_ahead_, PinnedBuffer::Create(plan_.step_layout.size_bytes));
  ASSIGN_OR_RETURN(out_host_ahead_, PinnedBuffer::Create(int64_t{plan_.max_num_seqs} * 4));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

absl::Status CudaRunnerImpl::TakeKvPools(int64_t num_blocks) {
  kv_layout_ = KvLayout{.num_blocks = static_cast<int32_t>(num_blocks),
                        .block_size = plan_.kv_block_size,
                        .num_kv_heads = static_cast<int32_t>(config_.num_kv_heads),
                        .head_dim = static_cast<int32_t>(config_.head_dim)};
  plan_.num_kv_blocks = num_blocks;
  kv_arena_->Reset();
  k_cache_.clear();
  v_cache_.clear();
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const int64_t element_bytes = LayerKvFp8(l) ? 1 : 2;  // FP8 codes or BF16
    ASSIGN_OR_RETURN(void* k, kv_arena_->Take(kv_layout_.PoolElements() * element_bytes));
    ASSIGN_OR_RETURN(void* v, kv_arena_->Take(kv_layout_.PoolElements() * element_bytes));
    k_cache_.push_back(k);
    v_cache_.push_back(v);
  }
  if (kv_arena_->used_bytes() > 0) {
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(k_cache_[0], 0, kv_arena_->used_bytes(), ctx_->stream()));
  }
  return absl::OkStatus();
}

absl::Status CudaRunnerImpl::LoadWeights(HostTensorSource& source) {
  const std::optional<WeightHomes> homes = Homes();
  ASSIGN_OR_RETURN(weights_, engine::LoadWeights(config_, spec_, source, weight_arena_.get(),
                                                 homes.has_value() ? &*homes : nullptr));
  return absl::OkStatus();
}

absl::Status CudaRunnerImpl::LoadRandomWeights(uint64_t seed) {
  const std::optional<WeightHomes> homes = Homes();
  ASSIGN_OR_RETURN(weights_, RandomWeights(config_, spec_, seed, weight_arena_.get(),
                                           ctx_->stream(), homes.has_value() ? &*homes : nullptr));
  return absl::OkStatus();
}

absl::Status CudaRunnerImpl::Forward(const BatchInput& batch, std::vector<float>* logits) {
  return Run(batch, nullptr, logits, nullptr);
}

absl::Status CudaRunnerImpl::ForwardSample(const BatchInput& batch,
                                           std::span<const SampleRowParams> rows,
                                           std::span<const std::span<const int32_t>> histories,
                                           std::vector<int32_t>* tokens) {
  const SampleInputs sample{rows, histories};
  return Run(batch, &sample, nullptr, tokens);
}

absl::Status CudaRunnerImpl::Launch(const StepShape& shape) {
  if (!shape.graph) return EnqueueStep(shape);
  Graph& g = graphs_[{shape.seqs, (shape.sample ? 1 : 0) | (shape.has_history ? 2 : 0)}];
  if (!g.warm) {  // first use: eager, so lazy module loads and attributes happen outside capture
    g.warm = true;
    return EnqueueStep(shape);
  }
  cudaStream_t stream = ctx_->stream();
  if (g.exec == nullptr) {
    cudaGraph_t graph = nullptr;
    CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const absl::Status enqueued = EnqueueStep(shape);
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    if (!enqueued.ok()) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      return enqueued;
    }
    CUDA_RETURN_IF_ERROR(ended);
    if (options_.print_plan) {
      std::fprintf(stderr, "CUDA graph of a %d-sequence step: %s\n", shape.seqs,
                   DescribeGraph(graph).c_str());
    }
    const cudaError_t made = cudaGraphInstantiate(&g.exec, graph, 0);
    cudaGraphDestroy(graph);
    CUDA_RETURN_IF_ERROR(made);
  }
  CUDA_RETURN_IF_ERROR(cudaGraphLaunch(g.exec, stream));
  return absl::OkStatus();
}

absl::Status CudaRunnerImpl::Run(const BatchInput& batch, const SampleInputs* sample,
                                 std::vector<float>* logits, std::vector<int32_t>* tokens) {
  if (!launched_.empty()) {
    return absl::FailedPreconditionError(
        "cuda runner: Forward or ForwardSample with a launched step not waited for");
  }
  launch_chain_ = false;  // buf_.out_tokens no longer holds the last launch's tokens
  last_launch_seqs_.clear();
  const auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(CheckBatch(batch, sample));
  const StepShape shape = ShapeStep(batch, sample);
  const int64_t bytes = PackStep(batch, sample, shape, meta_host_->data());
  cudaStream_t stream = ctx_->stream();
  step_times_.reset();
  const bool measure_gap = previous_end_;  // the last step ended well, its end recorded
  previous_end_ = false;
  CUDA_RETURN_IF_ERROR(cudaEventRecord(step_start_, stream));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(buf_.meta, meta_host_->data(), bytes, cudaMemcpyHostToDevice, stream));
  timing_ = CudaStepTiming{.graph = shape.graph};
  cpu_shape_ = shape;
  cpu_status_ = absl::OkStatus();
  cpu_us_ = 0;
  if (shape.all_logits) {
    RETURN_IF_ERROR(RunAllLogits(shape, logits));  // no end event: the next step has no gap
    RETURN_IF_ERROR(FinishCpuStep(shape));
    RETURN_IF_ERROR(TakeStreamTimes());
    timing_.total_us = MicrosSince(t0);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(Launch(shape));
  const int64_t rows = std::count_if(batch.chunks.begin(), batch.chunks.end(),
                                     [](const SequenceChunk& c) { return c.want_logits; });
  const int64_t out_bytes = sample != nullptr ? rows * 4 : rows * config_.vocab_size * 4;
  const void* src = sample != nullptr ? static_cast<const void*>(buf_.out_tokens) : buf_.logits;
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(out_host_->data(), src, out_bytes, cudaMemcpyDeviceToHost, stream));
  cudaEvent_t step_end = step_ends_[steps_run_ % 2];
  CUDA_RETURN_IF_ERROR(cudaEventRecord(step_end, stream));
  timing_.enqueue_us = MicrosSince(t0);
  const auto wait_start = std::chrono::steady_clock::now();
  if (CpuComputes(shape)) {
    // The CPU's host nodes want every core: wait asleep, not spinning.
    CUDA_RETURN_IF_ERROR(cudaEventRecord(cpu_step_done_, stream));
    CUDA_RETURN_IF_ERROR(cudaEventSynchronize(cpu_step_done_));
  }
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  const double wait_us = MicrosSince(wait_start);
  RETURN_IF_ERROR(FinishCpuStep(shape));
  timing_.cpu_us = cpu_us_;
  if (cpu_layers_ != nullptr) timing_.cpu_linear_us = cpu_layers_->TakeLinearMicros();
  if (options_.time_steps) {
    float gpu_ms = 0.0f;
    CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&gpu_ms, step_start_, step_end));
    timing_.gpu_us = 1e3 * gpu_ms;
  }
  RETURN_IF_ERROR(TakeStreamTimes());
  std::optional<absl::Duration> device_gap;
  if (measure_gap) {  // a failed query only loses the figure, not the step
    float gap_ms = 0.0f;
    if (cudaEventElapsedTime(&gap_ms, step_ends_[(steps_run_ + 1) % 2], step_start_) ==
        cudaSuccess) {
      device_gap = absl::Microseconds(static_cast<int64_t>(1e3 * gap_ms));
    }
  }
  ++steps_run_;
  previous_end_ = true;
  if (sample != nullptr) {
    const int32_t* t = reinterpret_cast<const int32_t*>(out_host_->data());
    tokens->assign(t, t + rows);
  } else {
    const float* f = reinterpret_cast<const float*>(out_host_->data());
    logits->assign(f, f + rows * config_.vocab_size);
  }
  timing_.total_us = MicrosSince(t0);
  step_times_ =
      RunnerStepTimes{.host = absl::Microseconds(static_cast<int64_t>(timing_.total_us - wait_us)),
                      .device_gap = device_gap};
  return absl::OkStatus();
}

absl::Status CudaRunnerImpl::TakeStreamTimes() {
  if (weight_stream_ == nullptr || !options_.time_steps) return absl::OkStatus();
  ASSIGN_OR_RETURN(const WeightStream::CopyTimes t, weight_stream_->TakeCopyTimes());
  timing_.stream_bytes = t.bytes;
  timing_.stream_busy_us = t.busy_us;
  timing_.stream_span_us = t.span_us;
  return absl::OkStatus();
}

absl::Status CudaRunnerImpl::RunAllLogits(const StepShape& shape, std::vector<float>* logits) {
  RETURN_IF_ERROR(EnqueueStep(shape));  // the layers; no logits rows
  cudaStream_t stream = ctx_->stream();
  const int64_t vocab = config_.vocab_size;
  logits->resize(static_cast<int64_t>(shape.tokens) * vocab);
  for (int32_t r0 = 0; r0 < shape.tokens; r0 += plan_.max_num_seqs) {
    const int32_t n = std::min(plan_.max_num_seqs, shape.tokens - r0);
    const char* x = static_cast<const char*>(buf_.residual) + int64_t{r0} * config_.hidden_size * 2;
    RETURN_IF_ERROR(EnqueueLogits(shape, x, n));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out_host_->data(), buf_.logits, int64_t{n} * vocab * 4,
                                         cudaMemcpyDeviceToHost, stream));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    std::memcpy(logits->data() + int64_t{r0} * vocab, out_host_->data(), int64_t{n} * vocab * 4);
  }
  return absl::OkStatus();
}

std::string CudaRunnerImpl::LoadTuningCache() {
  const std::string& path = options_.tuning_cache;
  if (path.empty()) return "";
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";  // not made yet: written after tuning
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<BlasTuner::Loaded> loaded = tuner_->Deserialize(text.str());
  if (!loaded.ok()) {
    Log(LogLevel::kWarn, "cuda", "tuning cache %s: %s; tuning afresh", path,
        loaded.status().message());
    return "";
  }
  for (const std::string& why : loaded->left_out) {
    Log(LogLevel::kWarn, "cuda", "tuning cache %s: %s; timing it afresh", path, why);
  }
  return absl::StrFormat(
      "tuning cache %s: %d products loaded, %d cuBLASLt configurations rebuilt (%d word for "
      "word as saved), %d left to time\n",
      path, loaded->products, loaded->rebuilt, loaded->rebuilt_identical, loaded->left_out.size());
}

void CudaRunnerImpl::SaveTuningCache() const {
  const std::string& path = options_.tuning_cache;
  if (path.empty()) return;
  // Written beside, then renamed over: a reader never sees half a file, and
  // workers sharing the file (one volume for several pods) never write into
  // the same partial file.
  const std::string partial = absl::StrCat(path, ".partial.", getpid());
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out << tuner_->Serialize();
    if (!out.good()) {
      Log(LogLevel::kWarn, "cuda", "tuning cache %s: cannot write %s", path, partial);
      return;
    }
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    Log(LogLevel::kWarn, "cuda", "tuning cache %s: cannot rename %s over it: %s", path, partial,
        std::strerror(errno));
  }
}

absl::StatusOr<std::unique_ptr<CudaModelRunner>> CreateRandomCudaModelRunner(
    const ModelConfig& config, const CudaRunnerOptions& options) {
  const ModelWeightsSpec spec = ModelWeightsSpec::Uniform(config, options.synthetic_weights);
  ASSIGN_OR_RETURN(std::unique_ptr<CudaRunnerImpl> r,
                   CudaRunnerImpl::Create(config, spec, options));
  RETURN_IF_ERROR(r->LoadRandomWeights(options.synthetic_seed));
  RETURN_IF_ERROR(r->PrepareCpuLayers());
  RETURN_IF_ERROR(r->PrepareKvScales());
  RETURN_IF_ERROR(r->TuneGemms());
  return std::unique_ptr<CudaModelRunner>(std::move(r));
}

absl::StatusOr<std::unique_ptr<CudaModelRunner>> CreateSyntheticCudaModelRunner(
    std::string_view shape, const CudaRunnerOptions& options) {
  ASSIGN_OR_RETURN(ModelConfig config, SyntheticModelConfig(shape));
  return CreateRandomCudaModelRunner(config, options);
}

absl::StatusOr<std::unique_ptr<CudaModelRunner>> CreateCudaModelRunnerFromSource(
    const ModelConfig& config, const ModelWeightsSpec& spec, HostTensorSource& source,
    const CudaRunnerOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<CudaRunnerImpl> r,
                   CudaRunnerImpl::Create(config, spec, options));
  RETURN_IF_ERROR(r->LoadWeights(source));
  RETURN_IF_ERROR(r->PrepareCpuLayers());
  RETURN_IF_ERROR(r->PrepareKvScales());
  RETURN_IF_ERROR(r->TuneGemms());
  return std::unique_ptr<CudaModelRunner>(std::move(r));
}

absl::StatusOr<std::unique_ptr<CudaModelRunner>> CreateCudaModelRunner(
    const Checkpoint& checkpoint, const CudaRunnerOptions& options) {
  RETURN_IF_ERROR(checkpoint.config.Validate());
  CudaRunnerOptions with_scales = options;
  if (options.kv_cache_dtype == KvCacheDtype::kFp8E4m3 && !options.kv_scales.has_value()) {
    ASSIGN_OR_RETURN(with_scales.kv_scales, ReadCheckpointKvScales(checkpoint));
    if (!with_scales.kv_scales.has_value() && options.kv_calibration_prompts.empty()) {
      ASSIGN_OR_RETURN(with_scales.kv_calibration_prompts,
                       KvCalibrationPrompts(&checkpoint, checkpoint.config));
    }
  }
  if (checkpoint.format == CheckpointFormat::kSynthetic) {
    absl::StatusOr<ProjectionSpec> format = ParseProjectionSpec(checkpoint.synthetic_weights);
    if (!format.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model path ", checkpoint.path, ": ", format.status().message()));
    }
    with_scales.synthetic_weights = *format;
    return CreateRandomCudaModelRunner(checkpoint.config, with_scales);
  }
  ASSIGN_OR_RETURN(const ModelWeightsSpec spec,
                   CheckpointWeightsSpec(checkpoint, /*all_bf16=*/!options.keep_quantized));
  std::unique_ptr<HostTensorSource> source = CheckpointTensorSource(checkpoint);
  return CreateCudaModelRunnerFromSource(checkpoint.config, spec, *source, with_scales);
}

}  // namespace onecard::engine
