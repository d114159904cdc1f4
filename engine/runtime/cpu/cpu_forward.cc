// CpuForward (see cpu_forward.h): the decoder step by step.
// Tested through tests/engine/runtime/cpu/cpu_model_runner_test.cc and the
// golden test.
#include "engine/runtime/cpu/cpu_forward.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/fp8.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/kv_cache_write.h"
#include "engine/kernels/rms_norm.h"
#include "engine/kernels/rope.h"
#include "engine/kernels/silu_mul.h"
#include "engine/runtime/cpu/cpu_attention.h"
#include "engine/runtime/cpu/cpu_linear.h"

namespace onecard::engine {

CpuForward::CpuForward(const ModelConfig& config, CpuWeights weights, const KvLayout& layout,
                       int num_threads, LinearInputObserver observer, KvCacheDtype kv_dtype)
    : config_(config),
      weights_(std::move(weights)),
      layout_(layout),
      q_dim_(config.num_heads * config.head_dim),
      kv_dim_(config.num_kv_heads * config.head_dim),
      qkv_dim_(q_dim_ + 2 * kv_dim_),
      inv_freq_(RopeInvFreq(static_cast<int32_t>(config.head_dim), config.rope_theta,
                            config.rope_scaling)),
      pool_(num_threads),
      observer_(std::move(observer)),
      kv_dtype_(kv_dtype) {
  k_pools_.reserve(config.num_layers);
  v_pools_.reserve(config.num_layers);
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    k_pools_.emplace_back(layout.PoolElements());
    v_pools_.emplace_back(layout.PoolElements());
  }
}

CpuForward::ZeroedFloats::ZeroedFloats(int64_t n) : bytes_(static_cast<size_t>(n) * sizeof(float)) {
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  data_ = static_cast<float*>(p);
}

CpuForward::ZeroedFloats::~ZeroedFloats() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

CpuForward::ZeroedFloats::ZeroedFloats(ZeroedFloats&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

void CpuForward::Observe(int64_t layer, LinearInput input, const std::vector<float>& x,
                         int32_t n) const {
  if (observer_ == nullptr) return;
  int64_t cols = config_.hidden_size;
  if (input == LinearInput::kO) cols = q_dim_;
  if (input == LinearInput::kDown) cols = config_.intermediate_size;
  observer_(layer, input, std::span(x).subspan(0, n * cols), n);
}

void CpuForward::Resize(int32_t n) {
  act_.residual.resize(n * config_.hidden_size);
  act_.normed.resize(n * config_.hidden_size);
  act_.qkv.resize(n * qkv_dim_);
  act_.attn.resize(n * q_dim_);
  act_.proj.resize(n * config_.hidden_size);
  act_.gate_up.resize(n * 2 * config_.intermediate_size);
  act_.act.resize(n * config_.intermediate_size);
}

absl::Status CpuForward::Run(const FlatBatch& flat, std::vector<float>* logits) {
  logits->clear();
  if (flat.num_tokens == 0) return absl::OkStatus();
  if (kv_dtype_ == KvCacheDtype::kFp8E4m3 &&
      kv_scales_.k.size() != static_cast<size_t>(config_.num_layers * config_.num_kv_heads)) {
    return absl::FailedPreconditionError("CpuForward: the fp8 KV cache has no scales yet");
  }
  Resize(flat.num_tokens);
  RETURN_IF_ERROR(Embed(flat));
  for (int64_t layer = 0; layer < config_.num_layers; ++layer) {
    RETURN_IF_ERROR(AddAndNorm(layer > 0, weights_.layers[layer].attn_norm, flat.num_tokens));
    Observe(layer, LinearInput::kResidual, act_.residual, flat.num_tokens);
    RETURN_IF_ERROR(AttentionBlock(layer, flat));
    RETURN_IF_ERROR(AddAndNorm(true, weights_.layers[layer].ffn_norm, flat.num_tokens));
    RETURN_IF_ERROR(MlpBlock(layer, flat.num_tokens));
  }
  RETURN_IF_ERROR(AddAndNorm(true, weights_.final_norm, flat.num_tokens));
  Observe(config_.num_layers, LinearInput::kResidual, act_.residual, flat.num_tokens);
  return Logits(flat, logits);
}

absl::Status CpuForward::Embed(const FlatBatch& flat) {
  const int64_t hidden = config_.hidden_size;
  return ForTokenRanges(flat.num_tokens, [&](int32_t begin, int32_t end) {
    for (int32_t t = begin; t < end; ++t) {
      const int32_t id = flat.token_ids[t];
      if (id < 0 || id >= config_.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("token_ids[", t, "] = ", id, " is outside [0, ", config_.vocab_size, ")"));
      }
      weights_.embedding.RowF32(id, act_.residual.data() + int64_t{t} * hidden);
    }
    return absl::OkStatus();
  });
}

