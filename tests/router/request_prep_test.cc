// Tests router/request_prep.h with the real SmolLM2 tokenizer: prompt and
// chat inputs become the ids HF gives (tests/golden/tokenizer/smollm2), the
// max_tokens default and cost, the tenant's priority, the workers' served
// context as the limit, and every bad input gets the right code with a
// message naming the field.
#include "router/request_prep.h"

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "router/model_loader.h"

namespace onecard::router {
namespace {

using onecard::v1::GenerateRequest;

class RequestPrepTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<RoutingModel> m =
        LoadRoutingModel("models/SmolLM2-135M-Instruct.Q4_1.gguf", "smol");
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = new RoutingModel(std::move(*m));
    std::ifstream in("tests/golden/tokenizer/smollm2/golden.json");
    std::stringstream text;
    text << in.rdbuf();
    golden_ = new nlohmann::json(nlohmann::json::parse(text.str(), nullptr, false));
    ASSERT_FALSE(golden_->is_discarded());
  }
  RequestPreparer Preparer(int32_t default_max_tokens = 256) {
    return RequestPreparer(model_->tokenizer.get(), model_->chat_template, model_->spec,
                           PrepOptions{default_max_tokens, 1 << 16});
  }
  static Tenant StandardTenant() { return Tenant{"acme", {}, PriorityClass::kStandard}; }
  absl::Status PrepareError(const GenerateRequest& r, const std::string& field,
                            absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
    absl::StatusOr<PreparedRequest> p = Preparer().Prepare(r, StandardTenant());
    EXPECT_FALSE(p.ok()) << r.DebugString();
    if (p.ok()) return absl::OkStatus();
    EXPECT_EQ(p.status().code(), code) << p.status();
    EXPECT_EQ(p.status().message().substr(0, field.size() + 1), field + ":") << p.status();
    return p.status();
  }
  // PrepareError where the test needs only its expectations.
  void ExpectFieldError(const GenerateRequest& r, const std::string& field,
                        absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
    PrepareError(r, field, code).IgnoreError();
  }
  static GenerateRequest Prompt(const std::string& text) {
    GenerateRequest r;
    r.set_prompt(text);
    return r;
  }
  static RoutingModel* model_;
  static nlohmann::json* golden_;
};
RoutingModel* RequestPrepTest::model_ = nullptr;
nlohmann::json* RequestPrepTest::golden_ = nullptr;

TEST_F(RequestPrepTest, PromptBecomesHfIds) {
  for (const auto& c : (*golden_)["cases"]) {
    std::string text = c["text"];
    if (text.empty()) continue;
    GenerateRequest r = Prompt(text);
    absl::StatusOr<PreparedRequest> p = Preparer().Prepare(r, StandardTenant());
    ASSERT_TRUE(p.ok()) << p.status();
    std::vector<int32_t> want = c["ids_with_special"];
    std::vector<int32_t> got(p->worker_request.prompt_token_ids().begin(),
                             p->worker_request.prompt_token_ids().end());
    EXPECT_EQ(got, want) << text;
  }
}

TEST_F(RequestPrepTest, ChatBecomesHfTemplatedIds) {
  int checked = 0;
  for (const auto& chat : (*golden_)["chats"]) {
    if (!chat["add_generation_prompt"].get<bool>()) continue;
    GenerateRequest r;
    for (const auto& m : chat["messages"]) {
      onecard::v1::ChatMessage* msg = r.mutable_messages()->add_messages();
      msg->set_role(m["role"]);
      msg->set_content(m["content"]);
    }
    absl::StatusOr<PreparedRequest> p = Preparer().Prepare(r, StandardTenant());
    ASSERT_TRUE(p.ok()) << p.status();
    std::vector<int32_t> want = chat["ids"];
    std::vector<int32_t> got(p->worker_request.prompt_token_ids().begin(),
                             p->worker_request.prompt_token_ids().end());
    EXPECT_EQ(got, want);
    ++checked;
  }
  EXPECT_GE(checked, 2);
}

TEST_F(RequestPrepTest, DefaultsCostAndPassThrough) {
  GenerateRequest r = Prompt("Hello world");  // 2 tokens (HF)
  r.set_request_id("req-1");
  r.mutable_sampling()->set_temperature(0.5f);
  r.mutable_stopping()->add_stop_strings("\n\n");
  absl::StatusOr<PreparedRequest> p = Preparer(100).Prepare(r, StandardTenant());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->prompt_tokens, 2);
  EXPECT_EQ(p->max_tokens, 100);
  EXPECT_EQ(p->cost_tokens(), 102);
  EXPECT_EQ(p->worker_request.stopping().max_tokens(), 100);
  EXPECT_EQ(p->worker_request.stopping().stop_strings(0), "\n\n");
  EXPECT_FLOAT_EQ(p->worker_request.sampling().temperature(), 0.5f);
  EXPECT_EQ(p->worker_request.request_id(), "req-1");
  EXPECT_EQ(p->worker_request.model(), "smol");
  EXPECT_EQ(p->worker_request.priority(), onecard::v1::PRIORITY_STANDARD);
  // The default is capped at what is left of the context.
  GenerateRequest ids;
  for (int i = 0; i < 8190; ++i) ids.mutable_token_ids()->add_ids(7);
  p = Preparer(256).Prepare(ids, StandardTenant());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->max_tokens, 2);
}

