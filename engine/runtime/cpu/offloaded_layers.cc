// OffloadedLayers (see offloaded_layers.h).
// Tested by tests/engine/runtime/cpu/offloaded_layers_test.cc.
#include "engine/runtime/cpu/offloaded_layers.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/kv_cache_write.h"
#include "engine/kernels/paged_attention.h"
#include "engine/kernels/rms_norm.h"
#include "engine/kernels/rope.h"
#include "engine/runtime/cpu/cpu_attention.h"

namespace onecard::engine {
namespace {

absl::Status CheckShape(const HostWeight& w, int64_t n, int64_t k, int64_t layer,
                        const char* name) {
  const std::string what = absl::StrCat("offloaded layer ", layer, " ", name);
  RETURN_IF_ERROR(CheckHostWeight(w, what));
  if (w.n != n || w.k != k) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": [", w.n, ", ", w.k, "], the model needs [", n, ", ", k, "]"));
  }
  return absl::OkStatus();
}

template <typename T>
T* Grown(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(n);
  return v.data();
}

// The elementwise passes between the products run on the pool in chunks of
// this many elements (fewer run on the calling thread): at 8 rows of a 70B
// layer they took ~3 ms of a step's layer on one thread
// (bench/experiments/offloaded_layer_time.cc).
constexpr int64_t kChunk = 8192;

// fn(begin, end) over [0, n) in chunks of kChunk on `pool`.
template <typename Fn>
void ForChunks(ThreadPool& pool, int64_t n, Fn&& fn) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  if (chunks <= 1) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  pool.ParallelFor(chunks, [&](int64_t b, int64_t e) { fn(b * kChunk, std::min(n, e * kChunk)); });
}

}  // namespace

OffloadedLayers::OffloadedLayers(const ModelConfig& config, const KvLayout& layout, int num_threads)
    : config_(config),
      layout_(layout),
      q_dim_(config.num_heads * config.head_dim),
      kv_dim_(config.num_kv_heads * config.head_dim),
      qkv_dim_(q_dim_ + 2 * kv_dim_),
      inv_freq_(RopeInvFreq(static_cast<int32_t>(config.head_dim), config.rope_theta,
                            config.rope_scaling)),
      pool_(num_threads) {}

absl::StatusOr<std::unique_ptr<OffloadedLayers>> OffloadedLayers::Create(
    const ModelConfig& config, const KvLayout& layout, std::vector<OffloadedLayerWeights> layers,
    int num_threads, int32_t max_tokens) {
  if (layout.num_blocks <= 0 || layout.num_kv_heads != config.num_kv_heads ||
      layout.head_dim != config.head_dim || max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("offloaded layers: a KV layout of ", layout.num_blocks, " blocks, ",
                     layout.num_kv_heads, " kv heads of ", layout.head_dim, " for a model of ",
                     config.num_kv_heads, " of ", config.head_dim, "; max_tokens ", max_tokens));
  }
  std::unique_ptr<OffloadedLayers> o(new OffloadedLayers(config, layout, num_threads));
  const int64_t h = config.hidden_size, inter = config.intermediate_size;
  o->index_.assign(config.num_layers, -1);
  for (const OffloadedLayerWeights& w : layers) {
    if (w.layer < 0 || w.layer >= config.num_layers || o->index_[w.layer] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("offloaded layers: layer ", w.layer,
                                                     " is outside the model (", config.num_layers,
                                                     " layers) or given twice"));
    }
    if (w.attn_norm == nullptr || w.ffn_norm == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("offloaded layer ", w.layer, ": the norms' weights are missing"));
    }
    RETURN_IF_ERROR(CheckShape(w.qkv, o->qkv_dim_, h, w.layer, "qkv"));
    RETURN_IF_ERROR(CheckShape(w.o, h, o->q_dim_, w.layer, "o"));
    RETURN_IF_ERROR(CheckShape(w.gate_up, 2 * inter, h, w.layer, "gate_up"));
    RETURN_IF_ERROR(CheckShape(w.down, h, inter, w.layer, "down"));
    o->index_[w.layer] = static_cast<int64_t>(o->layers_.size());
    o->layers_.push_back(w);
    o->k_pools_.emplace_back(layout.PoolElements());
    o->v_pools_.emplace_back(layout.PoolElements());
  }
  // The activations for max_tokens (Run grows them for more).
  const int64_t t = max_tokens;
  o->normed_.resize(t * h);
  o->qkv_.resize(t * o->qkv_dim_);
  o->attn_.resize(t * o->q_dim_);
  o->proj_.resize(t * h);
  o->gate_up_.resize(t * 2 * inter);
  o->act_.resize(t * inter);
  return o;
}

