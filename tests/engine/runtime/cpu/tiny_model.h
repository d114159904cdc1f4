// Test helpers for the cpu backend: tiny decoder configs (Llama-like with GQA,
// llama3 rope scaling and an untied lm_head; Qwen2-like with q/k/v bias, a
// tied lm_head and odd sizes), seeded random weights (never zeros), and
// DenseForward: an independent, straightforward forward pass in double
// precision (no paging, no kernels; the HF modeling code's math written out)
// that the backend is held to.
#ifndef ONECARD_TESTS_ENGINE_RUNTIME_CPU_TINY_MODEL_H_
#define ONECARD_TESTS_ENGINE_RUNTIME_CPU_TINY_MODEL_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace onecard::engine::testing {

ModelConfig TinyConfig(Architecture arch);

ModelWeightsF32 RandomWeights(const ModelConfig& config, uint32_t seed);

// Logits [tokens.size(), vocab_size] of one sequence starting at position 0.
// round_kv, when set, maps every K (after RoPE) and V value before attention
// reads it: a KV cache that stores another format.
std::vector<float> DenseForward(const ModelConfig& config, const ModelWeightsF32& weights,
                                const std::vector<int32_t>& tokens,
                                const std::function<float(float)>& round_kv = nullptr);

}  // namespace onecard::engine::testing

#endif  // ONECARD_TESTS_ENGINE_RUNTIME_CPU_TINY_MODEL_H_
