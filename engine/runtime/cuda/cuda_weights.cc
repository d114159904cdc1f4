// Carving the weights from their arena, and RandomWeights (see cuda_weights.h).
// Tested through tests/gpu/cuda_model_runner_test.cc.
#include "engine/runtime/cuda/cuda_weights.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/fp8.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/cuda_check.h"

namespace onecard::engine {

absl::StatusOr<CudaWeights> CarveWeights(const ModelConfig& c, const ModelWeightsSpec& spec,
                                         DeviceArena* arena, const WeightHomes* homes) {
  if (static_cast<int64_t>(spec.layers.size()) != c.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight spec has ", spec.layers.size(), " layers, the model ", c.num_layers));
  }
  const int64_t qkv_rows = ProjectionShape(c, Projection::kQkv)[0];
  CudaWeights w;
  w.layers.resize(c.num_layers);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    CudaLayerWeights& layer = w.layers[l];
    const std::unique_ptr<DeviceArena> own =
        homes != nullptr && homes->layer_arena ? homes->layer_arena(l) : nullptr;
    DeviceArena* into = own != nullptr ? own.get() : arena;
    ASSIGN_OR_RETURN(layer.attn_norm, into->Take(c.hidden_size * 2));
    ASSIGN_OR_RETURN(layer.ffn_norm, into->Take(c.hidden_size * 2));
    for (int p = 0; p < kNumProjections; ++p) {
      CudaWeight& cw = layer.proj[p];
      cw.spec = spec.layers[l][p];
      const auto [n, k] = ProjectionShape(c, static_cast<Projection>(p));
      cw.n = n;
      cw.k = k;
      if (cw.spec.format == WeightFormat::kBf16) {
        ASSIGN_OR_RETURN(cw.data, into->Take(cw.n * cw.k * 2));
        continue;
      }
      if (cw.spec.format == WeightFormat::kFp8) {
        ASSIGN_OR_RETURN(cw.data, into->Take(cw.n * cw.k));
        ASSIGN_OR_RETURN(cw.scales, into->Take(Fp8ScaleCount(cw.n, cw.k, cw.spec.fp8_scales) * 4));
        continue;
      }
      ASSIGN_OR_RETURN(cw.data, into->Take(Int4CodeBytes(cw.n, cw.k)));
      ASSIGN_OR_RETURN(cw.scales, into->Take(Int4ScaleBytes(cw.n, cw.k, cw.spec.group)));
      if (cw.spec.offsets != Int4Offsets::kSymmetric) {
        ASSIGN_OR_RETURN(cw.offsets, into->Take(Int4ScaleBytes(cw.n, cw.k, cw.spec.group)));
      }
      if (cw.spec.act_order) {
        ASSIGN_OR_RETURN(void* columns, into->Take(cw.k * 4));
        cw.columns = static_cast<int32_t*>(columns);
      }
    }
    if (c.attention_bias) {
      ASSIGN_OR_RETURN(layer.bqkv, into->Take(qkv_rows * 2));
    }
  }
  ASSIGN_OR_RETURN(w.embedding, arena->Take(c.vocab_size * c.hidden_size * 2));
  ASSIGN_OR_RETURN(w.final_norm, arena->Take(c.hidden_size * 2));
  if (c.tie_word_embeddings) {
    w.lm_head = w.embedding;
  } else {
    ASSIGN_OR_RETURN(w.lm_head, arena->Take(c.vocab_size * c.hidden_size * 2));
  }
  return w;
}

absl::StatusOr<CudaWeights> RandomWeights(const ModelConfig& c, const ModelWeightsSpec& spec,
                                          uint64_t seed, DeviceArena* arena, cudaStream_t stream,
                                          const WeightHomes* homes) {
  ASSIGN_OR_RETURN(CudaWeights w, CarveWeights(c, spec, arena, homes));
  uint64_t tensor = 0;
  auto next_seed = [&] { return seed * 0x100000001b3ull + (++tensor) * 0x9e3779b97f4a7c15ull; };
  auto fill = [&](void* p, int64_t n, float center, float half_width) {
    return FillUniformBf16(p, n, next_seed(), center, half_width, stream);
  };
  auto bound = [](int64_t fan_in) { return std::sqrt(3.0f / static_cast<float>(fan_in)); };
  const int64_t h = c.hidden_size;
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    CudaLayerWeights& l = w.layers[layer];
    RETURN_IF_ERROR(fill(l.attn_norm, h, 1.0f, 0.05f));
    RETURN_IF_ERROR(fill(l.ffn_norm, h, 1.0f, 0.05f));
    for (CudaWeight& cw : l.proj) {
      if (cw.spec.format == WeightFormat::kBf16) {
        RETURN_IF_ERROR(fill(cw.data, cw.n * cw.k, 0.0f, bound(cw.k)));
        continue;
      }
      if (cw.spec.format == WeightFormat::kFp8) {
        RETURN_IF_ERROR(FillFp8(cw.data, cw.n * cw.k, static_cast<float*>(cw.scales),
                                Fp8ScaleCount(cw.n, cw.k, cw.spec.fp8_scales), next_seed(),
                                bound(cw.k) / kE4m3Max, stream));
        continue;
      }
      // Codes 0..15 around 8 with scales of bound / 8: the BF16 weights' range.
      RETURN_IF_ERROR(FillRandomWords(cw.data, Int4CodeBytes(cw.n, cw.k) / 4, next_seed(), stream));
      RETURN_IF_ERROR(FillInt4Scales(cw.scales, cw.offsets,
                                     Int4ScaleBytes(cw.n, cw.k, cw.spec.group) / 4, next_seed(),
                                     bound(cw.k) / 8.0f, cw.spec.offsets, stream));
      if (cw.columns != nullptr) {  // act order: a seeded permutation of the columns
        std::vector<int32_t> columns(cw.k);
        std::iota(columns.begin(), columns.end(), 0);
        std::mt19937_64 rng(next_seed());
        std::shuffle(columns.begin(), columns.end(), rng);
        CUDA_RETURN_IF_ERROR(
            cudaMemcpy(cw.columns, columns.data(), cw.k * 4, cudaMemcpyHostToDevice));
      }
    }
    if (l.bqkv != nullptr) {
      RETURN_IF_ERROR(fill(l.bqkv, ProjectionShape(c, Projection::kQkv)[0], 0.0f, 0.1f));
    }
    if (homes != nullptr && homes->filled) RETURN_IF_ERROR(homes->filled(layer));
  }
  RETURN_IF_ERROR(fill(w.embedding, c.vocab_size * h, 0.0f, 1.0f));
  RETURN_IF_ERROR(fill(w.final_norm, h, 1.0f, 0.05f));
  if (w.lm_head != w.embedding) RETURN_IF_ERROR(fill(w.lm_head, c.vocab_size * h, 0.0f, bound(h)));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return w;
}

}  // namespace onecard::engine