int64_t OffloadedLayers::pool_bytes() const {
  return 2 * static_cast<int64_t>(k_pools_.size()) * layout_.PoolElements() *
         static_cast<int64_t>(sizeof(float));
}

void OffloadedLayers::Linear(const HostWeight& w, const uint16_t* x, int32_t t, uint16_t* y) {
  float* xf = Grown(x_f32_, int64_t{t} * w.k);
  float* yf = Grown(y_f32_, int64_t{t} * w.n);
  ForChunks(pool_, int64_t{t} * w.k, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) xf[i] = Bf16ToFloat(x[i]);
  });
  const auto t0 = std::chrono::steady_clock::now();
  HostLinearForward(pool_, w, xf, t, yf, &scratch_);
  linear_us_ +=
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  ForChunks(pool_, int64_t{t} * w.n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = FloatToBf16(yf[i]);
  });
}

absl::Status OffloadedLayers::Run(int64_t first, int64_t last, const OffloadedStep& step,
                                  uint16_t* residual, uint16_t* kv_out) {
  for (int64_t l = first; l <= last; ++l) {
    if (!Holds(l)) {
      return absl::InvalidArgumentError(
          absl::StrCat("offloaded layers: layer ", l, " is not held"));
    }
  }
  if (step.num_tokens <= 0) return absl::OkStatus();
  const int64_t t = step.num_tokens, h = config_.hidden_size, inter = config_.intermediate_size;
  Grown(normed_, t * h), Grown(qkv_, t * qkv_dim_), Grown(attn_, t * q_dim_);
  Grown(proj_, t * h), Grown(gate_up_, t * 2 * inter), Grown(act_, t * inter);
  for (int64_t l = first; l <= last; ++l) {
    const int64_t i = index_[l];
    RETURN_IF_ERROR(RunLayer(layers_[i], i, step, residual, kv_out + (l - first) * t * kv_row()));
  }
  return absl::OkStatus();
}

absl::Status OffloadedLayers::RunLayer(const OffloadedLayerWeights& w, int64_t index,
                                       const OffloadedStep& step, uint16_t* residual,
                                       uint16_t* kv_out) {
  const int32_t t = step.num_tokens;
  const int64_t h = config_.hidden_size, inter = config_.intermediate_size;
  const float eps = config_.rms_norm_eps;
  // The norms row by row on the pool (a row's arithmetic is RmsNormRef's).
  RETURN_IF_ERROR(pool_.ParallelForStatus(t, [&](int64_t begin, int64_t end) {
    return RmsNormRef({DType::kBF16, residual + begin * h, w.attn_norm, normed_.data() + begin * h,
                       static_cast<int32_t>(end - begin), h, eps});
  }));
  Linear(w.qkv, normed_.data(), t, qkv_.data());
  if (w.bqkv != nullptr) {
    ForChunks(pool_, int64_t{t} * qkv_dim_, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        qkv_[i] = FloatToBf16(Bf16ToFloat(qkv_[i]) + Bf16ToFloat(w.bqkv[i % qkv_dim_]));
      }
    });
  }
  // RoPE of q and k, tokens in parallel.
  RETURN_IF_ERROR(pool_.ParallelForStatus(t, [&](int64_t begin, int64_t end) {
    uint16_t* q = qkv_.data() + begin * qkv_dim_;
    return RopeRef(
        {DType::kBF16, q, q + q_dim_, qkv_dim_, qkv_dim_, step.positions + begin, inv_freq_.data(),
         static_cast<int32_t>(end - begin), static_cast<int32_t>(config_.num_heads),
         static_cast<int32_t>(config_.num_kv_heads), static_cast<int32_t>(config_.head_dim)});
  }));
  for (int64_t r = 0; r < t; ++r) {
    std::copy_n(qkv_.data() + r * qkv_dim_ + q_dim_, kv_row(), kv_out + r * kv_row());
  }
  RETURN_IF_ERROR(WriteKv(layers_[index].layer, step, kv_out));
  RETURN_IF_ERROR(Attention(index, step));
  Linear(w.o, attn_.data(), t, proj_.data());
  RETURN_IF_ERROR(pool_.ParallelForStatus(t, [&](int64_t begin, int64_t end) {
    return FusedAddRmsNormRef({DType::kBF16, proj_.data() + begin * h, residual + begin * h,
                               w.ffn_norm, normed_.data() + begin * h,
                               static_cast<int32_t>(end - begin), h, eps});
  }));
  Linear(w.gate_up, normed_.data(), t, gate_up_.data());
  // SiluMulRef's act = bf16(silu(gate) * up), reading gate j and up j where
  // the row holds them: [gate; up], or interleaved (gate j at (j / 8) * 16 +
  // j % 8, up j 8 after it).
  const bool interleaved = w.gate_up_interleaved;
  ForChunks(pool_, int64_t{t} * inter, [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t j = u % inter;
      const uint16_t* row = gate_up_.data() + (u / inter) * 2 * inter;
      const int64_t gi = interleaved ? (j / 8) * 16 + j % 8 : j;
      const float g = Bf16ToFloat(row[gi]);
      const float silu = g / (1.0f + std::exp(-g));
      act_[u] = FloatToBf16(silu * Bf16ToFloat(row[interleaved ? gi + 8 : inter + j]));
    }
  });
  Linear(w.down, act_.data(), t, proj_.data());
  ForChunks(pool_, int64_t{t} * h, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      residual[i] = FloatToBf16(Bf16ToFloat(proj_[i]) + Bf16ToFloat(residual[i]));
    }
  });
  return absl::OkStatus();
}

