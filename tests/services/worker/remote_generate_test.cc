// Tests of the `onecard generate --target` client (tools/onecard/
// remote_generate.h) against a real worker on loopback: the tokens are the
// engine's for the same prompt and settings (the engine run directly is the
// reference), chat messages go through the model's chat template, and
// errors (a bad option, a refused request, nobody listening) come back as
// statuses naming the problem.
#include "tools/onecard/remote_generate.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/services/testing/fake_control_plane.h"
#include "tests/services/worker/smol_worker.h"

namespace onecard::tools {
namespace {

using ::testing::HasSubstr;

class RemoteGenerateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::SmolModelPresent()) return;
    absl::StatusOr<std::unique_ptr<services::WorkerServer>> server = testing::StartSmolWorker(
        [](v1::WorkerConfig* c) { c->set_metrics_listen_address("none"); });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() { delete server_; }
  void SetUp() override {
    if (server_ == nullptr) GTEST_SKIP() << testing::kSmolModel << " is missing";
  }
  static engine::Engine& Engine() { return *server_->engine(); }

  static services::WorkerServer* server_;
};

services::WorkerServer* RemoteGenerateTest::server_ = nullptr;

TEST_F(RemoteGenerateTest, StreamsTheEngineTokens) {
  RemoteGenerateOptions options;
  options.target = server_->address();
  options.prompt = "The capital of France is";
  options.max_tokens = 10;
  options.temperature = 0;
  options.request_id = "cli-1";
  std::string streamed;
  absl::StatusOr<RemoteCompletion> got =
      RemoteGenerate(options, [&](absl::string_view text) { streamed += std::string(text); });
  ASSERT_TRUE(got.ok()) << got.status();

  engine::GenerationRequest reference;
  reference.prompt_token_ids = Engine().tokenizer().Encode(options.prompt, true);
  reference.sampling.temperature = 0;
  reference.stopping.max_tokens = 10;
  absl::StatusOr<std::vector<int32_t>> expected =
      testing::GenerateInProcess(Engine(), std::move(reference));
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_EQ(got->token_ids, *expected);
  EXPECT_EQ(got->text, streamed);
  EXPECT_FALSE(got->text.empty());
  EXPECT_EQ(got->request_id, "cli-1");
  EXPECT_THAT(got->finish_reason, ::testing::AnyOf("length", "eos"));
  EXPECT_EQ(got->completion_tokens, static_cast<int32_t>(expected->size()));
  EXPECT_EQ(got->prompt_tokens,
            static_cast<int32_t>(Engine().tokenizer().Encode(options.prompt, true).size()));
  EXPECT_GE(got->chunks, 1);
}

TEST_F(RemoteGenerateTest, ChatMessagesUseTheChatTemplate) {
  RemoteGenerateOptions options;
  options.target = server_->address();
  options.messages = {{"system", "Be brief."}, {"user", "Hi!"}};
  options.max_tokens = 4;
  options.seed = 7;
  absl::StatusOr<RemoteCompletion> got = RemoteGenerate(options, nullptr);
  ASSERT_TRUE(got.ok()) << got.status();
  absl::StatusOr<engine::ChatTemplate> tmpl =
      engine::ChatTemplate::ForTokenizer(Engine().tokenizer());
  ASSERT_TRUE(tmpl.ok());
  absl::StatusOr<std::string> text = tmpl->Render({{"system", "Be brief."}, {"user", "Hi!"}}, true);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(got->prompt_tokens,
            static_cast<int32_t>(Engine().tokenizer().Encode(*text, false).size()));
}

TEST_F(RemoteGenerateTest, ErrorsNameTheProblem) {
  RemoteGenerateOptions options;
  options.target = server_->address();
  options.prompt = "x";
  options.priority = "urgent";
  absl::Status s = RemoteGenerate(options, nullptr).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("priority"));

  options.priority = "interactive";
  options.max_tokens = 0;
  s = RemoteGenerate(options, nullptr).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("stopping.max_tokens"));

  std::unique_ptr<testing::FakeControlPlane> probe = testing::FakeControlPlane::Start();
  const std::string nobody = probe->address();  // bound, then closed
  probe.reset();
  options.target = nobody;
  options.max_tokens = 4;
  options.timeout = absl::Seconds(10);
  s = RemoteGenerate(options, nullptr).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr(nobody));
}

}  // namespace
}  // namespace onecard::tools
