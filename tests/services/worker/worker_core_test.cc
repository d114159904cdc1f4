// Tests of WorkerCore through the worker's gRPC services with a fake
// engine: refusals while loading and draining, at the KV watermark and for
// invalid or oversized requests (each naming the field, the engine never
// seeing them), the info RPCs, request ids, and stream bookkeeping. The
// expected values are the fake engine's and the fake tokenizer's.
#include "services/worker/worker_core.h"

#include <string>

#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "services/common/service_auth.h"
#include "services/common/status.h"
#include "tests/services/testing/service_credentials.h"
#include "tests/services/worker/fake_worker.h"

namespace onecard::services {
namespace {

using ::onecard::testing::FakeTokenizer;
using ::onecard::testing::FakeWorker;
using ::onecard::testing::SmallWorkerRequest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Ends a call and returns its status (the chunks are dropped).
template <typename Request, typename Stub>
grpc::Status Call(Stub& stub, const Request& request, grpc::ClientContext* context = nullptr) {
  grpc::ClientContext own;
  if (context == nullptr) context = &own;
  auto reader = stub.Generate(context, request);
  v1::GenerateResponse chunk;
  while (reader->Read(&chunk)) {
  }
  return reader->Finish();
}

TEST(WorkerCoreTest, LoadingAnswersUnavailable) {
  FakeWorker w({.load = false});
  EXPECT_EQ(Call(w.worker(), SmallWorkerRequest()).error_code(), grpc::StatusCode::UNAVAILABLE);
  grpc::ClientContext c1, c2, c3;
  v1::WorkerInfo info;
  EXPECT_EQ(w.worker().GetInfo(&c1, {}, &info).error_code(), grpc::StatusCode::UNAVAILABLE);
  v1::TokenizeResponse tokens;
  v1::TokenizeRequest tokenize;
  tokenize.set_prompt("x");
  EXPECT_EQ(w.generation().Tokenize(&c2, tokenize, &tokens).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  v1::ListModelsResponse models;
  EXPECT_EQ(w.generation().ListModels(&c3, {}, &models).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST(WorkerCoreTest, DrainingAnswersUnavailable) {
  FakeWorker w;
  w.server().core().SetDraining();
  const grpc::Status s = Call(w.worker(), SmallWorkerRequest());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("draining"));
  EXPECT_TRUE(w.engine().ids().empty());
}

TEST(WorkerCoreTest, KvWatermarkRefusesWithARetryHint) {
  FakeWorker w({.kv_blocks_total = 100, .edit_config = [](v1::WorkerConfig* c) {
                  c->mutable_admission()->set_kv_watermark(0.5);
                }});
  w.engine().SetKvBlocksUsed(50);
  grpc::ClientContext context;
  const grpc::Status s = Call(w.worker(), SmallWorkerRequest(), &context);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("50 of 100"));
  EXPECT_EQ(RetryAfterFromTrailers(context), absl::Milliseconds(100));
  EXPECT_TRUE(w.engine().ids().empty());

  w.engine().SetKvBlocksUsed(49);
  grpc::ClientContext admitted;
  auto reader = w.worker().Generate(&admitted, SmallWorkerRequest());
  ASSERT_TRUE(w.engine().WaitForSubmitted(1));
  w.engine().Finish(w.engine().ids()[0], engine::FinishReason::kStop);
  v1::GenerateResponse chunk;
  while (reader->Read(&chunk)) {
  }
  EXPECT_TRUE(reader->Finish().ok());
}

TEST(WorkerCoreTest, InvalidRequestsNameTheFieldAndNeverReachTheEngine) {
  FakeWorker w;
  v1::WorkerGenerateRequest bad_worker = SmallWorkerRequest();
  bad_worker.mutable_sampling()->set_temperature(-1);
  grpc::Status s = Call(w.worker(), bad_worker);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), StartsWith("sampling.temperature:"));

