// Fuzz target: a GenerateRequest from arbitrary protobuf bytes through the
// router's validation and preparation (tokenizer, chat template, limits),
// the worker's conversion of the same public request, and the worker's
// conversion of the router's prepared request; the same bytes are also read
// as a WorkerGenerateRequest. Any input must give a status, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "engine/runtime/request_validation.h"
#include "onecard/v1/generation.pb.h"
#include "onecard/v1/worker.pb.h"
#include "services/common/request_convert.h"
#include "tests/fuzz/request_fixture.h"

using namespace onecard;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fuzz::RequestFixture& f = fuzz::GetRequestFixture();
  v1::GenerateRequest request;
  if (request.ParseFromArray(data, static_cast<int>(size))) {
    absl::StatusOr<router::PreparedRequest> prepared =
        f.preparer->Prepare(request, fuzz::FuzzTenant());
    // The worker's own path for a public request (its direct Generate).
    absl::StatusOr<services::PromptIds> prompt =
        services::EncodeInput(request, *f.model.tokenizer, &f.model.chat_template);
    if (prompt.ok()) {
      const std::string field = prompt->field;
      absl::StatusOr<engine::GenerationRequest> converted =
          services::ToEngineRequest(request, std::move(prompt->ids), f.limits);
      if (converted.ok()) (void)engine::ValidateRequest(*converted, f.limits, field);
    }
    if (prepared.ok() && !fuzz::WorkerTakes(prepared->worker_request, f).ok()) {
      std::abort();  // the worker must take what the router prepared
    }
  }
  v1::WorkerGenerateRequest worker_request;
  if (worker_request.ParseFromArray(data, static_cast<int>(size))) {
    (void)fuzz::WorkerTakes(worker_request, f);
  }
  return 0;
}
