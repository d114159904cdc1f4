// The CUDA backend's weights in device memory. A projection's weight is a
// typed value (CudaWeight: format, shape, data, scales and offsets, where it
// lives), fused as the kernels want it: qkv = [Wq; Wk; Wv] (and the Qwen2
// biases [bq; bk; bv]), gate_up = [Wgate; Wup] in BF16 or, 4-bit, gate and up
// interleaved by 8 rows (InterleavedGateUpRows), so that one 16-row tile holds
// both halves of 8 outputs of SiLU(gate) * up. Embeddings, LM head, norms and
// biases are BF16. Every tensor is carved from one arena in a fixed order, as
// CountWeightBytes (weight_spec.h) counts them.
// Sources: a checkpoint read one tensor at a time (GGUF Q4_0 / Q4_1 blocks
// and HF GPTQ / AWQ / compressed-tensors projections repacked without
// re-rounding; GGUF Q4_K with its per-32 scale d sc and min dmin m rounded
// once to fp16, layer_tensors.h; the rest dequantized and rounded to BF16,
// nearest even), host tensors (tests), or seeded random
// values generated on the device (synthetic_weights.cu): BF16 uniform in +-sqrt(3 / fan_in) for
// projections, 1 +- 0.05 for norms, +-1 for embeddings, never zero; 4-bit
// random codes with scales sqrt(3 / fan_in) / 8 * (0.5..1.5) (act order: a
// seeded permutation of the columns, made on the host); FP8 the codes of
// 448 u, u uniform in [-1, 1), with scales sqrt(3 / fan_in) / 448 * (0.5..1.5).
// GPTQ act order (a g_idx out of column order) stays 4-bit: the columns are
// sorted by group at load and the map uploaded with the weight (where every
// part of a fused projection has the same map, as GPTQ's order from the
// shared input's Hessian gives; otherwise that projection is BF16).
// Tested through tests/gpu/cuda_model_runner_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CUDA_CUDA_WEIGHTS_H_
#define ONECARD_ENGINE_RUNTIME_CUDA_CUDA_WEIGHTS_H_

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/kernels/fp8_weight.h"
#include "engine/kernels/int4_gemm.h"
#include "engine/kernels/int4_matrix.h"
#include "engine/model/layer_tensors.h"
#include "engine/model/model_config.h"
#include "engine/runtime/cuda/device_context.h"
#include "engine/runtime/cuda/weight_spec.h"