TEST_F(RequestPrepTest, TenantPromptAndMaxTokensLimits) {
  Tenant capped{"capped", {}, PriorityClass::kStandard};
  capped.max_prompt_tokens = 4;
  capped.max_tokens = 8;
  GenerateRequest r;
  r.mutable_token_ids()->add_ids(100);
  r.mutable_token_ids()->add_ids(101);
  r.mutable_token_ids()->add_ids(102);
  r.mutable_token_ids()->add_ids(103);
  // At the limits: served; no max_tokens: the tenant's cap, not the default 256.
  absl::StatusOr<PreparedRequest> p = Preparer().Prepare(r, capped);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->max_tokens, 8);
  r.mutable_stopping()->set_max_tokens(8);
  EXPECT_TRUE(Preparer().Prepare(r, capped).ok());
  r.mutable_stopping()->set_max_tokens(9);
  p = Preparer().Prepare(r, capped);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(),
            "stopping.max_tokens: 9 exceeds tenant 'capped''s max_tokens of 8");
  r.mutable_stopping()->clear_max_tokens();
  r.mutable_token_ids()->add_ids(104);
  p = Preparer().Prepare(r, capped);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "token_ids.ids: 5 tokens exceed tenant 'capped''s max_prompt_tokens of 4");
  // The chat template's tokens count: a one-word message is over 4.
  GenerateRequest chat;
  onecard::v1::ChatMessage* m = chat.mutable_messages()->add_messages();
  m->set_role("user");
  m->set_content("hi");
  p = Preparer().Prepare(chat, capped);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message().substr(0, 9), "messages:");
  // No limits: the same request passes for a tenant without them.
  EXPECT_TRUE(Preparer().Prepare(chat, StandardTenant()).ok());
}

TEST_F(RequestPrepTest, PriorityAgainstTheTenant) {
  GenerateRequest r = Prompt("hi");
  Tenant batch_only{"bulk", {}, PriorityClass::kBatch};
  absl::StatusOr<PreparedRequest> p = Preparer().Prepare(r, batch_only);  // unspecified
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->priority, PriorityClass::kBatch);
  r.set_priority(onecard::v1::PRIORITY_INTERACTIVE);
  Tenant vip{"vip", {}, PriorityClass::kInteractive};
  EXPECT_EQ(Preparer().Prepare(r, vip)->priority, PriorityClass::kInteractive);
  absl::Status s = PrepareError(r, "priority", absl::StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("acme"), std::string::npos) << s;
  r.set_priority(onecard::v1::PRIORITY_BATCH);
  EXPECT_EQ(Preparer().Prepare(r, StandardTenant())->priority, PriorityClass::kBatch);
}

TEST_F(RequestPrepTest, BadInputsNameTheField) {
  GenerateRequest r;
  ExpectFieldError(r, "input");
  ExpectFieldError(Prompt(""), "prompt");
  r = Prompt("x");
  r.set_model("gpt-9");
  ExpectFieldError(r, "model", absl::StatusCode::kNotFound);
  r = GenerateRequest();
  r.mutable_messages();
  ExpectFieldError(r, "messages");
  r.mutable_messages()->add_messages()->set_role("user");
  r.mutable_messages()->add_messages()->set_role("wizard");
  ExpectFieldError(r, "messages[1].role");
  r = GenerateRequest();
  r.mutable_token_ids();
  ExpectFieldError(r, "token_ids.ids");
  r.mutable_token_ids()->add_ids(5);
  r.mutable_token_ids()->add_ids(49152);
  ExpectFieldError(r, "token_ids.ids[1]");
  r = Prompt("x");
  r.mutable_stopping()->set_max_tokens(0);
  ExpectFieldError(r, "stopping.max_tokens");
  r.mutable_stopping()->set_max_tokens(8192);
  ExpectFieldError(r, "stopping.max_tokens");
  r = GenerateRequest();
  for (int i = 0; i < 8192; ++i) r.mutable_token_ids()->add_ids(100);
  ExpectFieldError(r, "token_ids.ids");
  r = Prompt("x");
  r.set_priority(static_cast<onecard::v1::Priority>(99));
  ExpectFieldError(r, "priority");
  r = Prompt("x");
  r.mutable_stopping()->set_max_tokens(4);
  r.mutable_stopping()->set_min_tokens(5);
  ExpectFieldError(r, "stopping.min_tokens");
  r = Prompt("x");
  r.mutable_stopping()->add_stop_token_ids(-1);
  ExpectFieldError(r, "stopping.stop_token_ids[0]");
  r = Prompt("x");
  r.mutable_stopping()->add_stop_strings("");
  ExpectFieldError(r, "stopping.stop_strings[0]");
}

