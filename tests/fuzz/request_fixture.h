// The router and worker pieces the request fuzzers (request_fuzz.cc,
// openai_fuzz.cc) drive: SmolLM2's routing model (tokenizer, chat template,
// limits) from models/ and a RequestPreparer over it, built once.
#ifndef ONECARD_TESTS_FUZZ_REQUEST_FIXTURE_H_
#define ONECARD_TESTS_FUZZ_REQUEST_FIXTURE_H_

#include <memory>

#include "absl/status/status.h"
#include "engine/runtime/request_validation.h"
#include "onecard/v1/worker.pb.h"
#include "router/model_loader.h"
#include "router/request_prep.h"

namespace onecard::fuzz {

struct RequestFixture {
  router::RoutingModel model;
  std::unique_ptr<router::RequestPreparer> preparer;
  engine::RequestLimits limits;
};

// Loads models/SmolLM2-135M-Instruct.Q4_1.gguf on the first call; aborts
// when it cannot (run scripts/fetch-model.sh).
const RequestFixture& GetRequestFixture();

// A tenant allowed every priority class.
router::Tenant FuzzTenant();

// The worker's path for a request it takes: convert, then the engine's check.
absl::Status WorkerTakes(const onecard::v1::WorkerGenerateRequest& request,
                         const RequestFixture& f);

}  // namespace onecard::fuzz

#endif  // ONECARD_TESTS_FUZZ_REQUEST_FIXTURE_H_
