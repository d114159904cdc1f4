// CreateCpuModelRunner (see cpu_model_runner.h): loads the checkpoint's
// weights in the options' format and hands them to
// CreateCpuModelRunnerFromCpuWeights.
// Tested by tests/engine/runtime/cpu/cpu_model_runner_golden_test.cc and
// cpu_model_runner_native_test.cc.
#include "engine/runtime/cpu/cpu_model_runner.h"

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/runtime/cpu/cpu_weights.h"

namespace onecard::engine {

absl::StatusOr<std::unique_ptr<ModelRunner>> CreateCpuModelRunner(const Checkpoint& checkpoint,
                                                                  const CpuRunnerOptions& options) {
  if (checkpoint.format == CheckpointFormat::kSynthetic) {
    return absl::InvalidArgumentError(
        absl::StrCat("model path ", checkpoint.path,
                     ": synthetic models are served by the cuda backend only (their weights are "
                     "made in device memory)"));
  }
  ASSIGN_OR_RETURN(CpuWeights weights, LoadCpuWeights(checkpoint, options.weight_format));
  return CreateCpuModelRunnerFromCpuWeights(checkpoint.config, std::move(weights), options,
                                            &checkpoint);
}

}  // namespace onecard::engine
