// Test helpers for the cpu backend: tiny decoder configs (Llama-like with GQA,
// llama3 rope scaling and an untied lm_head; Qwen2-like with q/k/v bias, a
// tied lm_head and odd sizes), seeded random weights (never zeros), and
// DenseForward: an independent, straightforward forward pass in double
// precision (no paging, no kernels; the HF modeling code's math written out)
// that the backend is held to, and DenseKv, its K and V of one layer.
// WriteBlockGguf writes a tiny model whose
// linears are GGUF blocks of every type the cpu kernels multiply.
#ifndef ONECARD_TESTS_ENGINE_RUNTIME_CPU_TINY_MODEL_H_
#define ONECARD_TESTS_ENGINE_RUNTIME_CPU_TINY_MODEL_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "tests/engine/model/model_test_util.h"

namespace onecard::engine::testing {

ModelConfig TinyConfig(Architecture arch);

ModelWeightsF32 RandomWeights(const ModelConfig& config, uint32_t seed);

// Maps a K (after RoPE; is_v false) or V value of a layer's kv head to what
// a KV cache of another format holds.
using KvRound = std::function<float(int64_t layer, int64_t kv_head, bool is_v, float x)>;

// Logits [tokens.size(), vocab_size] of one sequence starting at position 0.
// round_kv, when set, maps every K and V value before attention reads it.
std::vector<float> DenseForward(const ModelConfig& config, const ModelWeightsF32& weights,
                                const std::vector<int32_t>& tokens,
                                const KvRound& round_kv = nullptr);

// Layer `layer`'s K (after RoPE, token t at positions[t]) and V in double,
// [rows, num_kv_heads * head_dim] each, from its attention input x [rows,
// hidden] (the normed residual: LinearInput::kQkv).
void DenseKv(const ModelConfig& config, const ModelWeightsF32& weights, int64_t layer,
             std::span<const float> x, const std::vector<int32_t>& positions,
             std::vector<double>* k, std::vector<double>* v);

// A tiny decoder (hidden 256, intermediate 512, 2 layers, 4 heads of 64, 2 KV
// heads, vocab 96) as a GGUF file under dir; returns its path. Seeded random
// blocks, values of about 1 / sqrt(in_features) (1 for the embedding and the
// output), norms in [0.5, 1.5]. The linears: embedding Q8_0, q Q4_K, k Q4_0,
// v Q6_K, o Q4_1 in layer 0 and F16 in layer 1, gate Q5_K, up Q8_0, down
// Q4_K. kLlama: an untied Q6_K output (Q/K rows are whatever the file holds:
// the loader permutes them back as llama.cpp's); kQwen2: q/k/v biases (F32)
// and the output tied to the embedding.
std::string WriteBlockGguf(Architecture arch, const ::onecard::testing::ScratchDir& dir);

}  // namespace onecard::engine::testing

#endif  // ONECARD_TESTS_ENGINE_RUNTIME_CPU_TINY_MODEL_H_