namespace onecard::engine {

struct CudaWeight {
  ProjectionSpec spec;
  int64_t n = 0;  // [n, k]
  int64_t k = 0;
  Residency residency = Residency::kDevice;
  void* data = nullptr;        // BF16 [n, k], the 4-bit codes (int4_layout.h) or FP8 codes [n, k]
  void* scales = nullptr;      // 4-bit: uint32 [n / 16][8][k / group]; FP8: fp32 (fp8_weight.h)
  void* offsets = nullptr;     // 4-bit kZero / kFloat: as scales
  int32_t* columns = nullptr;  // 4-bit act order: int32 [k], stored column j is column columns[j]
  Int4WeightView Int4() const { return {data, scales, offsets, n, k, spec.group, spec.offsets}; }
  Fp8WeightView Fp8() const {
    return {data, static_cast<const float*>(scales), n, k, spec.fp8_scales};
  }
};

struct CudaLayerWeights {
  void* attn_norm = nullptr;                     // BF16 [hidden]
  void* bqkv = nullptr;                          // BF16 [(heads + 2 kv_heads) head_dim] or null
  void* ffn_norm = nullptr;                      // BF16 [hidden]
  std::array<CudaWeight, kNumProjections> proj;  // by Projection
  const CudaWeight& operator[](Projection p) const { return proj[static_cast<int>(p)]; }
};

struct CudaWeights {
  void* embedding = nullptr;   // BF16 [vocab, hidden]
  void* final_norm = nullptr;  // BF16 [hidden]
  void* lm_head = nullptr;     // BF16 [vocab, hidden]; the embedding when tied
  std::vector<CudaLayerWeights> layers;
};

// Where each layer's tensors are carved and what follows its filling, for a
// model whose layers do not all live on the card (weight_stream.h): a layer
// for which layer_arena gives an arena (not null) is carved from it, from its
// start, instead of the main arena, and `filled` runs once the layer holds
// its values (before the next layer is filled: streamed layers share slots).
struct WeightHomes {
  std::function<std::unique_ptr<DeviceArena>(int64_t layer)> layer_arena;
  std::function<absl::Status(int64_t layer)> filled;
};

// A projection's parts in the fused order: [q; k; v], o, [gate; up], down.
std::vector<TensorPart> ProjectionParts(Projection projection);

// Host tensors, one at a time, for LoadWeights: a checkpoint's (layer_tensors.h),
// or tests' own.
class HostTensorSource {
 public:
  virtual ~HostTensorSource() = default;
  virtual absl::StatusOr<std::vector<float>> F32(TensorPart part, int64_t layer) = 0;
  // Rows [begin, begin + count) of a [rows, cols] tensor in fp32 (the
  // embedding and head tables are read in slices: a 70B's is 4 GB in fp32);
  // InvalidArgument when the tensor does not hold rows x cols values.
  // Default: F32() and the slice.
  virtual absl::StatusOr<std::vector<float>> F32Rows(TensorPart part, int64_t layer, int64_t rows,
                                                     int64_t cols, int64_t begin, int64_t count);
  // Asked only for the parts of projections the spec makes 4-bit.
  virtual absl::StatusOr<Int4Matrix> Int4(TensorPart part, int64_t layer) = 0;
  // Asked only for the parts of projections the spec makes FP8: the codes
  // and scales as stored. Default: Unimplemented (a source without FP8).
  virtual absl::StatusOr<Fp8Matrix> Fp8(TensorPart part, int64_t layer);
  // The part's codes as stored eight to a word (ReadTensorInt4Words), which
  // LoadWeights packs without an Int4Matrix where their offsets are the
  // spec's kind; nullopt (the default) where the source has no such form, and
  // Int4() is asked instead. Valid until ReleaseRead().
  virtual absl::StatusOr<std::optional<Int4WordMatrix>> Int4Words(TensorPart part, int64_t layer) {
    return std::nullopt;
  }
  // Called by LoadWeights after each layer (and after the last tensors): a
  // source over mapped files gives back the pages it has read since.
  virtual void ReleaseRead() {}
};

// The spec a checkpoint's tensors give, layer by layer: a projection is 4-bit
// where every part of it is 4-bit (Int4FormOf: GGUF Q4_0 / Q4_1 / Q4_K in
// groups of 32, GPTQ, AWQ, compressed-tensors) with one group size and one
// column order (act order: the same map in every part), and its shape suits
// the kernels; the offsets are the widest kind of its parts (mins where any
// part is Q4_1 or Q4_K, zero points where any has them). Otherwise BF16: GGUF
// Q5_K, Q6_K and Q8_0 (5-, 6- and 8-bit codes) are dequantized with ggml's
// formulas and rounded to BF16, and so is a fused projection with one such
// part (a Q4_K_M file's Q6_K attn_v makes that layer's whole qkv BF16, its
// Q6_K ffn_down that layer's down). A projection is FP8 where every part is
// an FP8 tensor (compressed-tensors, HF fp8 / fbgemm_fp8: Fp8FormOf) with one
// scale kind and its shape suits the FP8 kernels (CheckFp8Shape); else BF16
// (a block-scaled qkv whose k and v are not whole 128-row blocks, a module
// the checkpoint left unquantized). `all_bf16`: every projection BF16.
absl::StatusOr<ModelWeightsSpec> CheckpointWeightsSpec(const Checkpoint& checkpoint, bool all_bf16);

// A HostTensorSource over a checkpoint's mapped tensors; ReleaseRead drops
// the pages of the tensors read since the last call (DropMappedPages).
std::unique_ptr<HostTensorSource> CheckpointTensorSource(const Checkpoint& checkpoint);

// Fills the weights from `source`, layer by layer: each projection's parts are
// fused in host memory (BF16, packed 4-bit for a 4-bit spec: straight from
// the stored words where Int4Words gives them, or FP8 codes and scales as
// stored) and copied to the device; the
// host holds one BF16 projection at a time, or one layer's packed 4-bit
// projections (buffers reused layer after layer) and one part's Int4Matrix,
// and source.ReleaseRead() follows every layer.
// `homes` (may be null): WeightHomes above.
absl::StatusOr<CudaWeights> LoadWeights(const ModelConfig& config, const ModelWeightsSpec& spec,
                                        HostTensorSource& source, DeviceArena* arena,
                                        const WeightHomes* homes = nullptr);

// Pointers into `arena` (or a layer's own, WeightHomes) for every tensor
// (contents undefined).
absl::StatusOr<CudaWeights> CarveWeights(const ModelConfig& config, const ModelWeightsSpec& spec,
                                         DeviceArena* arena, const WeightHomes* homes = nullptr);

absl::StatusOr<CudaWeights> RandomWeights(const ModelConfig& config, const ModelWeightsSpec& spec,
                                          uint64_t seed, DeviceArena* arena, cudaStream_t stream,
                                          const WeightHomes* homes = nullptr);

// Device kernels (synthetic_weights.cu), values from a counter-based hash of
// (seed, index):
// n BF16 values center + half_width * u, u uniform in [-1, 1); a value that
// rounds to zero becomes center + half_width.
absl::Status FillUniformBf16(void* data, int64_t n, uint64_t seed, float center, float half_width,
                             cudaStream_t stream);
// FP8 weights: num_codes E4M3 codes (a multiple of 4) of 448 u, and
// num_scales fp32 scales scale * (1 + 0.5 u).
absl::Status FillFp8(void* codes, int64_t num_codes, float* scales, int64_t num_scales,
                     uint64_t seed, float scale, cudaStream_t stream);
// n random 32-bit words (4-bit codes).
absl::Status FillRandomWords(void* data, int64_t n, uint64_t seed, cudaStream_t stream);
// n words of two fp16 scales, each scale * (1 + 0.5 u); the offsets (when not
// null): zero points 0..15 (kZero) or mins -scale * (8 + 2 u) (kFloat).
absl::Status FillInt4Scales(void* scales, void* offsets, int64_t n, uint64_t seed, float scale,
                            Int4Offsets kind, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_CUDA_WEIGHTS_H_
