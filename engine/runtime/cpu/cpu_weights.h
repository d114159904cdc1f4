// CpuWeights: a model's weights as the cpu backend's forward pass reads them.
// Every linear is a CpuLinear (cpu_linear.h: row runs in fp32 or in GGUF
// blocks): q, k and v fused into one [q; k; v] matrix (one pass over the
// normed activations; q, k and v are then views into each token's row) and
// gate and up into one [gate; up] matrix (the layout SiluMul in
// engine/kernels/silu_mul.h reads), each part keeping its own format (a
// Q4_K_M file's Q4_K q and k above its Q6_K v). The embedding is a CpuLinear
// too (rows read with RowF32), and the output projection when the model has
// one. Norms and biases are fp32.
// Two ways to make them:
// - PackCpuWeights: from fp32 weights in memory (synthetic models, tests),
//   sizes checked against the config, errors naming the layer and the part;
// - LoadCpuWeights: from a checkpoint, tensor by tensor (layer_tensors.h), in
//   a CpuWeightFormat (model_runner.h): kNative keeps a GGUF block tensor's
//   blocks, kF32 dequantizes every tensor (the values LoadWeightsF32 gives).
// Tested by tests/engine/runtime/cpu/cpu_weights_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CPU_CPU_WEIGHTS_H_
#define ONECARD_ENGINE_RUNTIME_CPU_CPU_WEIGHTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/runtime/cpu/cpu_linear.h"
#include "engine/runtime/model_runner.h"

namespace onecard::engine {

struct CpuLayerWeights {
  std::vector<float> attn_norm;  // [hidden]
  CpuLinear wqkv;                // [(num_heads + 2 * num_kv_heads) * head_dim, hidden]
  std::vector<float> bqkv;       // [(num_heads + 2 * num_kv_heads) * head_dim] or empty
  CpuLinear wo;                  // [hidden, num_heads * head_dim]
  std::vector<float> ffn_norm;   // [hidden]
  CpuLinear w_gate_up;           // [2 * intermediate, hidden]
  CpuLinear w_down;              // [hidden, intermediate]
};

struct CpuWeights {
  CpuWeightFormat format = CpuWeightFormat::kF32;  // how they were made
  CpuLinear embedding;                             // [vocab, hidden]
  std::vector<CpuLayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]
  CpuLinear lm_head;              // [vocab, hidden]; empty when tied to the embedding
  const CpuLinear& output_weight() const { return lm_head.empty() ? embedding : lm_head; }
  // Bytes held: every CpuLinear's, the norms' and the biases'.
  int64_t bytes() const;
};

// Checks the config's shape fields this backend relies on (InvalidArgument
// naming the field).
absl::Status CheckCpuConfig(const ModelConfig& config);

// Takes the weights: each tensor moves into its CpuLinear (fp32 runs) or
// vector, nothing is copied but the q/k/v biases.
absl::StatusOr<CpuWeights> PackCpuWeights(const ModelConfig& config, ModelWeightsF32 weights);

// Reads every tensor of the decoder from the checkpoint (found and
// shape-checked first: ResolveTensor's NotFound / InvalidArgument naming the
// tensor and the file). A linear whose tensor is a block type the cpu kernels
// multiply (IsCpuLinearDtype, not F32) keeps its blocks with kNative
// (ReadTensorBlocks, HF row order); every other tensor, and every tensor with
// kF32, is read as fp32 (ReadTensorF32: F16 / BF16, HF 4-bit projections,
// the other GGUF quants). The mapped pages of each tensor are dropped once it
// is copied (DropMappedPages), so the peak is about the weights' own size:
// the checkpoint's tensors must be file mappings (OpenCheckpoint's).
absl::StatusOr<CpuWeights> LoadCpuWeights(const Checkpoint& checkpoint, CpuWeightFormat format);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CPU_CPU_WEIGHTS_H_
