// Fuzz target: an HTTP API request body (arbitrary bytes) parsed as both
// OpenAI endpoints (router/openai_request.h: /v1/completions and
// /v1/chat/completions), then, when it parses, through the router's
// preparation (tokenizer, chat template, limits) with the refusal renamed
// to the client's field, and the worker's conversion of what the router
// prepared. Checked by abort: a refusal is INVALID_ARGUMENT with a message
// (the field it names), and the worker takes every request the router
// prepared.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "router/openai_request.h"
#include "tests/fuzz/request_fixture.h"

using namespace onecard;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fuzz::RequestFixture& f = fuzz::GetRequestFixture();
  const absl::string_view body(reinterpret_cast<const char*>(data), size);
  for (const router::OpenAiEndpoint endpoint :
       {router::OpenAiEndpoint::kCompletions, router::OpenAiEndpoint::kChat}) {
    router::OpenAiRequest request;
    const absl::Status parsed = router::ParseOpenAiRequest(body, endpoint, &request);
    if (!parsed.ok()) {
      if (parsed.code() != absl::StatusCode::kInvalidArgument || parsed.message().empty()) {
        std::abort();  // a bad body is the client's error, and says why
      }
      (void)router::NamedField(parsed);
      continue;
    }
    absl::StatusOr<router::PreparedRequest> prepared =
        f.preparer->Prepare(request.request, fuzz::FuzzTenant());
    if (!prepared.ok()) {
      const absl::Status renamed = router::InOpenAiTerms(prepared.status(), request);
      if (renamed.code() != prepared.status().code()) std::abort();
      (void)router::NamedField(renamed);
    } else if (!fuzz::WorkerTakes(prepared->worker_request, f).ok()) {
      std::abort();  // the worker must take what the router prepared
    }
  }
  return 0;
}