void CpuForward::Linear(const CpuLinear& w, const float* x, const float* bias, float* y,
                        int32_t n) {
  CpuLinearForward(pool_, w, {.x = x, .bias = bias, .y = y, .num_rows = n}, &scratch_);
}

absl::Status CpuForward::AddAndNorm(bool add_proj, const std::vector<float>& weight,
                                    int32_t num_tokens) {
  const int64_t hidden = config_.hidden_size;
  return ForTokenRanges(num_tokens, [&](int32_t begin, int32_t end) {
    if (!add_proj) {
      return RmsNormRef({DType::kF32, act_.residual.data() + begin * hidden, weight.data(),
                         act_.normed.data() + begin * hidden, end - begin, hidden,
                         config_.rms_norm_eps});
    }
    return FusedAddRmsNormRef({DType::kF32, act_.proj.data() + begin * hidden,
                               act_.residual.data() + begin * hidden, weight.data(),
                               act_.normed.data() + begin * hidden, end - begin, hidden,
                               config_.rms_norm_eps});
  });
}

absl::Status CpuForward::AttentionBlock(int64_t layer, const FlatBatch& flat) {
  const CpuLayerWeights& w = weights_.layers[layer];
  const int32_t n = flat.num_tokens;
  Observe(layer, LinearInput::kQkv, act_.normed, n);
  Linear(w.wqkv, act_.normed.data(), w.bqkv.empty() ? nullptr : w.bqkv.data(), act_.qkv.data(), n);
  // q, k and v are views into each token's qkv row: [q heads | k heads | v heads].
  float* q = act_.qkv.data();
  float* k = q + q_dim_;
  const float* v = k + kv_dim_;
  RETURN_IF_ERROR(ForTokenRanges(n, [&](int32_t begin, int32_t end) {
    return RopeRef({DType::kF32, q + begin * qkv_dim_, k + begin * qkv_dim_, qkv_dim_, qkv_dim_,
                    flat.positions.data() + begin, inv_freq_.data(), end - begin,
                    static_cast<int32_t>(config_.num_heads),
                    static_cast<int32_t>(config_.num_kv_heads),
                    static_cast<int32_t>(config_.head_dim)});
  }));
  RETURN_IF_ERROR(RoundKv(layer, k, n));
  RETURN_IF_ERROR(KvCacheWriteRef({DType::kF32, k, v, qkv_dim_, qkv_dim_, k_pools_[layer].data(),
                                   v_pools_[layer].data(), layout_, flat.slot_mapping.data(), n}));
  PagedAttentionParams attn;
  attn.dtype = DType::kF32;
  attn.q = q;
  attn.q_token_stride = qkv_dim_;
  attn.k_cache = k_pools_[layer].data();
  attn.v_cache = v_pools_[layer].data();
  attn.out = act_.attn.data();
  attn.layout = layout_;
  attn.num_heads = static_cast<int32_t>(config_.num_heads);
  attn.num_tokens = n;
  attn.num_seqs = flat.num_seqs;
  attn.cu_query_lens = flat.cu_query_lens.data();
  attn.start_pos = flat.start_pos.data();
  attn.block_tables = flat.block_tables.data();
  attn.max_blocks_per_seq = flat.max_blocks_per_seq;
  attn.scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
  RETURN_IF_ERROR(PagedAttentionCpu(pool_, attn));
  Observe(layer, LinearInput::kO, act_.attn, n);
  Linear(w.wo, act_.attn.data(), nullptr, act_.proj.data(), n);
  return absl::OkStatus();
}

absl::Status CpuForward::RoundKv(int64_t layer, float* k, int32_t n) {
  if (kv_dtype_ == KvCacheDtype::kAuto) return absl::OkStatus();
  if (calibrating_) {
    RETURN_IF_ERROR(SetScalesFromAmax(layer, k, n));
    // The step's K, for the layer's FP8 error (the pass itself stays FP8,
    // as the cuda runner's: a layer kept in BF16 is so from the next pass).
    std::vector<float> keys(int64_t{n} * kv_dim_);
    for (int32_t t = 0; t < n; ++t) {
      std::copy_n(k + int64_t{t} * qkv_dim_, kv_dim_, keys.data() + int64_t{t} * kv_dim_);
    }
    kv_scales_.SetLayerKError(layer, keys, n, config_.head_dim);
  }
  if (kv_dtype_ == KvCacheDtype::kBf16 || (!calibrating_ && kv_scales_.LayerBf16(layer))) {
    return ForTokenRanges(n, [&](int32_t begin, int32_t end) {
      for (int32_t t = begin; t < end; ++t) {
        float* kv = k + int64_t{t} * qkv_dim_;  // the token's K heads, then its V heads
        for (int64_t i = 0; i < 2 * kv_dim_; ++i) kv[i] = Bf16ToFloat(FloatToBf16(kv[i]));
      }
      return absl::OkStatus();
    });
  }
  const KvFp8Scales scales = kv_scales_.Layer(layer);
  const int64_t head_dim = config_.head_dim;
  return ForTokenRanges(n, [&](int32_t begin, int32_t end) {
    for (int32_t t = begin; t < end; ++t) {
      float* kv = k + int64_t{t} * qkv_dim_;
      for (int64_t i = 0; i < kv_dim_; ++i) {
        kv[i] = RoundThroughE4m3(kv[i], scales.k[i / head_dim]);
        kv[kv_dim_ + i] = RoundThroughE4m3(kv[kv_dim_ + i], scales.v[i / head_dim]);
      }
    }
    return absl::OkStatus();
  });
}

