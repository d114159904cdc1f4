// Integration tests of the Engine on the cpu backend with SmolLM2-135M
// (models/SmolLM2-135M-Instruct.Q4_1.gguf, fetched by scripts/fetch-model.sh):
// greedy continuations equal the Hugging Face goldens of
// tests/golden/smollm2/logits.json (made by transformers, see
// tests/golden/README.md); 16 concurrent requests with mixed sampling
// parameters and seeds all complete, each equal to the same request run
// alone; prompts longer than the context are refused; Engine::Create names
// bad paths and backends.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine/runtime/engine_test_util.h"

namespace onecard::engine {
namespace {

using ::testing::HasSubstr;
using testing::Recorder;

constexpr char kModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr char kGoldens[] = "tests/golden/smollm2/logits.json";

class EngineCpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kModel)) return;
    EngineOptions options;
    options.model_path = kModel;
    options.cpu_weight_format = CpuWeightFormat::kF32;  // fp32 weights, as HF runs them
    options.max_num_seqs = 16;
    options.max_batched_tokens = 64;  // long prompts prefill in chunks beside decodes
    options.start_thread = false;
    absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(engine).value().release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  void SetUp() override {
    if (engine_ == nullptr) GTEST_SKIP() << kModel << " is missing: run scripts/fetch-model.sh";
  }

  // Submits every request, steps until idle, and returns each one's tokens.
  static std::vector<std::vector<int32_t>> RunTogether(std::vector<GenerationRequest> requests,
                                                       Recorder& rec) {
    for (size_t i = 0; i < requests.size(); ++i) {
      requests[i].on_output = rec.Callback(absl::StrCat(i));
      absl::StatusOr<uint64_t> id = engine_->Submit(std::move(requests[i]));
      EXPECT_TRUE(id.ok()) << id.status();
    }
    testing::RunUntilIdle(*engine_);
    std::vector<std::vector<int32_t>> tokens;
    for (size_t i = 0; i < requests.size(); ++i) tokens.push_back(rec.Tokens(absl::StrCat(i)));
    return tokens;
  }

  static Engine* engine_;
};

Engine* EngineCpuTest::engine_ = nullptr;

// HF's greedy run starts from the prompt's last logits row, so its first
// step's top-2 logits must equal that row's top-2 (same ids, within 1e-3).
// A golden prompt where they differ was generated from other input than its
// input_ids; its greedy ids cannot be compared, and the test fails naming the
// golden. (Seen on "chat" in the first goldens, 32.775 vs 31.975:
// make_goldens.py calls generate() with pad_token_id = eos and no
// attention_mask, so the prompt's own <|im_end|> tokens were masked out.)
bool GoldenIsSelfConsistent(const nlohmann::json& prompt) {
  const auto last_ids = prompt["top5_ids"].back().get<std::vector<int32_t>>();
  const auto last_logits = prompt["top5_logits"].back().get<std::vector<float>>();
  const auto step0_ids = prompt["greedy_top2_ids"][0].get<std::vector<int32_t>>();
  const auto step0_logits = prompt["greedy_top2_logits"][0].get<std::vector<float>>();
  for (size_t k = 0; k < 2; ++k) {
    if (last_ids[k] != step0_ids[k] || std::abs(last_logits[k] - step0_logits[k]) > 1e-3f) {
      ADD_FAILURE() << "golden prompt " << prompt["name"] << ": greedy step 0 logit "
                    << step0_logits[k] << " != the prefill's last-row logit " << last_logits[k]
                    << "; regenerate tests/golden/smollm2 (its greedy ids are not compared)";
      return false;
    }
  }
  return true;
}

TEST_F(EngineCpuTest, GreedyContinuationsEqualTheHuggingFaceGoldens) {
  std::ifstream file(kGoldens);
  std::stringstream text;
  text << file.rdbuf();
  const nlohmann::json goldens = nlohmann::json::parse(text.str(), nullptr, false);
  ASSERT_FALSE(goldens.is_discarded()) << kGoldens;
  std::vector<GenerationRequest> requests;
  for (const nlohmann::json& prompt : goldens["prompts"]) {
    GenerationRequest r;
    r.prompt_token_ids = prompt["input_ids"].get<std::vector<int32_t>>();
    r.sampling.temperature = 0.0f;
    r.stopping.max_tokens = goldens["num_greedy"].get<int32_t>();
    r.stopping.ignore_eos = true;  // HF generate ran without an eos stop
    requests.push_back(std::move(r));
  }
  Recorder rec;
  const std::vector<std::vector<int32_t>> got = RunTogether(requests, rec);
  int compared = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const nlohmann::json& prompt = goldens["prompts"][i];
    EXPECT_EQ(rec.Final(absl::StrCat(i)).finish_reason, FinishReason::kLength);
    if (!GoldenIsSelfConsistent(prompt)) continue;
    ++compared;
    const auto want = prompt["greedy_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(got[i], want) << prompt["name"] << ": the greedy continuation differs from HF";
  }
  EXPECT_GE(compared, 4) << "too few self-consistent golden prompts";
}

