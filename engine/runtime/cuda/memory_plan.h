// The CUDA backend's memory plan, computed (not profiled) before anything is
// allocated: the weights in their formats (weight_spec.h) + the step
// workspace + a fixed reserve for the CUDA context, cuBLAS and graphs + KV
// blocks (BF16, or FP8 E4M3: one byte an element, twice the tokens), inside
// --gpu-memory-budget. When not even one full-context sequence
// fits, PlanMemory refuses with ResourceExhausted "<model> needs X GiB,
// budget Y GiB (weights X (int4 g128 A + bf16 B) + ...)".
// The runner allocates exactly the workspace buffers listed here.
// Plain C++ (no CUDA). Tested by tests/gpu/memory_plan_test.cc (label unit).
#ifndef ONECARD_ENGINE_RUNTIME_CUDA_MEMORY_PLAN_H_
#define ONECARD_ENGINE_RUNTIME_CUDA_MEMORY_PLAN_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/runtime/cuda/step_layout.h"
#include "engine/runtime/cuda/weight_spec.h"
#include "engine/runtime/model_runner.h"

namespace onecard::engine {

inline constexpr int64_t kGiB = 1LL << 30;
inline constexpr int64_t kMiB = 1LL << 20;

struct MemoryPlanInput {
  ModelConfig config;
  ModelWeightsSpec weights;           // empty layers: every projection BF16
  int64_t budget_bytes = 0;           // all the device memory the backend may use
  int32_t max_context = 0;            // tokens a sequence may reach; 0 = the model's
  int32_t max_num_seqs = 128;         // sequences (and logit rows) in a step
  int32_t max_batched_tokens = 2048;  // tokens in a step
  int32_t kv_block_size = 16;
  int64_t num_kv_blocks = 0;  // 0 = as many as fit
  // kFp8E4m3: one byte a K or V element (plus the scales); else BF16's two.
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  int32_t num_sms = 132;               // sizes the attention split-K partials
  int64_t reserve_bytes = 768 * kMiB;  // CUDA context, cuBLAS, graphs
  int64_t cublas_workspace_bytes = 32 * kMiB;
  // Weights larger than the card (placement_plan.h): the bytes of weights on
  // the card (its layers, embeddings, LM head, norms and the streaming ring);
  // 0: every weight. offloaded_weight_bytes: those kept in host memory.
  int64_t device_weight_bytes = 0;
  int64_t offloaded_weight_bytes = 0;
};

// The most split-K partials a decode step's o / down product writes
// (BlasGemmParams::splits; folded by the next FusedAddRmsNorm).
inline constexpr int32_t kMaxGemmSplits = 4;

// Workspace buffers (bytes); activations are BF16 [max_batched_tokens, ...].
// The rows of one Fp8Gemm call: a step of more tokens runs its FP8 products
// in chunks of this many, so the fp32 sums' workspace stays at most
// kFp8GemmChunkRows x n (each chunk reads the weight again: at 2048 rows
// that is one byte a 4096 FLOPs of the chunk's product).
inline constexpr int64_t kFp8GemmChunkRows = 2048;

struct WorkspaceSizes {
  int64_t residual = 0;       // [tokens, hidden]
  int64_t normed = 0;         // [tokens, hidden]
  int64_t qkv = 0;            // [tokens, (heads + 2 kv_heads) head_dim]
  int64_t attn_out = 0;       // [tokens, heads head_dim]
  int64_t gate_up = 0;        // [tokens, 2 intermediate]
  int64_t act = 0;            // [tokens, intermediate]
  int64_t rows = 0;           // [seqs, hidden]: gathered logit rows
  int64_t logits = 0;         // fp32 [seqs, vocab]
  int64_t attn_split = 0;     // split-K partials of a decode step
  int64_t gemm_partials = 0;  // fp32 [kMaxGemmSplits, seqs, hidden]: split-K
                              // partials of the o / down products (decode)
  int64_t sample = 0;         // sampling scratch (SampleWorkspaceBytes)
  int64_t out_tokens = 0;     // int32 [seqs]
  int64_t meta = 0;           // StepLayout::size_bytes
  int64_t rope = 0;           // fp32 [head_dim / 2] inverse frequencies
  int64_t cublas = 0;
  int64_t int4_gemm = 0;       // Int4Gemm's split-K workspace (4-bit weights only)
  int64_t int4_norm_fold = 0;  // fp32 [kInt4GemmFoldMaxRows, hidden / 16]: a folded
                               // RMSNorm's sums of squares (4-bit weights only)
  int64_t int4_gather = 0;     // BF16 [kInt4GemmMaxRows, k] of the widest act-order
                               // 4-bit projection's input (GatherColumns); 0 without
  int64_t dequant = 0;         // BF16 [n, k] of the largest 4-bit or FP8 projection:
                               // steps of more rows than their kernels take
                               // dequantize each such weight here for cuBLAS
  int64_t fp8_gemm = 0;        // Fp8Gemm's workspace for kFp8GemmChunkRows rows of
                               // the widest row-scaled FP8 projection (W8A8)
  int64_t kv_scales = 0;       // FP8 KV cache: fp32 K and V scales [layers, kv_heads],
                               // then a layer's K and V amax [kv_heads] (calibration)
  int64_t Total() const;
};

struct MemoryPlan {
  std::string model;
  int64_t budget_bytes = 0;
  int64_t weight_bytes = 0;     // on the card
  WeightBytes weights;          // the model's, by format
  int64_t offloaded_bytes = 0;  // weights in host memory (0 without offload)
  WorkspaceSizes workspace;
  int64_t reserve_bytes = 0;
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  int64_t kv_bytes_per_token = 0;  // all layers, K and V
  int64_t kv_block_bytes = 0;      // all layers, K and V
  // Each layer's K and V pools start 256-byte aligned in the KV arena: up to
  // 256 bytes of padding a pool (a block's bytes need not be a multiple:
  // head_dim 68, one KV head).
  int64_t kv_pool_padding = 0;
  int64_t num_kv_blocks = 0;
  int32_t kv_block_size = 0;
  int32_t max_context = 0;
  int32_t max_blocks_per_seq = 0;
  int32_t max_num_seqs = 0;
  int32_t max_batched_tokens = 0;
  StepLayout step_layout;

  int64_t kv_bytes() const { return num_kv_blocks * kv_block_bytes + kv_pool_padding; }
  int64_t total_bytes() const;
  // Multi-line, human-readable: what each part takes and what is left.
  std::string ToString() const;
};

absl::StatusOr<MemoryPlan> PlanMemory(const MemoryPlanInput& input);

// The device memory a plan of `input` leaves for weights once the workspace,
// the reserve and a KV cache of input.num_kv_blocks blocks (0: one
// full-context sequence's) are counted: what the placement plan
// (placement_plan.h) may fill. ResourceExhausted naming --gpu-memory-budget
// when nothing is left.
absl::StatusOr<int64_t> DeviceBytesForWeights(const MemoryPlanInput& input);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_MEMORY_PLAN_H_
