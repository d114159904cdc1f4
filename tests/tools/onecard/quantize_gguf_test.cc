// onecard quantize on the real GGUF files (models/, scripts/fetch-model.sh):
// - SmolLM2-135M-Instruct (Q4_1 projections): refused without
//   --allow-requantize, naming the tensor, its type and the flag; with it,
//   RTN g64 writes an HF folder whose
//   - config.json reads back as the GGUF's config,
//   - every projection, read back through onecard's GPTQ loader, equals
//     GPTQ's round-to-nearest (QuantizeGptqRtn, checked against GPTQ's
//     formulas by gptq_quantizer_test) of the GGUF's values in HF order,
//     and every other tensor equals the GGUF's values exactly,
//   - tokenizer.json and tokenizer_config.json tokenize as Hugging Face does:
//     every case of HF's tokenizer golden (tests/golden/tokenizer/smollm2,
//     from SmolLM2's own HF tokenizer), ids with and without special tokens,
//     decodes, bos / eos / special ids, the chat template's renderings, and
//     the whole evaluation text (count and SHA-256 of HF's ids,
//     tests/golden/smollm2/perplexity.json);
// - Qwen2.5-Coder-1.5B-Instruct (skipped when its file is not fetched): the
//   tokenizer files written from its GGUF tokenize the evaluation text as
//   Hugging Face does (tests/golden/qwen2_5_coder/perplexity.json).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/model/checkpoint.h"
#include "engine/model/gguf.h"
#include "engine/model/gptq_quantizer.h"
#include "engine/model/layer_tensors.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/hf_json_writer.h"
#include "engine/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/common/digest.h"
#include "tests/engine/model/model_test_util.h"
#include "tests/engine/tokenizer/golden_reader.h"
#include "tests/testing/all_close.h"
#include "tools/onecard/quantize_command.h"

