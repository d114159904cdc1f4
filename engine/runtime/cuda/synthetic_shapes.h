// Named synthetic model shapes for benchmarks at sizes no disk here holds:
// llama3-8b, llama3-70b, qwen2-72b, mistral-large-123b (the published
// configurations; the served context is the one the memory planner sizes).
// The CUDA runner fills their weights with seeded random values in device
// memory (synthetic_weights.cu). Plain C++: also built without CUDA.
// Tested by tests/gpu/memory_plan_test.cc (SyntheticShapesTest; label unit).
#ifndef ONECARD_ENGINE_RUNTIME_CUDA_SYNTHETIC_SHAPES_H_
#define ONECARD_ENGINE_RUNTIME_CUDA_SYNTHETIC_SHAPES_H_

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

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_SYNTHETIC_SHAPES_H_
