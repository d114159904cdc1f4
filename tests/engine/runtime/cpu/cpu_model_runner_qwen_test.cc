// Golden test of the cpu backend on a real third-party k-quant GGUF:
// Qwen2.5-Coder-1.5B-Instruct Q4_K_M (models/, `scripts/fetch-model.sh
// qwen`; skipped, saying so, when the file is absent) against Hugging Face
// transformers' fp32 run of the same file (tests/golden/qwen2_5_coder/, made
// by `tests/golden/make_goldens.py qwen2.5-coder`; a missing golden fails).
// - The config the GGUF gives: qwen2, 28 layers, hidden 1536, 12 heads of 128,
//   2 KV heads, intermediate 8960, vocab 151936, q/k/v bias, rope theta 1e6,
//   and an untied output.weight (the file holds one; transformers then unties
//   too), as Qwen's published config.json has them.
// - The tokenizer (tokenizer.ggml.pre "qwen2") encodes every golden text to
//   HF's ids, and the chat prompt's messages render to HF's chat text.
// - Each prompt prefilled in one chunk: logits at every position (64 sampled
//   ids and HF's top 5) and the whole last row within kTolerance, the same
//   top-1; then the first 16 of HF's greedy tokens, one Forward each, with
//   the logits of HF's top 2 within kTolerance, identical up to a near tie
//   (HF's own top-2 gap within twice the tolerance; printed).
// Label slow: the model is 1.5B parameters in fp32 (6.2 GB of RAM) and the
// test reads them once per decode step.
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/model/checkpoint.h"
#include "engine/model/gguf.h"
#include "engine/runtime/cpu/cpu_model_runner.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine/runtime/cpu/golden_logits.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using onecard::testing::SourcePath;
using onecard::testing::Tolerance;

constexpr char kModel[] = "models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf";
constexpr char kGoldenDir[] = "tests/golden/qwen2_5_coder";
constexpr int kGreedySteps = 16;

// As for SmolLM2 (cpu_model_runner_golden_test.cc): both sides run fp32 over
// the same fp32 weights (transformers dequantizes with the gguf package's
// formulas, checked equal to them by the golden script; ours are checked
// against the same package in dequantize_test.cc), so they differ only in
// the order of fp32 sums and in libm: a reordered sum of n products carries
// ~sqrt(n) 2^-24 relative error (~5e-6 for n = 1536..8960), which 28 layers
// keep ~1e-5 relative on logits of magnitude 10-30. Measured against the
// golden of transformers 5.24.0 / torch 2.15.0 on the CPU (last rows): max
// abs error 1.2-2.8e-5, NMSE 0.7-2.5e-12. The tolerance allows ~7x that
// error (a GPU-made golden sums in yet another order) and is still far below
// what a real bug moves (a wrong rope theta, bias or token shifts logits by
// 1e-2 .. 10).
constexpr Tolerance kTolerance{2e-4, 1e-5, 1e-9};

// The golden's chat messages of prompt `name`, from logits.json.
std::vector<ChatMessage> GoldenMessages(const std::string& name) {
  std::ifstream in(SourcePath(std::string(kGoldenDir) + "/logits.json"));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  std::vector<ChatMessage> out;
  if (doc.is_discarded()) return out;
  for (const nlohmann::json& p : doc["prompts"]) {
    if (!p.contains("name") || p["name"] != name || !p.contains("messages")) continue;
    for (const nlohmann::json& m : p["messages"]) {
      if (!m.contains("role") || !m.contains("content") || !m["role"].is_string() ||
          !m["content"].is_string()) {
        continue;
      }
      out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    }
  }
  return out;
}

class CpuModelRunnerQwenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::ifstream(SourcePath(kModel)).good()) {
      GTEST_SKIP() << kModel << " is not here: scripts/fetch-model.sh qwen fetches it (1.1 GB)";
    }
    // The model is here: a missing golden is a failure, not a skip.
    ASSERT_TRUE(LoadGolden(kGoldenDir, &golden_))
        << kGoldenDir << " has no golden: run `python tests/golden/make_goldens.py "
        << "qwen2.5-coder --device cuda` where torch and transformers are installed";
    absl::StatusOr<Checkpoint> ckpt = OpenCheckpoint(SourcePath(kModel));
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    checkpoint_ = std::make_unique<Checkpoint>(*std::move(ckpt));
  }

  Golden golden_;
  std::unique_ptr<Checkpoint> checkpoint_;
};

TEST_F(CpuModelRunnerQwenTest, ConfigIsQwen25Coder15B) {
  const ModelConfig& c = checkpoint_->config;
  EXPECT_EQ(c.architecture, Architecture::kQwen2);
  EXPECT_EQ(c.num_layers, 28);
  EXPECT_EQ(c.hidden_size, 1536);
  EXPECT_EQ(c.num_heads, 12);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate_size, 8960);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-6f);
}

TEST_F(CpuModelRunnerQwenTest, TokenizerMatchesHuggingFace) {
  ASSERT_NE(checkpoint_->gguf(), nullptr);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromGguf(*checkpoint_->gguf());
  ASSERT_TRUE(tok.ok()) << tok.status();
  for (const GoldenPrompt& p : golden_.prompts) {
    ASSERT_FALSE(p.text.empty()) << p.name << ": the golden has no text";
    EXPECT_EQ((*tok)->Encode(p.text, /*add_special_tokens=*/false), p.input_ids) << p.name;
  }
  const std::vector<ChatMessage> messages = GoldenMessages("chat");
  ASSERT_FALSE(messages.empty()) << "the golden's chat prompt has no messages";
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::ForTokenizer(**tok);
  ASSERT_TRUE(chat.ok()) << chat.status();
  absl::StatusOr<std::string> rendered = chat->Render(messages, /*add_generation_prompt=*/true);
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  for (const GoldenPrompt& p : golden_.prompts) {
    if (p.name == "chat") EXPECT_EQ(*rendered, p.text);
  }
}

TEST_F(CpuModelRunnerQwenTest, MatchesHuggingFace) {
  CpuRunnerOptions options;
  options.num_kv_blocks = 64;  // 1024 tokens of 16: every prompt and its 16 tokens
  options.weight_format = CpuWeightFormat::kF32;  // fp32 weights, as HF runs them
  auto runner = CreateCpuModelRunner(*checkpoint_, options);
  ASSERT_TRUE(runner.ok()) << runner.status();
  const int64_t vocab = (*runner)->config().vocab_size;
  int64_t seq_id = 0;
  for (const GoldenPrompt& p : golden_.prompts) {
    SCOPED_TRACE(absl::StrCat("qwen2.5-coder prompt ", p.name));
    const int32_t context = static_cast<int32_t>(p.input_ids.size()) + kGreedySteps;
    const auto [table, unused] = TwoBlockTables(64, (context + 15) / 16, seq_id);
    const std::vector<float> logits = Prefill(**runner, ++seq_id, p.input_ids, table, {});
    ExpectPrefillMatches(golden_, p, logits, vocab, kTolerance);
    ExpectGreedyMatches(**runner, seq_id, p, logits, table, kTolerance, kGreedySteps,
                        /*allow_near_tie=*/true);
  }
}

}  // namespace
}  // namespace onecard::engine
