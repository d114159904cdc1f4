// Named synthetic model shapes for benchmarks at sizes no disk here holds:
// llama3-8b, llama3-70b, qwen2-72b, mistral-large-123b (the published
// configurations; the served context is the one the memory planner sizes).
// The CUDA runner fills their weights with seeded random values in device
// memory (synthetic_weights.cu). A model path "synthetic:<shape>[:<weights>]"
// opens one as a checkpoint (checkpoint.h) wherever a model path is taken:
// the worker, the router, the CLI and the benchmarks serve it with the
// synthetic tokenizer (engine/tokenizer/synthetic_tokenizer.h).
// Tested by tests/gpu/memory_plan_test.cc (SyntheticShapesTest; label unit)
// and tests/engine/model/checkpoint_test.cc (synthetic model paths).
#ifndef ONECARD_ENGINE_MODEL_SYNTHETIC_SHAPES_H_
#define ONECARD_ENGINE_MODEL_SYNTHETIC_SHAPES_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"

namespace onecard::engine {

// NotFound naming the known shapes for an unknown name.
absl::StatusOr<ModelConfig> SyntheticModelConfig(std::string_view name);
std::vector<std::string> SyntheticModelNames();

// Parameters of the decoder's matrices (the FLOPs of a token are twice this,
// plus attention): every projection and the LM head; no embedding or norms.
int64_t MatmulParameters(const ModelConfig& config);

// A model path naming a synthetic model: "synthetic:<shape>" or
// "synthetic:<shape>:<weights>", weights a projection format of the CUDA
// runner (engine/runtime/cuda/weight_spec.h: "bf16", "int4", "int4-g64",
// "fp8", ...; checked when the runner is made). Default weights "bf16".
inline constexpr std::string_view kSyntheticPathPrefix = "synthetic:";
struct SyntheticModelPath {
  std::string shape;
  std::string weights = "bf16";
};
bool IsSyntheticModelPath(std::string_view path);
// InvalidArgument naming the path for a malformed one, NotFound naming the
// known shapes for an unknown shape.
absl::StatusOr<SyntheticModelPath> ParseSyntheticModelPath(std::string_view path);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_SYNTHETIC_SHAPES_H_
