// CreateCpuModelRunner (see cpu_model_runner.h): dequantizes the checkpoint's
// weights to fp32 and hands them to CreateCpuModelRunnerFromWeights.
// Tested by tests/engine/runtime/cpu/cpu_model_runner_golden_test.cc.
#include "engine/runtime/cpu/cpu_model_runner.h"

#include "engine/common/status_macros.h"
#include "engine/model/model_weights.h"

namespace onecard::engine {

absl::StatusOr<std::unique_ptr<ModelRunner>> CreateCpuModelRunner(const Checkpoint& checkpoint,
                                                                  const CpuRunnerOptions& options) {
  ASSIGN_OR_RETURN(ModelWeightsF32 weights, LoadWeightsF32(checkpoint));
  return CreateCpuModelRunnerFromWeights(checkpoint.config, std::move(weights), options);
}

}  // namespace onecard::engine
