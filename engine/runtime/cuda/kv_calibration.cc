// CudaRunnerImpl's FP8 KV scales (kv_scales.h): from the options (a
// checkpoint's), or calibrated. Calibration runs the calibration prompts as
// one prefill step (eager, in blocks 0.. of the pool, free before any
// request) with calibrating_ set: after each layer's RopeKvWrite, KvAmax
// takes the step's K / V maxima a kv head, the host turns them into the
// layer's scales (KvScaleFromAmax, as the cpu backend does) and uploads
// them, and KvCacheWrite rewrites the step's K / V into the pools with them,
// so the layer's attention and every later layer see the final scales.
// Tested by tests/gpu/cuda_model_runner_fp8_kv_test.cc.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/log.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/cuda_check.h"
#include "engine/kernels/kv_amax.h"
#include "engine/kernels/kv_cache_write.h"
#include "engine/runtime/cuda/cuda_runner_impl.h"

namespace onecard::engine {
namespace {

// The calibration prompts that fit one step of the plan: at most
// max_num_seqs prompts, max_batched_tokens tokens, each at least 2 tokens
// (a step of one-token chunks would be a decode step) and inside the context
// and the pool.
std::vector<std::vector<int32_t>> FitPrompts(std::vector<std::vector<int32_t>> prompts,
                                             const MemoryPlan& plan, const KvLayout& kv) {
  std::vector<std::vector<int32_t>> out;
  int64_t tokens = 0, blocks = 0;
  for (std::vector<int32_t>& p : prompts) {
    if (static_cast<int64_t>(out.size()) == plan.max_num_seqs) break;
    p.resize(std::min<size_t>(
        p.size(), std::min<int64_t>(plan.max_context, plan.max_batched_tokens - tokens)));
    const int64_t need = (static_cast<int64_t>(p.size()) + kv.block_size - 1) / kv.block_size;
    if (p.size() < 2 || blocks + need > kv.num_blocks) break;
    tokens += static_cast<int64_t>(p.size());
    blocks += need;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

absl::Status CudaRunnerImpl::PrepareKvScales() {
  if (kv_k_scale_ == nullptr) return absl::OkStatus();
  const int64_t layers = config_.num_layers;
  const int64_t heads = config_.num_kv_heads;
  cudaStream_t stream = ctx_->stream();
  if (options_.kv_scales.has_value()) {
    const KvScales& s = *options_.kv_scales;
    if (s.num_layers != layers || s.num_kv_heads != heads ||
        static_cast<int64_t>(s.k.size()) != layers * heads ||
        static_cast<int64_t>(s.v.size()) != layers * heads) {
      return absl::InvalidArgumentError(
          absl::StrCat("CudaRunnerOptions.kv_scales: ", s.num_layers, " layers x ", s.num_kv_heads,
                       " kv heads (", s.k.size(), " K and ", s.v.size(),
                       " V scales) for a model of ", layers, " layers x ", heads, " kv heads"));
    }
    kv_scales_ = s;
  } else {
    kv_scales_ = KvScales{.num_layers = layers,
                          .num_kv_heads = heads,
                          .k = std::vector<float>(layers * heads, 1.0f),
                          .v = std::vector<float>(layers * heads, 1.0f)};
    std::vector<std::vector<int32_t>> prompts = options_.kv_calibration_prompts;
    if (prompts.empty()) {
      ASSIGN_OR_RETURN(prompts, KvCalibrationPrompts(nullptr, config_));
    }
    prompts = FitPrompts(std::move(prompts), plan_, kv_layout_);
    if (prompts.empty()) {
      return absl::FailedPreconditionError(
          "cuda runner: no calibration prompt of 2 tokens or more fits a step of the plan for "
          "the FP8 KV cache's scales; give them (kv_scales) or a larger plan");
    }
    std::vector<std::vector<int32_t>> tables;
    int32_t next_block = 0;
    int64_t tokens = 0;
    for (const std::vector<int32_t>& p : prompts) {
      const int32_t blocks =
          static_cast<int32_t>((p.size() + kv_layout_.block_size - 1) / kv_layout_.block_size);
      std::vector<int32_t>& table = tables.emplace_back(blocks);
      for (int32_t& b : table) b = next_block++;
      tokens += static_cast<int64_t>(p.size());
    }
    BatchInput batch;
    for (size_t i = 0; i < prompts.size(); ++i) {
      batch.chunks.push_back({.seq_id = static_cast<int64_t>(i),
                              .token_ids = prompts[i],
                              .start_pos = 0,
                              .block_table = tables[i]});
    }
    calibrating_ = true;
    std::vector<float> logits;
    const absl::Status ran = Forward(batch, &logits);
    calibrating_ = false;
    RETURN_IF_ERROR(ran);
    kv_scales_.source = absl::StrCat("calibrated on ", tokens, " tokens");
  }
  const int64_t bytes = layers * heads * static_cast<int64_t>(sizeof(float));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(kv_k_scale_, kv_scales_.k.data(), bytes, cudaMemcpyHostToDevice, stream));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(kv_v_scale_, kv_scales_.v.data(), bytes, cudaMemcpyHostToDevice, stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  if (options_.print_plan) std::fprintf(stderr, "KV scales: %s\n", kv_scales_.Describe().c_str());
  return absl::OkStatus();
}

absl::Status CudaRunnerImpl::CalibrateLayer(int layer, const StepShape& shape) {
  cudaStream_t stream = ctx_->stream();
  const int64_t heads = config_.num_kv_heads;
  const int32_t* slots = reinterpret_cast<const int32_t*>(buf_.meta + shape.layout.slots);
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(kv_amax_, 0, 2 * heads * sizeof(float), stream));
  RETURN_IF_ERROR(KvAmax({.dtype = DType::kBF16,
                          .qkv = buf_.qkv,
                          .layout = kv_layout_,
                          .num_heads = static_cast<int32_t>(config_.num_heads),
                          .slot_mapping = slots,
                          .num_tokens = shape.tokens,
                          .k_amax = kv_amax_,
                          .v_amax = kv_amax_ + heads},
                         stream));
  std::vector<float> amax(2 * heads);
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(amax.data(), kv_amax_, amax.size() * sizeof(float),
                                       cudaMemcpyDeviceToHost, stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  const int64_t at = int64_t{layer} * heads;
  for (int64_t h = 0; h < heads; ++h) {
    kv_scales_.k[at + h] = KvScaleFromAmax(amax[h]);
    kv_scales_.v[at + h] = KvScaleFromAmax(amax[heads + h]);
  }
  const KvFp8Scales scales = LayerKvScales(layer);
  const int64_t bytes = heads * static_cast<int64_t>(sizeof(float));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(const_cast<float*>(scales.k), kv_scales_.k.data() + at,
                                       bytes, cudaMemcpyHostToDevice, stream));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(const_cast<float*>(scales.v), kv_scales_.v.data() + at,
                                       bytes, cudaMemcpyHostToDevice, stream));
  const int64_t q_width = config_.num_heads * config_.head_dim;
  const int64_t kv_width = heads * config_.head_dim;
  const int64_t row = q_width + 2 * kv_width;
  const char* qkv = static_cast<const char*>(buf_.qkv);
  return KvCacheWrite({.dtype = DType::kBF16,
                       .k = qkv + q_width * 2,
                       .v = qkv + (q_width + kv_width) * 2,
                       .k_token_stride = row,
                       .v_token_stride = row,
                       .k_cache = k_cache_[layer],
                       .v_cache = v_cache_[layer],
                       .layout = kv_layout_,
                       .slot_mapping = slots,
                       .num_tokens = shape.tokens,
                       .fp8 = scales},
                      stream);
}

}  // namespace onecard::engine
