// A real worker for the integration tests: WorkerServer in this process
// around the real engine on the CPU backend with SmolLM2-135M-Instruct
// (models/SmolLM2-135M-Instruct.Q4_1.gguf, fetched by scripts/fetch-model.sh),
// on loopback ports picked by the OS.
#ifndef ONECARD_TESTS_SERVICES_WORKER_SMOL_WORKER_H_
#define ONECARD_TESTS_SERVICES_WORKER_SMOL_WORKER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "onecard/v1/config.pb.h"
#include "onecard/v1/generation.grpc.pb.h"
#include "onecard/v1/worker.grpc.pb.h"
#include "services/worker/worker_server.h"

namespace onecard::testing {

inline constexpr char kSmolModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

bool SmolModelPresent();

// The config the integration tests share (2 CPU threads, 64 sequences).
v1::WorkerConfig SmolWorkerConfig();

// Creates and loads a worker; `edit` may change the config first.
absl::StatusOr<std::unique_ptr<services::WorkerServer>> StartSmolWorker(
    const std::function<void(v1::WorkerConfig*)>& edit = {});

// The tokens the engine streams for `request`, submitted to it directly (no
// gRPC); the request's callback and deadline are set here.
absl::StatusOr<std::vector<int32_t>> GenerateInProcess(engine::Engine& engine,
                                                       engine::GenerationRequest request);

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_SERVICES_WORKER_SMOL_WORKER_H_
