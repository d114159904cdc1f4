// Tests of the generate and chat subcommands over a threaded engine with the
// fake runner and tokenizer: streamed text, the JSON report, chat history,
// and errors from validation and from the runner.
#include "tools/onecard/generate_command.h"

#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine/runtime/engine_test_util.h"

namespace onecard::tools {
namespace {

using engine::testing::FakeTokenizer;
using engine::testing::MakeTestEngine;
using ::testing::HasSubstr;

// Logits without eos and lone UTF-8 bytes, so generations are ASCII and full length.
std::vector<float> AsciiLogits(std::span<const int32_t> context) {
  std::vector<float> logits = engine::testing::HashedLogits(context, FakeTokenizer::kVocabSize);
  for (int32_t id : {27, 28, 29, 30}) logits[id] = -1e9f;
  return logits;
}

std::unique_ptr<engine::testing::TestEngine> Threaded(int32_t fail_on_token = -1) {
  return MakeTestEngine({.logits_fn = AsciiLogits, .fail_on_token = fail_on_token},
                        {.clock = RealClock::Get()}, /*threaded=*/true);
}

GenerateOptions Options(std::string prompt, bool json = false) {
  return {.prompt = std::move(prompt),
          .max_tokens = 6,
          .sampling = {.temperature = 0.0f},
          .json = json};
}

TEST(GenerateCommandTest, StreamsTheReferenceText) {
  auto t = Threaded();
  std::ostringstream out, err;
  ASSERT_TRUE(RunGenerate(*t->engine, Options("hello"), out, err).ok());
  FakeTokenizer tok;
  engine::GenerationRequest r = engine::testing::Request(tok.Encode("hello", true), 6);
  const std::vector<int32_t> want = engine::testing::ReferenceTokens(r, AsciiLogits);
  EXPECT_EQ(out.str(), tok.Decode(want, true) + "\n");
  EXPECT_THAT(err.str(), HasSubstr("[6 tokens, length"));
}

TEST(GenerateCommandTest, JsonReportsTokensUsageAndTimings) {
  auto t = Threaded();
  std::ostringstream out, err;
  ASSERT_TRUE(RunGenerate(*t->engine, Options("abc", /*json=*/true), out, err).ok());
  nlohmann::json j = nlohmann::json::parse(out.str(), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out.str();
  FakeTokenizer tok;
  const std::vector<int32_t> want = engine::testing::ReferenceTokens(
      engine::testing::Request(tok.Encode("abc", true), 6), AsciiLogits);
  EXPECT_EQ(j["token_ids"].get<std::vector<int32_t>>(), want);
  EXPECT_EQ(j["text"], tok.Decode(want, true));
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);
  EXPECT_GE(j["timings"]["ttft_ms"].get<double>(), 0.0);
  EXPECT_GE(j["timings"]["total_ms"].get<double>(), j["timings"]["ttft_ms"].get<double>());
  EXPECT_TRUE(j["timings"].contains("decode_tokens_per_second"));
  EXPECT_TRUE(j["timings"].contains("queue_ms"));
}

TEST(GenerateCommandTest, ErrorsComeBackAsStatus) {
  auto t = Threaded(/*fail_on_token=*/0);  // "a"
  std::ostringstream out, err;
  EXPECT_EQ(RunGenerate(*t->engine, Options(""), out, err).code(),
            absl::StatusCode::kInvalidArgument);
  GenerateOptions zero = Options("b");
  zero.max_tokens = 0;
  EXPECT_THAT(std::string(RunGenerate(*t->engine, zero, out, err).message()),
              HasSubstr("max_tokens"));
  EXPECT_THAT(std::string(RunGenerate(*t->engine, Options("a"), out, err).message()),
              HasSubstr("injected runner failure"));
}

TEST(GenerateCommandTest, ChatAnswersOnce) {
  auto t = Threaded();
  std::istringstream in;
  std::ostringstream out, err;
  GenerateOptions options = Options("hi", /*json=*/true);
  options.system = "be brief";
  ASSERT_TRUE(RunChat(*t->engine, options, in, out, err).ok());
  nlohmann::json j = nlohmann::json::parse(out.str(), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out.str();
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);
}

TEST(GenerateCommandTest, InteractiveChatKeepsTheConversation) {
  auto t = Threaded();
  std::istringstream in("hi\n\nhow are you\n/exit\nnever read\n");
  std::ostringstream out, err;
  ASSERT_TRUE(RunChat(*t->engine, Options("", /*json=*/true), in, out, err).ok());
  std::istringstream lines(out.str());
  std::vector<int> prompt_tokens;
  std::string line;
  while (std::getline(lines, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    prompt_tokens.push_back(j["usage"]["prompt_tokens"]);
  }
  ASSERT_EQ(prompt_tokens.size(), 2u);
  // The second prompt holds the first turn and its answer (6 tokens) too.
  EXPECT_GT(prompt_tokens[1], prompt_tokens[0] + 6);
}

}  // namespace
}  // namespace onecard::tools