namespace onecard::tools {
namespace {

using ::onecard::testing::ScratchDir;
using ::onecard::testing::SourcePath;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr char kSmolLm2[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr char kQwen[] = "models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf";
constexpr char kText[] = "tests/data/text/sqlite-docs.txt";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text's ids against a perplexity golden's count and SHA-256 (HF's
// tokenization, int32 little-endian).
void ExpectHfTokenization(const engine::Tokenizer& tokenizer, const std::string& golden_path) {
  const nlohmann::json golden =
      nlohmann::json::parse(ReadAll(SourcePath(golden_path)), nullptr, false);
  ASSERT_TRUE(golden.is_object()) << golden_path;
  const std::vector<int32_t> ids = tokenizer.Encode(ReadAll(SourcePath(kText)), false);
  EXPECT_EQ(static_cast<int64_t>(ids.size()), golden["num_tokens"].get<int64_t>());
  std::string bytes(ids.size() * 4, '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<char>((ids[i] >> (8 * b)) & 0xff);
  }
  EXPECT_EQ(services::Sha256Hex(bytes), golden["token_ids_sha256"]);
}

TEST(QuantizeGgufTest, QuantizedProjectionsNeedAllowRequantize) {
  ScratchDir scratch;
  std::ostringstream out;
  const absl::Status status = RunQuantize(
      {.model_path = SourcePath(kSmolLm2), .out_dir = scratch.path() + "/q", .group_size = 64},
      out);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(IsQuantizeUsageError(status));
  EXPECT_THAT(status.message(), HasSubstr("blk.0.attn_q.weight is Q4_1"));
  EXPECT_THAT(status.message(), HasSubstr("--allow-requantize"));
  EXPECT_FALSE(std::filesystem::exists(scratch.path() + "/q"));
}

class SmolLm2QuantizedTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new ScratchDir;
    std::ostringstream out;
    const absl::Status status = RunQuantize({.model_path = SourcePath(kSmolLm2),
                                             .out_dir = scratch_->path() + "/q",
                                             .group_size = 64,
                                             .allow_requantize = true},
                                            out);
    ASSERT_TRUE(status.ok()) << status << " (run scripts/fetch-model.sh)";
  }
  static void TearDownTestSuite() { delete scratch_; }
  static std::string dir() { return scratch_->path() + "/q"; }
  static ScratchDir* scratch_;
};
ScratchDir* SmolLm2QuantizedTest::scratch_ = nullptr;

TEST_F(SmolLm2QuantizedTest, WeightsAndConfigAreTheGgufsRequantized) {
  absl::StatusOr<engine::Checkpoint> gguf = engine::OpenCheckpoint(SourcePath(kSmolLm2));
  absl::StatusOr<engine::Checkpoint> q = engine::OpenCheckpoint(dir());
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->quant.method, engine::HfQuantMethod::kGptq);
  EXPECT_EQ(q->quant.group_size, 64);
  testing::ExpectSameModelConfig(gguf->config, q->config);
  const engine::ModelConfig& a = gguf->config;
  using engine::TensorPart;
  int compared = 0;
  for (int64_t l = -1; l < a.num_layers; ++l) {
    const std::vector<TensorPart> parts =
        l < 0 ? std::vector<TensorPart>{TensorPart::kEmbedding, TensorPart::kFinalNorm}
              : std::vector<TensorPart>{
                    TensorPart::kAttnNorm, TensorPart::kFfnNorm, TensorPart::kQ,
                    TensorPart::kK,        TensorPart::kV,       TensorPart::kO,
                    TensorPart::kGate,     TensorPart::kUp,      TensorPart::kDown};
    for (TensorPart part : parts) {
      absl::StatusOr<engine::ResolvedTensor> x = engine::ResolveTensor(*gguf, part, l < 0 ? 0 : l);
      absl::StatusOr<engine::ResolvedTensor> y = engine::ResolveTensor(*q, part, l < 0 ? 0 : l);
      ASSERT_TRUE(x.ok()) << x.status();
      ASSERT_TRUE(y.ok()) << y.status();
      absl::StatusOr<std::vector<float>> want = engine::ReadTensorF32(*x);
      absl::StatusOr<std::vector<float>> got = engine::ReadTensorF32(*y);
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_TRUE(got.ok()) << got.status();
      if (y->hf_int4.has_value()) {
        absl::StatusOr<engine::GptqQuantized> rtn =
            engine::QuantizeGptqRtn(*want, x->shape[0], x->shape[1], 64, /*sym=*/true);
        ASSERT_TRUE(rtn.ok()) << rtn.status();
        *want = engine::DequantizeGptq(*rtn);
      }
      ASSERT_EQ(got->size(), want->size()) << y->name;
      EXPECT_EQ(std::memcmp(got->data(), want->data(), got->size() * sizeof(float)), 0) << y->name;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 2 + 9 * a.num_layers);
}

TEST_F(SmolLm2QuantizedTest, TokenizerFilesTokenizeAsHuggingFace) {
  auto tok =
      engine::Tokenizer::FromHfJson(dir() + "/tokenizer.json", dir() + "/tokenizer_config.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto golden = engine::testing::ReadGolden("smollm2");
  ASSERT_TRUE(golden.ok()) << golden.status();
  for (const auto& c : golden->cases) {
    EXPECT_THAT((*tok)->Encode(c.text, false), ElementsAreArray(c.ids)) << c.text;
    EXPECT_THAT((*tok)->Encode(c.text, true), ElementsAreArray(c.ids_with_special)) << c.text;
    EXPECT_EQ((*tok)->Decode(c.ids, false), c.decoded) << c.text;
    EXPECT_EQ((*tok)->Decode(c.ids, true), c.decoded_skip_special) << c.text;
  }
  EXPECT_EQ((*tok)->vocab_size(), golden->vocab_size);
  EXPECT_EQ((*tok)->bos_id(), golden->bos_id);
  EXPECT_EQ((*tok)->eos_id(), golden->eos_id);
  std::vector<int32_t> special;
  for (int32_t id = 0; id < (*tok)->vocab_size(); ++id) {
    if ((*tok)->IsSpecial(id)) special.push_back(id);
  }
  EXPECT_THAT(special, ElementsAreArray(golden->special_ids));
  auto chat = engine::ChatTemplate::ForTokenizer(**tok);
  ASSERT_TRUE(chat.ok()) << chat.status();
  for (const auto& c : golden->chats) {
    auto text = chat->Render(c.messages, c.add_generation_prompt);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, c.text);
    EXPECT_THAT((*tok)->Encode(*text, false), ElementsAreArray(c.ids));
  }
  ExpectHfTokenization(**tok, "tests/golden/smollm2/perplexity.json");
}

TEST(QuantizeGgufQwenTest, TokenizerFilesTokenizeAsHuggingFace) {
  if (!std::filesystem::exists(SourcePath(kQwen))) {
    GTEST_SKIP() << kQwen << " not fetched (scripts/fetch-model.sh qwen)";
  }
  absl::StatusOr<std::unique_ptr<engine::GgufFile>> gguf =
      engine::GgufFile::Open(SourcePath(kQwen));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  absl::StatusOr<engine::BpeTokenizerSpec> spec = engine::BpeTokenizerSpecFromGguf(**gguf);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<engine::HfTokenizerFiles> files = engine::HfTokenizerJson(*spec, 32768);
  ASSERT_TRUE(files.ok()) << files.status();
  ScratchDir scratch;
  const std::string json = scratch.Write("tokenizer.json", files->tokenizer_json);
  const std::string config = scratch.Write("tokenizer_config.json", files->tokenizer_config_json);
  auto tok = engine::Tokenizer::FromHfJson(json, config);
  ASSERT_TRUE(tok.ok()) << tok.status();
  ExpectHfTokenization(**tok, "tests/golden/qwen2_5_coder/perplexity.json");
}

}  // namespace
}  // namespace onecard::tools
