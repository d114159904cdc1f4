// Tests of the perplexity subcommand: its argument checks (before anything
// loads), and its JSON summary over the fake tokenizer and runner, whose
// perplexity is ComputePerplexity's (tested in
// tests/engine/runtime/perplexity_test.cc) of the text's tokens.
#include "tools/onecard/perplexity_command.h"

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "engine/runtime/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine/runtime/fake_model_runner.h"
#include "tests/engine/runtime/fake_tokenizer.h"

namespace onecard::tools {
namespace {

using engine::testing::FakeModelRunner;
using engine::testing::FakeTokenizer;
using ::testing::HasSubstr;

PerplexityCommandOptions Valid() {
  return {.model_path = "m.gguf", .text_path = "t.txt", .windows = {.window = 8, .stride = 4}};
}

TEST(PerplexityCommandTest, ArgumentErrorsNameTheFlag) {
  EXPECT_TRUE(CheckPerplexityOptions(Valid()).ok());
  PerplexityCommandOptions o = Valid();
  o.text_path.clear();
  EXPECT_THAT(CheckPerplexityOptions(o).message(), HasSubstr("--text is required"));
  o = Valid();
  o.model_path.clear();
  EXPECT_THAT(CheckPerplexityOptions(o).message(), HasSubstr("--model is required"));
  o = Valid();
  o.backend = "tpu";
  EXPECT_THAT(CheckPerplexityOptions(o).message(), HasSubstr("--backend: \"tpu\""));
  o = Valid();
  o.windows.stride = 9;
  EXPECT_THAT(CheckPerplexityOptions(o).message(),
              HasSubstr("--stride: 9 is not in [1, --window]"));
  o = Valid();
  o.windows.window = 1;
  EXPECT_THAT(CheckPerplexityOptions(o).message(), HasSubstr("--window: 1 < 2"));
  o = Valid();
  o.text_tokens = 1;
  EXPECT_THAT(CheckPerplexityOptions(o).message(), HasSubstr("--text-tokens: 1"));
  o = Valid();
  o.kv_cache_dtype = "int8";
  EXPECT_THAT(CheckPerplexityOptions(o).message(), HasSubstr("--kv-cache-dtype: unknown"));
  o.kv_cache_dtype = "fp8";
  EXPECT_TRUE(CheckPerplexityOptions(o).ok());
  o = Valid();
  o.cpu_weights = "q4";
  EXPECT_THAT(CheckPerplexityOptions(o).message(), HasSubstr("--cpu-weights: unknown"));
  o.cpu_weights = "f32";
  EXPECT_TRUE(CheckPerplexityOptions(o).ok());
  o = Valid();
  o.fp8_compute = "w4a16";
  EXPECT_THAT(CheckPerplexityOptions(o).message(), HasSubstr("--fp8-compute: unknown"));
  o.fp8_compute = "w8a16";
  EXPECT_TRUE(CheckPerplexityOptions(o).ok());
}

TEST(PerplexityCommandTest, PrintsOneJsonSummaryOfTheTextsTokens) {
  const std::string path = ::testing::TempDir() + "/ppl_" + std::to_string(getpid()) + ".txt";
  std::ofstream(path) << "the quick brown fox jumps over the lazy dog again and again";
  FakeTokenizer tokenizer;
  const std::vector<int32_t> ids =
      tokenizer.Encode("the quick brown fox jumps over the lazy dog again and again", false);
  PerplexityCommandOptions o = Valid();
  o.text_path = path;
  o.text_tokens = 40;
  FakeModelRunner runner({.vocab_size = FakeTokenizer::kVocabSize});
  std::ostringstream out;
  ASSERT_TRUE(RunPerplexityWith(o, tokenizer, runner, 1.5, out).ok());
  const nlohmann::json j = nlohmann::json::parse(out.str());
  ASSERT_GT(ids.size(), 40u);
  EXPECT_EQ(j["tokens"], 40);
  EXPECT_EQ(j["backend"], "fake");
  EXPECT_EQ(j["kv_cache_dtype"], "auto");
  EXPECT_EQ(j["cpu_weights"], "native");
  EXPECT_EQ(j["fp8_compute"], "w8a8");
  EXPECT_EQ(j["window"], 8);
  EXPECT_EQ(j["stride"], 4);
  EXPECT_EQ(j["windows"], 9);  // begins 0, 4, ..., 32 (the last ends at 40)
  EXPECT_EQ(j["scored_tokens"], 39);
  EXPECT_EQ(j["load_seconds"], 1.5);
  EXPECT_EQ(j["text_bytes"], 59);  // 43 + 16 bytes
  FakeModelRunner again({.vocab_size = FakeTokenizer::kVocabSize});
  const std::vector<int32_t> first(ids.begin(), ids.begin() + 40);
  absl::StatusOr<engine::PerplexityResult> r = engine::ComputePerplexity(again, first, o.windows);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(j["perplexity"].get<double>(), r->Perplexity());
  EXPECT_DOUBLE_EQ(j["nll_mean"].get<double>(), r->MeanNll());
  std::remove(path.c_str());
}

TEST(PerplexityCommandTest, AMissingTextNamesTheFile) {
  FakeTokenizer tokenizer;
  FakeModelRunner runner({.vocab_size = FakeTokenizer::kVocabSize});
  PerplexityCommandOptions o = Valid();
  o.text_path = "/nonexistent/text.txt";
  std::ostringstream out;
  EXPECT_THAT(RunPerplexityWith(o, tokenizer, runner, 0, out).message(),
              HasSubstr("/nonexistent/text.txt"));
}

}  // namespace
}  // namespace onecard::tools
