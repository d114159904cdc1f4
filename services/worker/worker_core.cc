// Admission, conversion and stream bookkeeping behind the worker's
// handlers. See worker_core.h.
#include "services/worker/worker_core.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "engine/common/status_macros.h"
#include "engine/model/model_config.h"
#include "services/common/proto_time.h"
#include "services/common/request_convert.h"
#include "services/common/status.h"
#include "services/worker/worker_config.h"

namespace onecard::services {

WorkerCore::WorkerCore(v1::WorkerConfig config, WorkerMetrics* metrics)
    : config_(std::move(config)), metrics_(metrics) {}

void WorkerCore::SetEngine(engine::Engine* engine, std::string worker_id,
                           std::function<void()> on_change) {
  worker_id_ = std::move(worker_id);
  model_name_ = ServedModelName(config_);
  limits_.max_context = engine->max_context();
  limits_.vocab_size = engine->config().vocab_size;
  limits_.default_max_tokens = config_.default_max_tokens();
  absl::StatusOr<engine::ChatTemplate> chat =
      engine::ChatTemplate::ForTokenizer(engine->tokenizer());
  if (chat.ok()) chat_template_ = *std::move(chat);
  on_change_ = std::move(on_change);
  engine_.store(engine, std::memory_order_release);
}

void WorkerCore::SetDraining() { draining_.store(true); }

absl::Status WorkerCore::Admit(const engine::Engine* engine) const {
  if (draining_.load()) {
    return absl::UnavailableError("the worker is draining; send the request to another worker");
  }
  if (engine == nullptr) return absl::UnavailableError("the worker is still loading its model");
  const double watermark = config_.admission().kv_watermark();
  if (watermark <= 0) return absl::OkStatus();
  const engine::EngineStats stats = engine->Stats();
  if (stats.kv_blocks_total <= 0 ||
      static_cast<double>(stats.kv_blocks_used) < watermark * stats.kv_blocks_total) {
    return absl::OkStatus();
  }
  return WithRetryAfter(
      absl::ResourceExhaustedError(absl::StrFormat(
          "KV cache %d of %d blocks used, at or above the %.0f%% admission watermark",
          stats.kv_blocks_used, stats.kv_blocks_total, 100 * watermark)),
      FromProtoDuration(config_.admission().retry_after()));
}

GenerateStream::Hooks WorkerCore::MakeHooks() {
  {
    absl::MutexLock lock(&streams_mu_);
    ++active_streams_;
  }
  GenerateStream::Hooks hooks;
  hooks.metrics = metrics_;
  hooks.on_change = on_change_;
  hooks.on_done = [this] {
    absl::MutexLock lock(&streams_mu_);
    --active_streams_;
  };
  hooks.retry_after = FromProtoDuration(config_.admission().retry_after());
  return hooks;
}

WorkerCore::Reactor* WorkerCore::StartOrReject(grpc::CallbackServerContext* context,
                                               engine::Engine* engine,
                                               absl::StatusOr<engine::GenerationRequest> request,
                                               absl::Time arrival) {
  if (!request.ok()) return GenerateStream::Reject(context, request.status(), MakeHooks(), arrival);
  if (request->request_id.empty()) {
    request->request_id = absl::StrCat(worker_id_, "/", next_request_id_.fetch_add(1));
  }
  return GenerateStream::Start(context, engine, *std::move(request), MakeHooks(), arrival);
}

WorkerCore::Reactor* WorkerCore::Generate(grpc::CallbackServerContext* context,
                                          const v1::WorkerGenerateRequest& request) {
  const absl::Time arrival = absl::Now();
  engine::Engine* engine = engine_.load(std::memory_order_acquire);
  if (absl::Status admit = Admit(engine); !admit.ok()) {
    return GenerateStream::Reject(context, std::move(admit), MakeHooks(), arrival);
  }
  return StartOrReject(context, engine, Convert(request), arrival);
}

WorkerCore::Reactor* WorkerCore::Generate(grpc::CallbackServerContext* context,
                                          const v1::GenerateRequest& request) {
  const absl::Time arrival = absl::Now();
  engine::Engine* engine = engine_.load(std::memory_order_acquire);
  if (absl::Status admit = Admit(engine); !admit.ok()) {
    return GenerateStream::Reject(context, std::move(admit), MakeHooks(), arrival);
  }
  return StartOrReject(context, engine, Convert(request, engine->tokenizer()), arrival);
}

WorkerCore::Reactor* WorkerCore::Reject(grpc::CallbackServerContext* context, absl::Status status) {
  return GenerateStream::Reject(context, std::move(status), MakeHooks(), absl::Now());
}

absl::StatusOr<v1::TokenizeResponse> WorkerCore::Tokenize(
    const v1::TokenizeRequest& request) const {
  const engine::Engine* engine = engine_.load(std::memory_order_acquire);
  if (engine == nullptr) return absl::UnavailableError("the worker is still loading its model");
  RETURN_IF_ERROR(CheckRequestSize(request, config_.max_request_bytes()));
  RETURN_IF_ERROR(CheckModel(request.model(), model_name_));
  ASSIGN_OR_RETURN(PromptIds prompt,
                   EncodeInput(request, engine->tokenizer(), ChatTemplateOrNull()));
  v1::TokenizeResponse response;
  response.mutable_token_ids()->Add(prompt.ids.begin(), prompt.ids.end());
  response.set_model(model_name_);
  return response;
}

absl::StatusOr<engine::GenerationRequest> WorkerCore::Convert(
    const v1::WorkerGenerateRequest& request) const {
  RETURN_IF_ERROR(CheckRequestSize(request, config_.max_request_bytes()));
  RETURN_IF_ERROR(CheckModel(request.model(), model_name_));
  return ToEngineRequest(request, limits_);
}

absl::StatusOr<engine::GenerationRequest> WorkerCore::Convert(
    const v1::GenerateRequest& request, const engine::Tokenizer& tokenizer) const {
  RETURN_IF_ERROR(CheckRequestSize(request, config_.max_request_bytes()));
  RETURN_IF_ERROR(CheckModel(request.model(), model_name_));
  ASSIGN_OR_RETURN(PromptIds prompt, EncodeInput(request, tokenizer, ChatTemplateOrNull()));
  return ToEngineRequest(request, std::move(prompt.ids), limits_);
}

v1::ModelInfo WorkerCore::ModelInfoOf(const engine::Engine& engine) const {
  v1::ModelInfo info;
  info.set_id(model_name_);
  info.set_architecture(engine::ArchitectureName(engine.config().architecture));
  info.set_context_length(engine.max_context());
  info.set_vocab_size(static_cast<int32_t>(engine.config().vocab_size));
  info.set_eos_token_id(engine.tokenizer().eos_id());
  return info;
}

absl::StatusOr<v1::ListModelsResponse> WorkerCore::ListModels() const {
  const engine::Engine* engine = engine_.load(std::memory_order_acquire);
  if (engine == nullptr) return absl::UnavailableError("the worker is still loading its model");
  v1::ListModelsResponse response;
  *response.add_models() = ModelInfoOf(*engine);
  return response;
}

absl::StatusOr<v1::WorkerInfo> WorkerCore::Info() const {
  const engine::Engine* engine = engine_.load(std::memory_order_acquire);
  if (engine == nullptr) return absl::UnavailableError("the worker is still loading its model");
  v1::WorkerInfo info;
  info.set_worker_id(worker_id_);
  *info.mutable_model() = ModelInfoOf(*engine);
  info.set_backend(config_.backend());
  info.set_kv_block_size(config_.kv_cache().block_size());
  info.set_kv_blocks_total(engine->Stats().kv_blocks_total);
  info.set_max_num_seqs(config_.scheduler().max_num_seqs());
  info.set_max_waiting(config_.admission().max_waiting());
  info.set_kv_watermark(config_.admission().kv_watermark());
  return info;
}

WorkerSnapshot WorkerCore::Snapshot() const {
  WorkerSnapshot snapshot;
  const engine::Engine* engine = engine_.load(std::memory_order_acquire);
  if (engine != nullptr) snapshot.stats = engine->Stats();
  snapshot.active_streams = active_streams();
  snapshot.draining = draining_.load() || snapshot.stats.draining;
  snapshot.ready = engine != nullptr && !snapshot.draining;
  return snapshot;
}

bool WorkerCore::WaitForStreams(absl::Duration timeout) {
  absl::MutexLock lock(&streams_mu_);
  const auto none_open = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(streams_mu_) {
    return active_streams_ == 0;
  };
  return streams_mu_.AwaitWithTimeout(absl::Condition(&none_open), timeout);
}

int64_t WorkerCore::active_streams() const {
  absl::MutexLock lock(&streams_mu_);
  return active_streams_;
}

}  // namespace onecard::services