TEST_F(RequestPrepTest, BadSamplingNamesTheField) {
  struct Case {
    std::function<void(GenerateRequest&)> set;
    std::string field;
  };
  std::vector<Case> cases = {
      {[](GenerateRequest& r) { r.mutable_sampling()->set_temperature(-0.1f); },
       "sampling.temperature"},
      {[](GenerateRequest& r) { r.mutable_sampling()->set_temperature(NAN); },
       "sampling.temperature"},
      {[](GenerateRequest& r) { r.mutable_sampling()->set_temperature(1e30f); },
       "sampling.temperature"},
      {[](GenerateRequest& r) { r.mutable_sampling()->set_repetition_penalty(INFINITY); },
       "sampling.repetition_penalty"},
      {[](GenerateRequest& r) { r.mutable_sampling()->set_top_k(-1); }, "sampling.top_k"},
      {[](GenerateRequest& r) { r.mutable_sampling()->set_top_p(0); }, "sampling.top_p"},
      {[](GenerateRequest& r) { r.mutable_sampling()->set_top_p(1.01f); }, "sampling.top_p"},
      {[](GenerateRequest& r) { r.mutable_sampling()->set_min_p(1.5f); }, "sampling.min_p"},
      {[](GenerateRequest& r) { r.mutable_sampling()->set_repetition_penalty(0); },
       "sampling.repetition_penalty"},
      {[](GenerateRequest& r) { r.mutable_sampling()->set_presence_penalty(2.5f); },
       "sampling.presence_penalty"},
      {[](GenerateRequest& r) { r.mutable_sampling()->set_frequency_penalty(-3); },
       "sampling.frequency_penalty"},
      {[](GenerateRequest& r) { r.set_top_logprobs(21); }, "top_logprobs"},
      {[](GenerateRequest& r) { r.set_top_logprobs(2); }, "top_logprobs"},
  };
  for (const Case& c : cases) {
    GenerateRequest r = Prompt("x");
    c.set(r);
    ExpectFieldError(r, c.field);
  }
}

TEST_F(RequestPrepTest, OversizedRequestIsRefusedNamingItsLargestField) {
  GenerateRequest r = Prompt(std::string(70000, 'a'));
  ExpectFieldError(r, "prompt");
}

TEST_F(RequestPrepTest, TheWorkersServedContextIsTheLimit) {
  RequestPreparer preparer = Preparer();
  preparer.SetServedContext(5824);  // a worker whose KV pool holds less than the model's 8192
  EXPECT_EQ(preparer.ListModels().models(0).context_length(), 5824);
  GenerateRequest r;
  for (int i = 0; i < 6000; ++i) r.mutable_token_ids()->add_ids(100);
  absl::StatusOr<PreparedRequest> p = preparer.Prepare(r, StandardTenant());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(),
            "token_ids.ids: 6000 tokens leave no room to generate in the model's context of 5824 "
            "tokens");
  r.mutable_token_ids()->mutable_ids()->Truncate(5800);
  p = preparer.Prepare(r, StandardTenant());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->max_tokens, 24) << "the default, capped at what the served context leaves";
  preparer.SetServedContext(0);  // no worker known: the model file's context
  EXPECT_EQ(preparer.ListModels().models(0).context_length(), 8192);
}

TEST_F(RequestPrepTest, TokenizeAndListModels) {
  onecard::v1::TokenizeRequest t;
  t.set_prompt("Hello world");
  absl::StatusOr<onecard::v1::TokenizeResponse> got = Preparer().Tokenize(t);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(std::vector<int32_t>(got->token_ids().begin(), got->token_ids().end()),
            (std::vector<int32_t>{19556, 905}));
  t.set_model("other");
  EXPECT_EQ(Preparer().Tokenize(t).status().code(), absl::StatusCode::kNotFound);
  onecard::v1::ListModelsResponse models = Preparer().ListModels();
  ASSERT_EQ(models.models_size(), 1);
  EXPECT_EQ(models.models(0).id(), "smol");
  EXPECT_EQ(models.models(0).context_length(), 8192);
}

}  // namespace
}  // namespace onecard::router