  v1::GenerateRequest bad_public;
  bad_public.set_prompt("hi");
  bad_public.set_model("gpt-9");
  s = Call(w.generation(), bad_public);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), StartsWith("model:"));
  bad_worker = SmallWorkerRequest();
  bad_worker.set_priority(static_cast<v1::Priority>(99));
  s = Call(w.worker(), bad_worker);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), StartsWith("priority:"));
  EXPECT_TRUE(w.engine().ids().empty());
}

// Issue 22: invalid UTF-8 in a string field came back as UNIMPLEMENTED with
// an empty message (gRPC's own parse failed); now INVALID_ARGUMENT naming it.
TEST(WorkerCoreTest, InvalidUtf8IsInvalidArgumentNamingTheField) {
  FakeWorker w;
  v1::GenerateRequest bad_public;
  bad_public.mutable_messages()->add_messages()->set_content("\xc3\x28");
  grpc::Status s = Call(w.generation(), bad_public);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), StartsWith("messages.messages[0].content: not valid UTF-8"));

  v1::WorkerGenerateRequest bad_worker = SmallWorkerRequest();
  bad_worker.set_model("\xff");
  s = Call(w.worker(), bad_worker);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), StartsWith("model: not valid UTF-8"));

  grpc::ClientContext context;
  v1::TokenizeRequest tokenize;
  tokenize.set_prompt(std::string("ab\xff") + "cd");  // the escape ends before "cd"
  v1::TokenizeResponse tokens;
  s = w.generation().Tokenize(&context, tokenize, &tokens);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), StartsWith("prompt: not valid UTF-8"));
  EXPECT_TRUE(w.engine().ids().empty());
}

