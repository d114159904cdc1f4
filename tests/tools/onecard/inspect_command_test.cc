// RunInspect on tiny GGUF and HF checkpoints (a GPTQ one from
// tests/golden/hf_int4/ and the FP8 ones of tests/golden/hf_fp8/ among
// them): config lines, the quantization, one line
// per tensor with dtype, shape, bytes and format, totals by dtype and by
// format; errors of a bad path.
#include "tools/onecard/inspect_command.h"

#include <sys/stat.h>

#include <sstream>

#include "engine/model/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/tiny_model.h"
#include "tests/testing/all_close.h"

namespace onecard::tools {
namespace {

using namespace ::onecard::testing;  // NOLINT: tiny models and scratch folders
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

TEST(InspectCommandTest, PrintsConfigTensorsAndTotalsOfAGguf) {
  ScratchDir dir;
  TinySpec spec;  // llama, vocab 40, hidden 16, 2 layers, untied
  std::string path = dir.Write("tiny.gguf", TinyGgufWriter(MakeTinyModel(spec)).Build().bytes);
  std::ostringstream out;
  ASSERT_TRUE(RunInspect(path, out).ok());
  std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("model: " + path + "\nformat: gguf v3\nquantization: none\n"));
  EXPECT_THAT(text, HasSubstr("architecture: llama\nname: tiny llama\nvocab_size: 40\n"));
  EXPECT_THAT(text, HasSubstr("num_heads: 4\nnum_kv_heads: 2\nhead_dim: 4\n"));
  EXPECT_THAT(text, HasSubstr("rope_theta: 500000\nrope_scaling: none\n"));
  EXPECT_THAT(text, HasSubstr("tie_word_embeddings: false\nbos_token_id: 1\neos_token_id: 2\n"));
  // token_embd.weight: F32 [40, 16] = 2560 bytes.
  EXPECT_THAT(text,
              MatchesRegex("(.|\n)*\n  token_embd.weight +F32 +\\[40, 16\\] +2560  F32\n(.|\n)*"));
  EXPECT_THAT(text, MatchesRegex(
                        "(.|\n)*\n  blk.1.ffn_down.weight +F32 +\\[16, 24\\] +1536  F32\n(.|\n)*"));
  // 3 + 9 per layer tensors; parameters: 2*40*16 + 16 + 2*(2*16 + 3*24*16 + 16*16*2 + 8*16*2).
  int64_t params = 2 * 40 * 16 + 16 + 2 * (2 * 16 + 3 * 24 * 16 + 2 * 16 * 16 + 2 * 8 * 16);
  EXPECT_THAT(text, HasSubstr(absl::StrCat("totals: 21 tensors, ", params, " parameters, ",
                                           params * 4, " bytes")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("  F32    21 tensors, ", params, " parameters")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("bytes by format:\n  F32    21 tensors, ", params * 4,
                                           " bytes")));
}

TEST(InspectCommandTest, PrintsAnHfFolder) {
  ScratchDir dir;
  TinySpec spec;
  spec.arch = "qwen2";
  std::string folder = WriteTinyHfFolder(MakeTinyModel(spec), dir, "qwen");
  std::ostringstream out;
  ASSERT_TRUE(RunInspect(folder, out).ok());
  EXPECT_THAT(out.str(),
              HasSubstr("format: safetensors (1 file)\nquantization: none\narchitecture: qwen2\n"));
  EXPECT_THAT(out.str(), HasSubstr("attention_bias: true\n"));
  EXPECT_THAT(out.str(), HasSubstr("model.layers.0.self_attn.q_proj.bias"));
}

TEST(InspectCommandTest, ShowsEachTensorsFormatAndTheBytesOfEachFormat) {
  const std::string folder = SourcePath("tests/golden/hf_int4/gptq_v1_act");
  std::ostringstream out;
  ASSERT_TRUE(RunInspect(folder, out).ok());
  const std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("quantization: gptq v1 group_size=32 sym=false desc_act=true (" +
                              folder + "/quantize_config.json)\n"));
  // q_proj.qzeros: I32 [k / 32, n / 8] = [2, 8], 64 bytes.
  EXPECT_THAT(text, MatchesRegex("(.|\n)*\n  model.layers.0.self_attn.q_proj.qzeros +I32 +\\[2, "
                                 "8\\] +64  gptq int4 g32 zero desc_act\n(.|\n)*"));
  EXPECT_THAT(text, MatchesRegex("(.|\n)*\n  model.embed_tokens.weight +F16 +\\[32, 64\\] +4096 "
                                 " F16\n(.|\n)*"));
  // The 7 projections' qweight, qzeros, scales and g_idx.
  uint64_t gptq_bytes = 0;
  auto source = engine::SafetensorsSource::OpenFile(folder + "/model.safetensors");
  ASSERT_TRUE(source.ok()) << source.status();
  for (const std::string& name : (*source)->TensorNames()) {
    if (!name.ends_with(".weight")) gptq_bytes += (*source)->Find(name)->size_bytes;
  }
  EXPECT_THAT(text, HasSubstr(absl::StrCat("  gptq int4 g32 zero desc_act  28 tensors, ",
                                           gptq_bytes, " bytes")));
}