// Request i's sampling: six mixes of temperature, truncation and penalties.
SamplingParams MixedSampling(size_t i) {
  SamplingParams s{.seed = 1000 + i};
  switch (i % 6) {
    case 0:
      s.temperature = 0.0f;
      break;
    case 1:
      s.temperature = 0.8f;
      s.top_p = 0.9f;
      break;
    case 2:
      s.temperature = 1.0f;
      s.top_k = 20;
      break;
    case 3:
      s.temperature = 0.7f;
      s.min_p = 0.1f;
      break;
    case 4:
      s.temperature = 0.9f;
      s.repetition_penalty = 1.2f;
      break;
    default:
      s.temperature = 1.0f;
      s.presence_penalty = 0.5f;
      s.frequency_penalty = 0.5f;
  }
  return s;
}

// Sixteen prompts of different lengths with mixed sampling.
std::vector<GenerationRequest> MixedRequests(const Tokenizer& tokenizer) {
  const std::vector<std::string> texts = {"The capital of France is",
                                          "Once upon a time",
                                          "def add(a, b):",
                                          "List three colors:",
                                          "The quick brown fox",
                                          "In 1969, humans first",
                                          "Water boils at",
                                          "My favourite food is",
                                          "The sun is a",
                                          "Translate to French: good morning",
                                          "2 + 2 =",
                                          "A haiku about autumn:",
                                          "The largest ocean on Earth is the",
                                          "Photosynthesis is the process by which plants",
                                          "import numpy as np\n",
                                          "Q: What is the tallest mountain?\nA:"};
  std::vector<GenerationRequest> requests;
  for (size_t i = 0; i < texts.size(); ++i) {
    GenerationRequest r;
    r.prompt_token_ids = tokenizer.Encode(texts[i], /*add_special_tokens=*/true);
    r.stopping.max_tokens = 8;
    r.sampling = MixedSampling(i);
    r.logprobs = i % 4 == 0;
    r.top_logprobs = i % 4 == 0 ? 2 : 0;
    requests.push_back(std::move(r));
  }
  return requests;
}

TEST_F(EngineCpuTest, SixteenConcurrentRequestsEqualTheirSoloRuns) {
  const std::vector<GenerationRequest> requests = MixedRequests(engine_->tokenizer());
  Recorder together;
  const std::vector<std::vector<int32_t>> batched = RunTogether(requests, together);
  for (size_t i = 0; i < requests.size(); ++i) {
    const StreamOutput final_out = together.Final(absl::StrCat(i));
    EXPECT_NE(final_out.finish_reason, FinishReason::kError) << final_out.error;
    EXPECT_FALSE(batched[i].empty());
    Recorder alone;
    const std::vector<std::vector<int32_t>> solo = RunTogether({requests[i]}, alone);
    EXPECT_EQ(batched[i], solo[0]) << "request " << i << " differs when run alone";
    EXPECT_EQ(together.Text(absl::StrCat(i)), alone.Text("0"));
  }
  EXPECT_THAT(together.Violations(), ::testing::IsEmpty());
  EXPECT_EQ(engine_->Stats().kv_blocks_used, 0);
}

TEST_F(EngineCpuTest, PromptsLongerThanTheContextAreInvalidArgument) {
  GenerationRequest r;
  r.prompt_token_ids.assign(engine_->max_context() + 1, 42);
  absl::StatusOr<uint64_t> id = engine_->Submit(r);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("prompt: "));
  r.prompt_token_ids.assign(engine_->max_context() - 4, 42);
  r.stopping.max_tokens = 5;
  id = engine_->Submit(r);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("max_tokens"));
}

TEST(EngineCreateTest, BadPathsAndBackendsAreNamed) {
  EngineOptions options;
  options.model_path = "models/no-such-model.gguf";
  options.start_thread = false;
  absl::Status missing = Engine::Create(options).status();
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.message()), HasSubstr("no-such-model.gguf"));
  // A synthetic model's weights are made on the card: the cpu backend refuses it.
  options.model_path = "synthetic:llama3-8b";
  absl::Status synthetic = Engine::Create(options).status();
  EXPECT_EQ(synthetic.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(synthetic.message()), HasSubstr("cuda backend only"));
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << kModel << " is missing";
  options.model_path = kModel;
  options.backend = "tpu";
  absl::Status unknown = Engine::Create(options).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("supported backends: cpu"));
}

}  // namespace
}  // namespace onecard::engine
