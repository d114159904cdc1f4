// One tensor of a decoder at a time: the checkpoint's tensor for a part of the
// model (GGUF "blk.N.attn_q.weight" or HF "model.layers.N.self_attn.q_proj.weight"),
// found and shape-checked against the ModelConfig, then read as fp32 or, for
// 4-bit GGUF blocks and HF 4-bit projections (GPTQ, AWQ, compressed-tensors:
// hf_int4.h, found where the ".weight" is absent), as an Int4Matrix without
// re-rounding, or as the GGUF blocks themselves; HF FP8 E4M3 projections
// (hf_fp8.h: an F8_E4M3 ".weight" with its scales) as an Fp8Matrix. GGUF llama Q/K
// rows, which llama.cpp's converter permuted for its interleaved RoPE, are
// permuted back (as transformers' GGUF loader does), codes and scales alike.
// Loaders that fill a device layer by layer use it (the CUDA runner), and so
// does LoadWeightsF32 (model_weights.h).
// Missing tensors give NotFound naming the tensor and the file; wrong shapes
// and dtypes InvalidArgument naming the tensor, the expected and the found.
// Tested by tests/engine/model/layer_tensors_test.cc and, through
// LoadWeightsF32, model_weights_test.cc.
#ifndef ONECARD_ENGINE_MODEL_LAYER_TENSORS_H_
#define ONECARD_ENGINE_MODEL_LAYER_TENSORS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/common/progress.h"
#include "engine/kernels/fp8_weight.h"
#include "engine/kernels/int4_matrix.h"
#include "engine/model/checkpoint.h"
#include "engine/model/hf_fp8.h"
#include "engine/model/hf_int4.h"

namespace onecard::engine {

enum class TensorPart {
  kEmbedding,
  kFinalNorm,
  kLmHead,  // absent when the embeddings are tied
  kAttnNorm,
  kQ,
  kK,
  kV,
  kO,
  kFfnNorm,
  kGate,
  kUp,
  kDown,
  kQBias,  // attention_bias only
  kKBias,
  kVBias,
};

struct ResolvedTensor {
  std::string name;                      // the model's name for it ("...q_proj.weight")
  const TensorView* view = nullptr;      // the tensor; an HF 4-bit one's packed codes
  std::vector<int64_t> shape;            // as the model expects it (outermost first)
  int64_t unpermute_heads = 0;           // > 0: llama.cpp's Q/K row permutation to undo
  std::optional<HfInt4Tensors> hf_int4;  // an HF 4-bit projection's tensors
  std::optional<HfFp8Tensors> hf_fp8;    // an HF FP8 projection's tensors (view: its codes)
};

// The Hugging Face name of `part` (of layer `layer` for the per-layer parts),
// e.g. "model.layers.3.self_attn.q_proj.weight", whatever the checkpoint's
// format (writers of HF folders use it).
std::string HfTensorName(TensorPart part, int64_t layer = 0);

// The tensor of `part` (of layer `layer` for the per-layer parts).
absl::StatusOr<ResolvedTensor> ResolveTensor(const Checkpoint& checkpoint, TensorPart part,
                                             int64_t layer = 0);

// Its values in fp32, row-major, in the HF row and column order (4-bit HF
// projections dequantized: Int4Matrix::Value, columns in their own order;
// FP8 ones: Fp8Matrix::Value, the code's value times its scale).
absl::StatusOr<std::vector<float>> ReadTensorF32(const ResolvedTensor& tensor);

// The GGUF blocks of a block-quantized tensor (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K,
// Q6_K: quant_blocks.h) exactly as stored, row after row in the HF row order
// (llama.cpp's Q/K permutation undone on whole rows: a row is whole blocks).
// InvalidArgument naming the tensor and the file for another dtype, a shape
// that is not a matrix of whole blocks a row, or bytes that do not match it.
absl::StatusOr<std::vector<uint8_t>> ReadTensorBlocks(const ResolvedTensor& tensor);

// Runs job(i) for every i in [0, n) on up to two threads (a loader's one job
// a tensor), counting each on `progress`; returns the first failure in index
// order.
absl::Status RunTensorJobs(size_t n, const std::function<absl::Status(size_t)>& job,
                           Progress& progress);

// Whether ReadTensorInt4 takes a GGUF tensor of this dtype: Q4_0
// (kSymmetric), Q4_1 and Q4_K (kFloat), groups of 32. A Q4_K super-block
// (8 sub-blocks of 32, y = d sc q - dmin m) is 8 groups with scale d sc and
// offset -(dmin m). Q5_K, Q6_K and Q8_0 are not 4-bit (read as fp32).
bool IsInt4Dtype(DType dtype);

// The 4-bit form ReadTensorInt4 gives a tensor, known before its codes are
// read: the group size, the offset kind, and whether the columns are
// reordered (an act-order g_idx, read here) and how.
struct Int4Form {
  int32_t group = 0;
  Int4Offsets offsets = Int4Offsets::kSymmetric;
  bool reordered = false;
  std::vector<int32_t> columns;  // reordered: ReadTensorInt4's Int4Matrix::columns
};
// nullopt for a tensor that is not 4-bit.
absl::StatusOr<std::optional<Int4Form>> Int4FormOf(const ResolvedTensor& tensor);

// The 4-bit codes, fp16 scales and offsets of a Q4_0 / Q4_1 / Q4_K tensor
// or an HF 4-bit projection exactly as stored (Int4Matrix::Value equals the
// gguf package's dequantization, and the upstream dequantizations of
// hf_int4.h before their fp16 rounding), in the HF row order. Q4_K's group
// scales d sc and offsets -(dmin m) are the exact fp32 products rounded to
// fp16 (nearest even), the one rounding this adds; a product that is not a
// finite fp16 is InvalidArgument naming the tensor. With a pool, GGUF blocks
// are read in parallel over rows (the same values).
absl::StatusOr<Int4Matrix> ReadTensorInt4(const ResolvedTensor& tensor, ThreadPool* pool = nullptr);

// The codes of an HF 4-bit projection as stored, eight to a word along k,
// where ReadHfInt4Words gives them (GPTQ, columns in order, fp16 scales), for
// packing into the device layout without ReadTensorInt4's Int4Matrix (the
// same bytes); nullopt otherwise.
absl::StatusOr<std::optional<Int4WordMatrix>> ReadTensorInt4Words(const ResolvedTensor& tensor);

// The scale kind ReadTensorFp8 gives an HF FP8 projection (kRow for per-tensor
// and per-channel scales, kBlock128 for 128 x 128 blocks); nullopt for a
// tensor that is not FP8.
std::optional<Fp8Scales> Fp8FormOf(const ResolvedTensor& tensor);

// An HF FP8 projection's E4M3 codes exactly as stored and its scales in
// fp32 (exact: F32, BF16 and F16 all widen exactly), a per-tensor scale
// repeated for every row. InvalidArgument naming the tensor and the file for
// a tensor that is not FP8, a NaN code or a scale that is not finite and
// positive.
absl::StatusOr<Fp8Matrix> ReadTensorFp8(const ResolvedTensor& tensor);

// llama.cpp stores each head's rows as [head_dim / 2, 2] pairs (row i * 2 + j);
// HF's order is [2, head_dim / 2] (row j * head_dim / 2 + i). Returns, for
// each HF row, the stored row it comes from.
std::vector<int64_t> LlamaCppRowSources(int64_t num_heads, int64_t rows);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_LAYER_TENSORS_H_
