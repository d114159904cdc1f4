// Fuzz target: a GenerateRequest from arbitrary protobuf bytes through the
// router's validation and preparation (tokenizer, chat template, limits),
// the worker's conversion of the same public request, and the worker's
// conversion of the router's prepared request; the same bytes are also read
// as a WorkerGenerateRequest. Any input must give a status, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "onecard/v1/generation.pb.h"
#include "onecard/v1/worker.pb.h"
#include "router/model_loader.h"
#include "router/request_prep.h"
#include "services/worker/request_convert.h"

namespace {

using namespace onecard;

struct Fixture {
  router::RoutingModel model;
  std::unique_ptr<router::RequestPreparer> preparer;
  services::RequestLimits limits;
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
    fixture->limits.model_name = fixture->model.spec.name;
    fixture->limits.max_context = fixture->model.spec.context_length;
    fixture->limits.vocab_size = fixture->model.spec.vocab_size;
    return fixture;
  }();
  return *f;
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
    (void)services::FromGenerateRequest(request, f.limits, *f.model.tokenizer);
    if (prepared.ok()) {
      absl::StatusOr<engine::GenerationRequest> converted =
          services::FromWorkerRequest(prepared->worker_request, f.limits);
      if (!converted.ok()) std::abort();  // the worker must take what the router prepared
    }
  }
  v1::WorkerGenerateRequest worker_request;
  if (worker_request.ParseFromArray(data, static_cast<int>(size))) {
    (void)services::FromWorkerRequest(worker_request, f.limits);
  }
  return 0;
}
