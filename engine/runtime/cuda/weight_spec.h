// The formats of a model's weights on the CUDA backend, decided before any
// memory is planned: a projection (qkv, o, gate_up, down of each layer) is
// BF16, 4-bit (int4_layout.h: group size and offset kind) or FP8 E4M3
// (fp8_weight.h: row or 128 x 128 block scales); embeddings, the
// LM head, norms and biases are BF16. The memory plan counts bytes from here
// (per format, for its printout), and the runner carves its weights from
// here, so the two cannot disagree. Plain C++.
// Tested by tests/gpu/memory_plan_test.cc (label unit).
#ifndef ONECARD_ENGINE_RUNTIME_CUDA_WEIGHT_SPEC_H_
#define ONECARD_ENGINE_RUNTIME_CUDA_WEIGHT_SPEC_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/kernels/fp8_weight.h"
#include "engine/kernels/int4_layout.h"
#include "engine/model/model_config.h"

namespace onecard::engine {

enum class WeightFormat : uint8_t { kBf16, kInt4, kFp8 };

// Where a weight lives (the offload issue adds pinned host memory).
enum class Residency : uint8_t { kDevice };

struct ProjectionSpec {
  WeightFormat format = WeightFormat::kBf16;
  int32_t group = 0;  // kInt4: columns a scale covers
  Int4Offsets offsets = Int4Offsets::kSymmetric;
  // kInt4: columns stored in another order (GPTQ act order sorted by group,
  // Int4Matrix::columns); the weight carries the column map and the runner
  // gathers its input by it (gather_columns.h).
  bool act_order = false;
  Fp8Scales fp8_scales = Fp8Scales::kRow;  // kFp8
  // "bf16", "int4 g128", "int4 g32 zero", "int4 g32 min", "int4 g128 zero act-order",
  // "fp8", "fp8 block128"
  std::string Name() const;
  bool operator==(const ProjectionSpec&) const = default;
};

enum class Projection { kQkv = 0, kO = 1, kGateUp = 2, kDown = 3 };
inline constexpr int kNumProjections = 4;

struct ModelWeightsSpec {
  // [layer][Projection]
  std::vector<std::array<ProjectionSpec, kNumProjections>> layers;
  // Every projection of every layer in one format.
  static ModelWeightsSpec Uniform(const ModelConfig& config, const ProjectionSpec& spec);
};

// [n, k] of a projection as the runner fuses it: qkv = [q; k; v] rows,
// gate_up = gate and up rows (interleaved by 8 for 4-bit, [gate; up] for BF16).
std::array<int64_t, 2> ProjectionShape(const ModelConfig& config, Projection projection);

// Bytes of one projection's weight (each array 256-byte aligned; an act-order
// weight's column map too).
int64_t ProjectionBytes(const ProjectionSpec& spec, int64_t n, int64_t k);

// The weights' bytes by format name (ProjectionSpec::Name() for projections,
// "bf16" also holding embeddings, LM head, norms and biases), and the total.
struct WeightBytes {
  std::map<std::string, int64_t> by_format;
  int64_t total = 0;
  std::string ToString() const;  // "int4 g128 33.59 GiB + bf16 1.96 GiB"
};
absl::StatusOr<WeightBytes> CountWeightBytes(const ModelConfig& config,
                                             const ModelWeightsSpec& spec);
// The parts CountWeightBytes sums: one layer's weights in their formats
// (its four projections, norms and bias; `layer` < spec.layers.size(), the
// shapes already checked), a layer's BF16 norms and bias, and the weights
// outside the layers (embeddings, the LM head unless tied, the final norm).
int64_t LayerWeightBytes(const ModelConfig& config, const ModelWeightsSpec& spec, int64_t layer);
int64_t LayerBf16Bytes(const ModelConfig& config);
int64_t OtherWeightBytes(const ModelConfig& config);
// The token embedding table's share of OtherWeightBytes.
int64_t EmbeddingTableBytes(const ModelConfig& config);

// Whether 4-bit weights take this projection's shape (int4_layout.h); the
// error names the projection and the supported shapes.
absl::Status CheckInt4Shape(const ModelConfig& config, Projection projection, int32_t group);

// Whether FP8 weights take this projection's shape: columns % 16 == 0 (the
// GEMV's 16-code loads; cuBLASLt's FP8 alignment), and for block scales the
// parts of a fused projection whole 128-row blocks (q, k, v; gate, up).
absl::Status CheckFp8Shape(const ModelConfig& config, Projection projection, Fp8Scales scales);

// "int4" (group 128, symmetric), "int4-g64", "int4-g32-zero", "int4-zero-act"
// (act order: a seeded random column map), "fp8" (row scales),
// "fp8-block128", "bf16": the weight formats the synthetic models and the
// bench presets take.
absl::StatusOr<ProjectionSpec> ParseProjectionSpec(absl::string_view text);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_WEIGHT_SPEC_H_
