// The worker's configuration: defaults for unset fields of
// onecard.v1.WorkerConfig, validation with errors naming the field, and the
// engine options it implies.
// Tested by tests/services/worker/worker_config_test.cc.
#ifndef ONECARD_SERVICES_WORKER_WORKER_CONFIG_H_
#define ONECARD_SERVICES_WORKER_WORKER_CONFIG_H_

#include <string>

#include "absl/status/status.h"
#include "engine/runtime/engine.h"
#include "onecard/v1/config.pb.h"

namespace onecard::services {

// Fills every unset field with the default written in config.proto.
void ApplyWorkerDefaults(v1::WorkerConfig* config);

// InvalidArgument naming the field (e.g. "admission.kv_watermark") and its
// allowed range when a value is out of range (config_bounds.h: threads, host
// memory, loop periods) or a required one is missing.
absl::Status ValidateWorkerConfig(const v1::WorkerConfig& config);

engine::EngineOptions EngineOptionsFromConfig(const v1::WorkerConfig& config);

// The served model name: model_name, else the model file's stem
// ("models/SmolLM2-135M-Instruct.Q4_1.gguf" -> "SmolLM2-135M-Instruct.Q4_1").
std::string ServedModelName(const v1::WorkerConfig& config);

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_WORKER_WORKER_CONFIG_H_
