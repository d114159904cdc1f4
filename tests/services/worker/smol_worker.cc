// The integration tests' real worker. See smol_worker.h.
#include "tests/services/worker/smol_worker.h"

#include <filesystem>
#include <utility>

#include "absl/synchronization/notification.h"

namespace onecard::testing {

bool SmolModelPresent() { return std::filesystem::exists(kSmolModel); }

v1::WorkerConfig SmolWorkerConfig() {
  v1::WorkerConfig config;
  config.set_model_path(kSmolModel);
  config.set_model_name("smol");
  config.set_listen_address("127.0.0.1:0");
  config.set_metrics_listen_address("127.0.0.1:0");
  config.set_num_threads(2);
  config.mutable_scheduler()->set_max_num_seqs(64);
  return config;
}

absl::StatusOr<std::unique_ptr<services::WorkerServer>> StartSmolWorker(
    const std::function<void(v1::WorkerConfig*)>& edit) {
  services::WorkerServerOptions options;
  options.config = SmolWorkerConfig();
  if (edit) edit(&options.config);
  absl::StatusOr<std::unique_ptr<services::WorkerServer>> server =
      services::WorkerServer::Create(std::move(options));
  if (!server.ok()) return server.status();
  if (absl::Status s = (*server)->LoadEngine(); !s.ok()) return s;
  return server;
}

absl::StatusOr<std::vector<int32_t>> GenerateInProcess(engine::Engine& engine,
                                                       engine::GenerationRequest request) {
  std::vector<int32_t> tokens;
  absl::Status status;
  absl::Notification done;
  request.on_output = [&](const engine::StreamOutput& out) {
    tokens.insert(tokens.end(), out.token_ids.begin(), out.token_ids.end());
    if (!out.finished) return;
    if (out.finish_reason == engine::FinishReason::kError) status = out.error;
    done.Notify();
  };
  absl::StatusOr<uint64_t> id = engine.Submit(std::move(request));
  if (!id.ok()) return id.status();
  done.WaitForNotification();
  if (!status.ok()) return status;
  return tokens;
}

}  // namespace onecard::testing