// An FP8 weight and its scales show the module's format; the bytes by format
// add up the F8_E4M3 codes and their scales.
TEST(InspectCommandTest, ShowsFp8FormatsAndTheirBytes) {
  struct Case {
    const char* dir;
    const char* quantization;
    const char* format;
  };
  for (const Case& c : {Case{"ct_channel", "compressed-tensors float-quantized, 1 group",
                             "compressed-tensors e4m3 channel"},
                        Case{"fp8_block", "fp8 e4m3 weights=block128 activations=dynamic-group128",
                             "fp8 e4m3 block128"},
                        Case{"fbgemm", "fbgemm_fp8 e4m3 weights=channel activations=dynamic-token",
                             "fbgemm_fp8 e4m3 channel"}}) {
    const std::string folder = SourcePath(std::string("tests/golden/hf_fp8/") + c.dir);
    std::ostringstream out;
    ASSERT_TRUE(RunInspect(folder, out).ok()) << c.dir;
    const std::string text = out.str();
    EXPECT_THAT(text, HasSubstr(absl::StrCat("quantization: ", c.quantization, " (", folder,
                                             "/config.json)\n")));
    auto source = engine::SafetensorsSource::OpenFile(folder + "/model.safetensors");
    ASSERT_TRUE(source.ok()) << source.status();
    uint64_t fp8_bytes = 0;
    int fp8_tensors = 0;
    for (const std::string& name : (*source)->TensorNames()) {
      const engine::TensorView* t = (*source)->Find(name);
      const bool scale = name.ends_with(".weight_scale") || name.ends_with(".weight_scale_inv");
      if (t->dtype != engine::DType::kF8E4M3 && !scale) continue;
      fp8_bytes += t->size_bytes;
      ++fp8_tensors;
    }
    EXPECT_THAT(text, HasSubstr(absl::StrCat("  ", c.format, "  ", fp8_tensors, " tensors, ",
                                             fp8_bytes, " bytes")));
    EXPECT_THAT(text, MatchesRegex("(.|\n)*\n  model.layers.0.self_attn.q_proj.weight +F8_E4M3 "
                                   "+\\[[0-9]+, [0-9]+\\] +[0-9]+  " +
                                   std::string(c.format) + "\n(.|\n)*"));
  }
}

// Issue 22: `onecard inspect` on a FIFO hung; a FIFO or a device is now an
// error naming the file, whatever its name.
TEST(InspectCommandTest, FifoAndDeviceAreErrorsNamingTheFile) {
  ScratchDir dir;
  for (const std::string name : {"pipe.gguf", "pipe"}) {
    const std::string path = dir.path() + "/" + name;
    ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
    std::ostringstream out;
    absl::Status status = RunInspect(path, out);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(path + ": a FIFO, not a regular file"));
    EXPECT_TRUE(out.str().empty());
  }
  std::ostringstream out;
  absl::Status status = RunInspect("/dev/zero", out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("/dev/zero: a character device"));
}

TEST(InspectCommandTest, BadPathIsAnError) {
  std::ostringstream out;
  absl::Status status = RunInspect("/nonexistent/model.gguf", out);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr("/nonexistent/model.gguf"));
  EXPECT_TRUE(out.str().empty());
}

}  // namespace
}  // namespace onecard::tools