absl::Status CpuForward::SetScalesFromAmax(int64_t layer, const float* k, int32_t n) {
  const int64_t heads = config_.num_kv_heads, head_dim = config_.head_dim;
  std::vector<float> amax(2 * heads, 0.0f);  // K heads, then V heads
  std::mutex mu;
  RETURN_IF_ERROR(ForTokenRanges(n, [&](int32_t begin, int32_t end) {
    std::vector<float> local(2 * heads, 0.0f);
    for (int32_t t = begin; t < end; ++t) {
      const float* kv = k + int64_t{t} * qkv_dim_;
      for (int64_t i = 0; i < 2 * kv_dim_; ++i) {
        float& m = local[i / head_dim];  // i / head_dim: K head, or heads + V head
        m = std::max(m, std::abs(kv[i]));
      }
    }
    std::lock_guard<std::mutex> lock(mu);  // a max: the same in any order
    for (int64_t h = 0; h < 2 * heads; ++h) amax[h] = std::max(amax[h], local[h]);
    return absl::OkStatus();
  }));
  kv_scales_.SetLayerFromAmax(layer, amax);
  return absl::OkStatus();
}

absl::Status CpuForward::CalibrateKvScales(const FlatBatch& flat, std::string source) {
  if (kv_dtype_ != KvCacheDtype::kFp8E4m3) {
    return absl::FailedPreconditionError("CalibrateKvScales: the KV cache is not fp8");
  }
  kv_scales_ = KvScales::Ones(config_.num_layers, config_.num_kv_heads, std::move(source));
  calibrating_ = true;
  std::vector<float> logits;
  const absl::Status status = Run(flat, &logits);
  calibrating_ = false;
  if (!status.ok()) kv_scales_ = {};
  return status;
}

absl::Status CpuForward::MlpBlock(int64_t layer, int32_t n) {
  const CpuLayerWeights& w = weights_.layers[layer];
  const int64_t inter = config_.intermediate_size;
  Observe(layer, LinearInput::kGateUp, act_.normed, n);
  Linear(w.w_gate_up, act_.normed.data(), nullptr, act_.gate_up.data(), n);
  RETURN_IF_ERROR(ForTokenRanges(n, [&](int32_t begin, int32_t end) {
    return SiluMulRef({DType::kF32, act_.gate_up.data() + begin * 2 * inter,
                       act_.act.data() + begin * inter, end - begin, inter});
  }));
  Observe(layer, LinearInput::kDown, act_.act, n);
  Linear(w.w_down, act_.act.data(), nullptr, act_.proj.data(), n);
  return absl::OkStatus();
}

absl::Status CpuForward::Logits(const FlatBatch& flat, std::vector<float>* logits) {
  const int64_t hidden = config_.hidden_size;
  const int64_t rows = static_cast<int64_t>(flat.logit_rows.size());
  if (rows == 0) return absl::OkStatus();
  // The wanted rows of the final norm's output, side by side ([rows, hidden]).
  std::vector<float> picked(rows * hidden);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(act_.normed.data() + flat.logit_rows[r] * hidden, hidden, &picked[r * hidden]);
  }
  logits->resize(rows * config_.vocab_size);
  Linear(weights_.output_weight(), picked.data(), nullptr, logits->data(),
         static_cast<int32_t>(rows));
  return absl::OkStatus();
}

absl::Status CpuForward::ForTokenRanges(int32_t num_tokens,
                                        const std::function<absl::Status(int32_t, int32_t)>& fn) {
  return pool_.ParallelForStatus(num_tokens, [&](int64_t begin, int64_t end) {
    return fn(static_cast<int32_t>(begin), static_cast<int32_t>(end));
  });
}

}  // namespace onecard::engine
