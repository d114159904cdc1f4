#include "tests/fuzz/request_fixture.h"

#include <cstdio>
#include <cstdlib>

#include "services/common/request_convert.h"

namespace onecard::fuzz {

const RequestFixture& GetRequestFixture() {
  static const RequestFixture* f = [] {
    absl::StatusOr<router::RoutingModel> model =
        router::LoadRoutingModel("models/SmolLM2-135M-Instruct.Q4_1.gguf", "");
    if (!model.ok()) {
      std::fprintf(stderr, "fuzz: %s (run scripts/fetch-model.sh)\n",
                   model.status().ToString().c_str());
      std::abort();
    }
    auto* fixture = new RequestFixture{std::move(*model), nullptr, {}};
    fixture->preparer = std::make_unique<router::RequestPreparer>(
        fixture->model.tokenizer.get(), fixture->model.chat_template, fixture->model.spec,
        router::PrepOptions{});
    fixture->limits = {.max_context = fixture->model.spec.context_length,
                       .vocab_size = fixture->model.spec.vocab_size};
    return fixture;
  }();
  return *f;
}

router::Tenant FuzzTenant() {
  router::Tenant tenant;
  tenant.name = "fuzz";
  tenant.max_priority = router::PriorityClass::kInteractive;
  return tenant;
}

absl::Status WorkerTakes(const onecard::v1::WorkerGenerateRequest& request,
                         const RequestFixture& f) {
  absl::StatusOr<engine::GenerationRequest> converted =
      services::ToEngineRequest(request, f.limits);
  if (!converted.ok()) return converted.status();
  return engine::ValidateRequest(*converted, f.limits);
}

}  // namespace onecard::fuzz