// Issue 22: the worker's port served Generate with no key, so a client could
// skip the router's tenants, rate limits and priority caps. Every method but
// health now needs the router's identity (here: token mode).
TEST(WorkerCoreTest, OnlyTheRouterRoleMayCallTheWorker) {
  const testing::TestTokens tokens =
      testing::WriteTestTokens(testing::MakeTestDir("worker_core_tokens"));
  FakeWorker w({.edit_config = [&](v1::WorkerConfig* c) {
    *c->mutable_service_auth() = testing::TokenAuth(tokens);
  }});
  const auto with = [](const std::string& token) {
    auto context = std::make_unique<grpc::ClientContext>();
    if (!token.empty()) context->AddMetadata(services::kServiceTokenKey, token);
    return context;
  };
  EXPECT_EQ(Call(w.worker(), SmallWorkerRequest(), with("").get()).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Call(w.worker(), SmallWorkerRequest(), with(tokens.worker).get()).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::GenerateRequest prompt;
  prompt.set_prompt("hi");
  EXPECT_EQ(Call(w.generation(), prompt, with("").get()).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  v1::WorkerInfo info;
  EXPECT_EQ(w.worker().GetInfo(with("").get(), {}, &info).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  v1::ListModelsResponse models;
  EXPECT_EQ(w.generation().ListModels(with(tokens.worker).get(), {}, &models).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::TokenizeRequest tokenize;
  tokenize.set_prompt("x");
  v1::TokenizeResponse ids;
  EXPECT_EQ(w.generation().Tokenize(with("").get(), tokenize, &ids).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(w.engine().ids().empty());
  EXPECT_EQ(w.Health(), grpc::health::v1::HealthCheckResponse::SERVING);  // probes stay open

  EXPECT_TRUE(w.worker().GetInfo(with(tokens.router).get(), {}, &info).ok());
  auto routed = with(tokens.router);
  auto reader = w.worker().Generate(routed.get(), SmallWorkerRequest());
  ASSERT_TRUE(w.engine().WaitForSubmitted(1));
  w.engine().Finish(w.engine().ids()[0], engine::FinishReason::kStop);
  v1::GenerateResponse chunk;
  while (reader->Read(&chunk)) {
  }
  EXPECT_TRUE(reader->Finish().ok());
}

TEST(WorkerCoreTest, OversizedRequests) {
  FakeWorker w({.edit_config = [](v1::WorkerConfig* c) { c->set_max_request_bytes(1000); }});
  v1::GenerateRequest request;
  request.set_prompt(std::string(1500, 'a'));
  grpc::Status s = Call(w.generation(), request);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), StartsWith("prompt: the request is"));
  // Past twice the limit gRPC itself refuses the message.
  request.set_prompt(std::string(3000, 'a'));
  EXPECT_EQ(Call(w.generation(), request).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(w.engine().ids().empty());
}

TEST(WorkerCoreTest, PublicPromptsAreTokenizedByTheEngineTokenizer) {
  FakeWorker w;
  v1::GenerateRequest request;
  request.set_prompt("ok");
  grpc::ClientContext context;
  auto reader = w.generation().Generate(&context, request);
  ASSERT_TRUE(w.engine().WaitForSubmitted(1));
  const uint64_t id = w.engine().ids()[0];
  EXPECT_THAT(w.engine().request(id).prompt_token_ids, ElementsAre('o', 'k'));
  EXPECT_EQ(w.engine().request(id).request_id, w.server().worker_id() + "/1")
      << "the worker names requests that come without an id";
  w.engine().Finish(id, engine::FinishReason::kStop);
  v1::GenerateResponse chunk;
  while (reader->Read(&chunk)) {
  }
  EXPECT_TRUE(reader->Finish().ok());
}

TEST(WorkerCoreTest, InfoTokenizeAndListModels) {
  FakeWorker w({.max_context = 64, .kv_blocks_total = 100});
  grpc::ClientContext c1, c2, c3;
  v1::WorkerInfo info;
  ASSERT_TRUE(w.worker().GetInfo(&c1, {}, &info).ok());
  EXPECT_EQ(info.worker_id(), w.server().worker_id());
  EXPECT_EQ(info.model().id(), "fake");
  EXPECT_EQ(info.model().architecture(), "llama");
  EXPECT_EQ(info.model().context_length(), 64);
  EXPECT_EQ(info.model().vocab_size(), 300);
  EXPECT_EQ(info.model().eos_token_id(), FakeTokenizer::kImEnd);
  EXPECT_EQ(info.backend(), "cpu");
  EXPECT_EQ(info.kv_block_size(), 16);
  EXPECT_EQ(info.kv_blocks_total(), 100);
  EXPECT_EQ(info.max_num_seqs(), 64);

  v1::TokenizeRequest tokenize;
  tokenize.set_prompt("<|im_end|>a");
  v1::TokenizeResponse tokens;
  ASSERT_TRUE(w.generation().Tokenize(&c2, tokenize, &tokens).ok());
  EXPECT_THAT(tokens.token_ids(), ElementsAre(FakeTokenizer::kImEnd, 'a'));
  EXPECT_EQ(tokens.model(), "fake");

  v1::ListModelsResponse models;
  ASSERT_TRUE(w.generation().ListModels(&c3, {}, &models).ok());
  ASSERT_EQ(models.models_size(), 1);
  EXPECT_EQ(models.models(0).id(), "fake");
}

TEST(WorkerCoreTest, CountsOpenStreams) {
  FakeWorker w;
  grpc::ClientContext context;
  auto reader = w.worker().Generate(&context, SmallWorkerRequest());
  ASSERT_TRUE(w.engine().WaitForSubmitted(1));
  EXPECT_EQ(w.server().core().active_streams(), 1);
  EXPECT_FALSE(w.server().core().WaitForStreams(absl::ZeroDuration()));
  w.engine().Finish(w.engine().ids()[0], engine::FinishReason::kStop);
  v1::GenerateResponse chunk;
  while (reader->Read(&chunk)) {
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(w.server().core().WaitForStreams(absl::Seconds(30)));
  EXPECT_EQ(w.server().core().active_streams(), 0);
}

}  // namespace
}  // namespace onecard::services