absl::Status OffloadedLayers::Attention(int64_t index, const OffloadedStep& step) {
  const int32_t t = step.num_tokens;
  float* q = Grown(q_f32_, int64_t{t} * q_dim_);
  float* out = Grown(attn_f32_, int64_t{t} * q_dim_);
  ForChunks(pool_, int64_t{t} * q_dim_, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) q[i] = Bf16ToFloat(qkv_[(i / q_dim_) * qkv_dim_ + i % q_dim_]);
  });
  PagedAttentionParams attn;
  attn.dtype = DType::kF32;
  attn.q = q;
  attn.q_token_stride = q_dim_;
  attn.k_cache = k_pools_[index].data();
  attn.v_cache = v_pools_[index].data();
  attn.out = out;
  attn.layout = layout_;
  attn.num_heads = static_cast<int32_t>(config_.num_heads);
  attn.num_tokens = t;
  attn.num_seqs = step.num_seqs;
  attn.cu_query_lens = step.cu_query_lens;
  attn.start_pos = step.start_pos;
  attn.block_tables = step.block_tables;
  attn.max_blocks_per_seq = step.max_blocks_per_seq;
  attn.scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
  RETURN_IF_ERROR(PagedAttentionCpu(pool_, attn));
  ForChunks(pool_, int64_t{t} * q_dim_, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) attn_[i] = FloatToBf16(out[i]);
  });
  return absl::OkStatus();
}

absl::Status OffloadedLayers::WriteKv(int64_t layer, const OffloadedStep& step,
                                      const uint16_t* kv) {
  if (!Holds(layer)) {
    return absl::InvalidArgumentError(
        absl::StrCat("offloaded layers: layer ", layer, " is not held"));
  }
  const int64_t index = index_[layer];
  const int64_t t = step.num_tokens;
  float* f = Grown(kv_f32_, t * kv_row());
  // Tokens in parallel (a prefill's rows: thousands of tokens a layer).
  return pool_.ParallelForStatus(t, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin * kv_row(); i < end * kv_row(); ++i) f[i] = Bf16ToFloat(kv[i]);
    return KvCacheWriteRef({.dtype = DType::kF32,
                            .k = f + begin * kv_row(),
                            .v = f + begin * kv_row() + kv_dim_,
                            .k_token_stride = kv_row(),
                            .v_token_stride = kv_row(),
                            .k_cache = k_pools_[index].data(),
                            .v_cache = v_pools_[index].data(),
                            .layout = layout_,
                            .slot_mapping = step.slots + begin,
                            .num_tokens = static_cast<int32_t>(end - begin)});
  });
}

}  // namespace onecard::engine
