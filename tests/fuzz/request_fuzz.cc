// Fuzz target: a GenerateRequest from arbitrary protobuf bytes through the
// router's validation and preparation (tokenizer, chat template, limits),
// the worker's conversion of the same public request, and the worker's
// conversion of the router's prepared request; the same bytes are also read
// as a WorkerGenerateRequest. Any input must give a status, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "engine/runtime/request_validation.h"
#include "onecard/v1/generation.pb.h"
#include "onecard/v1/worker.pb.h"
#include "router/model_loader.h"
#include "router/request_prep.h"
#include "services/common/request_convert.h"

namespace {

using namespace onecard;

struct Fixture {
  router::RoutingModel model;
  std::unique_ptr<router::RequestPreparer> preparer;
  engine::RequestLimits limits;
};

const Fixture& Get() {
  static const Fixture* f = [] {
    absl::StatusOr<router::RoutingModel> model =
        router::LoadRoutingModel("models/SmolLM2-135M-Instruct.Q4_1.gguf", "");
    if (!model.ok()) {
      std::fprintf(stderr, "fuzz: %s (run scripts/fetch-model.sh)\n",
                   model.status().ToString().c_str());
      std::abort();
    }
    auto* fixture = new Fixture{std::move(*model), nullptr, {}};
    fixture->preparer = std::make_unique<router::RequestPreparer>(
        fixture->model.tokenizer.get(), fixture->model.chat_template, fixture->model.spec,
        router::PrepOptions{});
    fixture->limits = {.max_context = fixture->model.spec.context_length,
                       .vocab_size = fixture->model.spec.vocab_size};
    return fixture;
  }();
  return *f;
}

// The worker's path for a request it takes: convert, then the engine's check.
absl::Status WorkerTakes(const v1::WorkerGenerateRequest& request, const Fixture& f) {
  absl::StatusOr<engine::GenerationRequest> converted =
      services::ToEngineRequest(request, f.limits);
  if (!converted.ok()) return converted.status();
  return engine::ValidateRequest(*converted, f.limits);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Fixture& f = Get();
  v1::GenerateRequest request;
  if (request.ParseFromArray(data, static_cast<int>(size))) {
    router::Tenant tenant;
    tenant.name = "fuzz";
    tenant.max_priority = router::PriorityClass::kInteractive;
    absl::StatusOr<router::PreparedRequest> prepared = f.preparer->Prepare(request, tenant);
    // The worker's own path for a public request (its direct Generate).
    absl::StatusOr<services::PromptIds> prompt =
        services::EncodeInput(request, *f.model.tokenizer, &f.model.chat_template);
    if (prompt.ok()) {
      const std::string field = prompt->field;
      absl::StatusOr<engine::GenerationRequest> converted =
          services::ToEngineRequest(request, std::move(prompt->ids), f.limits);
      if (converted.ok()) (void)engine::ValidateRequest(*converted, f.limits, field);
    }
    if (prepared.ok() && !WorkerTakes(prepared->worker_request, f).ok()) {
      std::abort();  // the worker must take what the router prepared
    }
  }
  v1::WorkerGenerateRequest worker_request;
  if (worker_request.ParseFromArray(data, static_cast<int>(size))) {
    (void)WorkerTakes(worker_request, f);
  }
  return 0;
}
