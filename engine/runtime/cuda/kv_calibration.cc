// CudaRunnerImpl's FP8 KV scales (kv_scales.h): from the options (a
// checkpoint's), or calibrated. Calibration runs the calibration prompts as
// one prefill step (eager, in blocks 0.. of the pool, free before any
// request) with calibrating_ set: after each layer's RopeKvWrite, KvAmax
// takes the step's K / V maxima a kv head, the host turns them into the
// layer's scales (KvScaleFromAmax, as the cpu backend does) and uploads
// them, and KvCacheWrite rewrites the step's K / V into the pools with them,
// so the layer's attention and every later layer see the final scales. The
// step's K also comes to the host for the layer's FP8 error
// (KvScales::SetLayerKError); when some layer is to stay in BF16, the pools
// are taken again after the pass, those layers' at 2 bytes an element, in
// as many blocks as the KV arena then holds (the pass itself ran every
// layer in FP8, as the cpu backend's does).
// Tested by tests/gpu/cuda_model_runner_fp8_kv_test.cc.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/cuda_check.h"
#include "engine/kernels/kv_amax.h"
#include "engine/kernels/kv_cache_write.h"
#include "engine/runtime/cuda/cuda_runner_impl.h"

namespace onecard::engine {

absl::Status CudaRunnerImpl::PrepareKvScales() {
  if (kv_k_scale_ == nullptr) return absl::OkStatus();
  const int64_t layers = config_.num_layers;
  const int64_t heads = config_.num_kv_heads;
  cudaStream_t stream = ctx_->stream();
  if (options_.kv_scales.has_value()) {
    const KvScales& s = *options_.kv_scales;
    RETURN_IF_ERROR(s.CheckFits(layers, heads, "CudaRunnerOptions.kv_scales"));
    kv_scales_ = s;
  } else {
    std::vector<std::vector<int32_t>> prompts = options_.kv_calibration_prompts;
    if (prompts.empty()) {
      ASSIGN_OR_RETURN(prompts, KvCalibrationPrompts(nullptr, config_));
    }
    // One prefill step of the plan; chunks of 2 tokens or more (a step of
    // one-token chunks would be a decode step).
    const KvCalibrationBatch calibration(prompts, kv_layout_,
                                         {.max_context = plan_.max_context,
                                          .max_tokens = plan_.max_batched_tokens,
                                          .max_seqs = plan_.max_num_seqs,
                                          .min_tokens = 2,
                                          .want_logits = true});
    if (calibration.batch().chunks.empty()) {
      return absl::FailedPreconditionError(
          "cuda runner: no calibration prompt of 2 tokens or more fits a step of the plan for "
          "the FP8 KV cache's scales; give them (kv_scales) or a larger plan");
    }
    kv_scales_ = KvScales::Ones(layers, heads, calibration.Source());
    calibrating_ = true;
    std::vector<float> logits;
    const absl::Status ran = Forward(calibration.batch(), &logits);
    calibrating_ = false;
    RETURN_IF_ERROR(ran);
  }
  const int64_t bytes = layers * heads * static_cast<int64_t>(sizeof(float));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(kv_k_scale_, kv_scales_.k.data(), bytes, cudaMemcpyHostToDevice, stream));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(kv_v_scale_, kv_scales_.v.data(), bytes, cudaMemcpyHostToDevice, stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  if (options_.print_plan) std::fprintf(stderr, "KV scales: %s\n", kv_scales_.Describe().c_str());
  if (kv_scales_.NumBf16Layers() == 0) return absl::OkStatus();
  // Layers kept in BF16 take twice the bytes: fewer blocks in the same arena.
  const int64_t block_elements =
      int64_t{plan_.kv_block_size} * config_.num_kv_heads * config_.head_dim;
  int64_t block_bytes = 0;
  for (int64_t l = 0; l < layers; ++l) block_bytes += 2 * block_elements * (LayerKvFp8(l) ? 1 : 2);
  const int64_t blocks = (kv_arena_->size_bytes() - plan_.kv_pool_padding) / block_bytes;
  if (blocks < 1) {
    return absl::ResourceExhaustedError(
        absl::StrCat("kv_cache_dtype: with ", kv_scales_.NumBf16Layers(),
                     " layers kept in BF16 the KV cache of ", kv_arena_->size_bytes(),
                     " bytes holds no block; give a larger budget"));
  }
  plan_.kv_block_bytes = block_bytes;
  plan_.kv_bytes_per_token = block_bytes / plan_.kv_block_size;
  RETURN_IF_ERROR(TakeKvPools(blocks));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  if (options_.print_plan) {
    std::fprintf(stderr, "KV cache: %lld layers in BF16, %lld in FP8: %lld blocks = %lld tokens\n",
                 static_cast<long long>(kv_scales_.NumBf16Layers()),
                 static_cast<long long>(layers - kv_scales_.NumBf16Layers()),
                 static_cast<long long>(blocks),
                 static_cast<long long>(blocks * plan_.kv_block_size));
  }
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
  kv_scales_.SetLayerFromAmax(layer, amax);
  const int64_t q_width = config_.num_heads * config_.head_dim;
  const int64_t kv_width = heads * config_.head_dim;
  const int64_t row = q_width + 2 * kv_width;
  const char* qkv = static_cast<const char*>(buf_.qkv);
  // The step's K (BF16, after bias and RoPE) for the layer's FP8 error.
  std::vector<uint16_t> k_bf16(shape.tokens * kv_width);
  CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(k_bf16.data(), kv_width * 2, qkv + q_width * 2, row * 2,
                                         kv_width * 2, shape.tokens, cudaMemcpyDeviceToHost,
                                         stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  std::vector<float> keys(k_bf16.size());
  std::transform(k_bf16.begin(), k_bf16.end(), keys.begin(), Bf16ToFloat);
  kv_scales_.SetLayerKError(layer, keys, shape.tokens, config_.head_dim);
  const int64_t at = int64_t{layer} * heads;
  const KvFp8Scales scales = LayerKvScales(layer);
  const int64_t bytes = heads * static_cast<int64_t>(sizeof(float));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(const_cast<float*>(scales.k), kv_scales_.k.data() + at,
                                       bytes, cudaMemcpyHostToDevice, stream));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(const_cast<float*>(scales.v), kv_scales_.v.data() + at,
                                       bytes, cudaMemcpyHostToDevice, stream));
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
