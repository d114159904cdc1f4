// onecard perplexity on the cpu backend against Hugging Face's perplexity of
// the same model and text (tests/golden/smollm2/perplexity.json, made by
// tests/golden/make_perplexity_golden.py): SmolLM2-135M-Instruct (Q4_1 GGUF)
// over the first 2048 tokens of tests/data/text/sqlite-docs.txt, windows of
// 512 tokens moving by 256. The tokenization must be HF's (count and SHA-256
// of the ids), and the perplexity within 0.5 % of HF's (issue 17's bar; fp32
// on both sides, --cpu-weights f32 here, so the measured gap is far smaller:
// the test prints it). On the same text, windows and weights, the FP8 KV
// cache with calibrated scales within 0.5 % of the BF16 one (issue 18's bar,
// met in this setting only: see the test); and on Qwen2.5-Coder-1.5B, whose
// first layer calibration keeps in BF16, the same bar.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "engine/model/checkpoint.h"
#include "engine/runtime/engine.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/common/digest.h"
#include "tests/testing/all_close.h"
#include "tools/onecard/perplexity_command.h"

namespace onecard::tools {
namespace {

using onecard::testing::SourcePath;

constexpr char kModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr char kText[] = "tests/data/text/sqlite-docs.txt";

nlohmann::json Golden() {
  std::ifstream in(SourcePath("tests/golden/smollm2/perplexity.json"));
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
}

TEST(PerplexityGoldenTest, TokenizesTheTextAsHuggingFace) {
  const nlohmann::json golden = Golden();
  ASSERT_TRUE(golden.is_object());
  absl::StatusOr<engine::Checkpoint> checkpoint = engine::OpenCheckpoint(SourcePath(kModel));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  absl::StatusOr<std::unique_ptr<engine::Tokenizer>> tokenizer = engine::OpenTokenizer(*checkpoint);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  std::ifstream in(SourcePath(kText), std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(services::Sha256Hex(text.str()), golden["text_sha256"]);
  const std::vector<int32_t> ids = (*tokenizer)->Encode(text.str(), false);
  EXPECT_EQ(static_cast<int64_t>(ids.size()), golden["num_tokens"].get<int64_t>());
  std::string bytes(ids.size() * 4, '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<char>((ids[i] >> (8 * b)) & 0xff);
  }
  EXPECT_EQ(services::Sha256Hex(bytes), golden["token_ids_sha256"]);
}

// onecard perplexity's summary on the cpu backend over the golden run's text
// and windows, the KV cache in kv_cache_dtype; fp32 weights as HF runs them
// unless cpu_weights says otherwise.
nlohmann::json CpuPerplexity(const nlohmann::json& hf, const std::string& kv_cache_dtype,
                             const char* model = kModel, const char* cpu_weights = "f32") {
  PerplexityCommandOptions o{
      .model_path = SourcePath(model),
      .text_path = SourcePath(kText),
      .backend = "cpu",
      .windows = {.window = hf["window"].get<int32_t>(), .stride = hf["stride"].get<int32_t>()},
      .text_tokens = hf["text_tokens"].get<int64_t>(),
      .kv_cache_dtype = kv_cache_dtype,
      .cpu_weights = cpu_weights};
  std::ostringstream out;
  const absl::Status s = RunPerplexity(o, out);
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? nlohmann::json::parse(out.str()) : nlohmann::json();
}

TEST(PerplexityGoldenTest, CpuPerplexityMatchesHuggingFace) {
  const nlohmann::json golden = Golden();
  ASSERT_TRUE(golden.is_object());
  const nlohmann::json& hf = golden["runs"][0];
  const nlohmann::json j = CpuPerplexity(hf, "auto");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["windows"], hf["windows"]);
  EXPECT_EQ(j["scored_tokens"], hf["scored_tokens"]);
  const double ours = j["perplexity"].get<double>(), theirs = hf["perplexity"].get<double>();
  const double gap = std::abs(ours - theirs) / theirs;
  std::printf("perplexity: onecard cpu %.6f, Hugging Face %.6f, relative gap %.2e\n", ours, theirs,
              gap);
  EXPECT_LT(gap, 0.005);
}

// The FP8 E4M3 KV cache, its scales calibrated at load (kv_scales.h), costs
// less than 0.5 % perplexity over the BF16 one on the golden's 2,048 tokens
// and 512-token windows, with fp32 weights (so the gap is the KV cache's
// rounding alone). A guard on the calibration, not a proof of the bar in
// general: with 1024-token windows over 8,192 tokens, or the native weights,
// the gap is larger (bench/results/accuracy.md).
TEST(PerplexityGoldenTest, Fp8KvCacheWithinHalfAPercentOfBf16) {
  const nlohmann::json golden = Golden();
  ASSERT_TRUE(golden.is_object());
  const nlohmann::json& hf = golden["runs"][0];
  const nlohmann::json bf16 = CpuPerplexity(hf, "bf16"), fp8 = CpuPerplexity(hf, "fp8");
  ASSERT_TRUE(bf16.is_object() && fp8.is_object());
  const double base = bf16["perplexity"].get<double>(), ours = fp8["perplexity"].get<double>();
  const double gap = (ours - base) / base;
  std::printf("perplexity: KV cache bf16 %.6f, fp8 %.6f, relative gap %+.3f %%\n", base, ours,
              100 * gap);
  EXPECT_LT(std::abs(gap), 0.005);
}

// Qwen2.5-Coder-1.5B, whose layer 0 K (k_proj bias, channels near +-300
// after RoPE that barely vary) alone cost an all-FP8 cache +12.8 % on these
// windows: calibration keeps that layer in BF16 (KvFp8KError), and the FP8
// cache is within 0.5 % of the BF16 one. Native weights (the file's blocks,
// as served), the first 1,024 tokens, windows of 512 moving by 256.
TEST(PerplexityGoldenTest, Fp8KvCacheOnQwenKeepsItsOutlierLayerInBf16) {
  constexpr char kQwen[] = "models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf";
  if (!std::ifstream(SourcePath(kQwen)).good()) {
    GTEST_SKIP() << kQwen << " is not here (scripts/fetch-model.sh qwen)";
  }
  const nlohmann::json run = {{"window", 512}, {"stride", 256}, {"text_tokens", 1024}};
  const nlohmann::json bf16 = CpuPerplexity(run, "bf16", kQwen, "native");
  const nlohmann::json fp8 = CpuPerplexity(run, "fp8", kQwen, "native");
  ASSERT_TRUE(bf16.is_object() && fp8.is_object());
  const double base = bf16["perplexity"].get<double>(), ours = fp8["perplexity"].get<double>();
  const double gap = (ours - base) / base;
  std::printf("Qwen perplexity: KV cache bf16 %.6f, fp8 %.6f, relative gap %+.3f %%\n", base, ours,
              100 * gap);
  EXPECT_LT(std::abs(gap), 0.005);
}

}  // namespace
}  // namespace onecard::tools
