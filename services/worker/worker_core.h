// WorkerCore: what the worker's gRPC handlers call. It holds the engine
// (absent while the model loads), admits or refuses requests (loading or
// draining: UNAVAILABLE; KV cache at the watermark or the engine's waiting
// queue full: RESOURCE_EXHAUSTED with a retry-after-ms trailer), converts
// them to engine requests (services/common/request_convert.h; the engine's
// Submit checks their fields: INVALID_ARGUMENT naming the field), starts
// their streams and counts the streams still open (for the drain).
// Tested by tests/services/worker/worker_core_test.cc (fake engine).
#ifndef ONECARD_SERVICES_WORKER_WORKER_CORE_H_
#define ONECARD_SERVICES_WORKER_WORKER_CORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/request_validation.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "onecard/v1/config.pb.h"
#include "onecard/v1/generation.pb.h"
#include "onecard/v1/worker.pb.h"
#include "services/worker/generate_stream.h"
#include "services/worker/worker_metrics.h"

namespace onecard::services {

class WorkerCore {
 public:
  using Reactor = grpc::ServerWriteReactor<grpc::ByteBuffer>;

  // `config` has its defaults applied; `metrics` may be null and must
  // outlive every stream.
  WorkerCore(v1::WorkerConfig config, WorkerMetrics* metrics);

  // Publishes the loaded engine; before this, requests get UNAVAILABLE. The
  // engine must outlive every stream. `worker_id` prefixes the request ids
  // the worker makes; `on_change` is called when a request ends (load
  // reports) and may be empty.
  void SetEngine(engine::Engine* engine, std::string worker_id, std::function<void()> on_change);
  // From now on new requests get UNAVAILABLE; open streams continue.
  void SetDraining();
  bool draining() const { return draining_.load(); }

  Reactor* Generate(grpc::CallbackServerContext* context, const v1::WorkerGenerateRequest& request);
  Reactor* Generate(grpc::CallbackServerContext* context, const v1::GenerateRequest& request);
  // Ends a Generate call at once with `status` (a request that did not parse,
  // a caller without the router's identity); counted as refused.
  Reactor* Reject(grpc::CallbackServerContext* context, absl::Status status);
  absl::StatusOr<v1::TokenizeResponse> Tokenize(const v1::TokenizeRequest& request) const;
  absl::StatusOr<v1::ListModelsResponse> ListModels() const;
  absl::StatusOr<v1::WorkerInfo> Info() const;

  // Engine stats (zeros before loading) with the stream count and state.
  WorkerSnapshot Snapshot() const;
  // Blocks until no stream is open or `timeout` passes; true when none is.
  bool WaitForStreams(absl::Duration timeout);
  int64_t active_streams() const;

 private:
  absl::Status Admit(const engine::Engine* engine) const;
  GenerateStream::Hooks MakeHooks();
  Reactor* StartOrReject(grpc::CallbackServerContext* context, engine::Engine* engine,
                         absl::StatusOr<engine::GenerationRequest> request, absl::Time arrival);
  v1::ModelInfo ModelInfoOf(const engine::Engine& engine) const;
  const engine::ChatTemplate* ChatTemplateOrNull() const {
    return chat_template_.has_value() ? &*chat_template_ : nullptr;
  }
  absl::StatusOr<engine::GenerationRequest> Convert(const v1::WorkerGenerateRequest& request) const;
  absl::StatusOr<engine::GenerationRequest> Convert(const v1::GenerateRequest& request,
                                                    const engine::Tokenizer& tokenizer) const;

  const v1::WorkerConfig config_;
  WorkerMetrics* const metrics_;

  std::atomic<engine::Engine*> engine_{nullptr};
  // Written once, before engine_ is published.
  std::string model_name_;
  engine::RequestLimits limits_;
  std::optional<engine::ChatTemplate> chat_template_;  // none: the model has none
  std::string worker_id_;
  std::function<void()> on_change_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_request_id_{1};

  mutable absl::Mutex streams_mu_;
  int64_t active_streams_ ABSL_GUARDED_BY(streams_mu_) = 0;
};

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_WORKER_WORKER_CORE_H_
