// Broken HF FP8 checkpoints: edited copies of tests/golden/hf_fp8/ (a
// missing scales tensor, scales of the wrong shape or dtype, a NaN code, a
// zero or negative scale, an F8_E4M3 weight without a quantization config,
// with a 4-bit one, or on the config's ignore list, a 4-bit tensor under an
// FP8 config), each refused with InvalidArgument naming the file and the
// tensor.
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/model/hf_fp8.h"
#include "engine/model/layer_tensors.h"
#include "engine/model/model_weights.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine/model/model_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using ::onecard::testing::RawTensor;
using ::onecard::testing::ScratchDir;
using ::testing::HasSubstr;

constexpr char kQ[] = "model.layers.0.self_attn.q_proj";
constexpr char kDown[] = "model.layers.0.mlp.down_proj";

std::string Golden(const std::string& dir) {
  return ::onecard::testing::SourcePath("tests/golden/hf_fp8/" + dir);
}

// A copy of a golden checkpoint in a scratch folder, its tensors and config
// editable.
class EditedCheckpoint : public ::onecard::testing::EditedCheckpoint {
 public:
  explicit EditedCheckpoint(const std::string& dir)
      : ::onecard::testing::EditedCheckpoint(Golden(dir)),
        config_(::onecard::testing::LoadTestJson(Golden(dir) + "/config.json")) {}
  nlohmann::json& config() { return config_; }
  absl::Status Load() {
    WriteFile("config.json", config_.dump(2));
    return ::onecard::testing::EditedCheckpoint::Load();
  }

 private:
  nlohmann::json config_;
};

void ExpectError(const absl::Status& status, const std::string& file, const std::string& needle) {
  ASSERT_FALSE(status.ok()) << "expected an error with: " << needle;
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(file + ": ")) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(needle)) << status;
}

TEST(HfFp8BadInputTest, TheGoldenCopiesLoad) {
  for (const char* dir : {"ct_channel", "ct_tensor", "fp8_block", "fbgemm"}) {
    EditedCheckpoint c(dir);
    const absl::Status status = c.Load();
    EXPECT_TRUE(status.ok()) << dir << ": " << status;
  }
}

TEST(HfFp8BadInputTest, MissingScales) {
  EditedCheckpoint c("ct_channel");
  c.Remove(absl::StrCat(kQ, ".weight_scale"));
  ExpectError(c.Load(), c.model_path(),
              absl::StrCat("tensor '", kQ, ".weight_scale' (FP8 field weight_scale): not found"));
  EditedCheckpoint block("fp8_block");
  block.Remove(absl::StrCat(kQ, ".weight_scale_inv"));
  ExpectError(block.Load(), block.model_path(),
              absl::StrCat("tensor '", kQ, ".weight_scale_inv' (FP8 field weight_scale_inv)"));
}

TEST(HfFp8BadInputTest, ScalesOfTheWrongShape) {
  EditedCheckpoint c("ct_channel");
  c.Find(absl::StrCat(kQ, ".weight_scale"))->shape = {1, 64};
  ExpectError(c.Load(), c.model_path(),
              "has shape [1, 64], expected [64, 1] (channel scales of W [64, 64])");
  EditedCheckpoint block("fp8_block");
  block.Find(absl::StrCat(kQ, ".weight_scale_inv"))->shape = {4, 1};
  ExpectError(block.Load(), block.model_path(),
              "has shape [4, 1], expected [2, 2] (block128 scales of W [136, 136])");
  EditedCheckpoint tensor("ct_tensor");
  RawTensor* s = tensor.Find(absl::StrCat(kQ, ".weight_scale"));
  s->shape = {2};
  s->bytes += s->bytes;
  ExpectError(tensor.Load(), tensor.model_path(), "has shape [2], expected [1] (tensor scales");
}

TEST(HfFp8BadInputTest, ScalesOfTheWrongDtype) {
  EditedCheckpoint c("fbgemm");
  c.Find(absl::StrCat(kQ, ".weight_scale"))->dtype = "I32";
  ExpectError(c.Load(), c.model_path(),
              absl::StrCat("tensor '", kQ,
                           ".weight_scale' (FP8 field weight_scale): has dtype I32, expected F32, "
                           "BF16 or F16"));
}

TEST(HfFp8BadInputTest, NanCode) {
  for (const uint8_t nan : {0x7f, 0xff}) {
    EditedCheckpoint c("fp8_block");
    c.Find(absl::StrCat(kQ, ".weight"))->bytes[136 + 5] = static_cast<char>(nan);
    ExpectError(c.Load(), c.model_path(),
                absl::StrCat(kQ, ".weight: fp8 code 141 (row 1, column 5) is NaN"));
  }
}

TEST(HfFp8BadInputTest, ScaleThatIsNotPositive) {
  EditedCheckpoint c("ct_channel");  // BF16 scales
  RawTensor* s = c.Find(absl::StrCat(kQ, ".weight_scale"));
  s->bytes[6] = 0;
  s->bytes[7] = 0;
  ExpectError(c.Load(), c.model_path(), "fp8 scale 3 is 0, not finite and positive");
  EditedCheckpoint block("fp8_block");  // F32 scales
  RawTensor* inv = block.Find(absl::StrCat(kQ, ".weight_scale_inv"));
  const float negative = -0.5f;
  std::memcpy(inv->bytes.data() + 4, &negative, 4);
  ExpectError(block.Load(), block.model_path(), "fp8 scale 1 is -0.5, not finite and positive");
}

TEST(HfFp8BadInputTest, Fp8WeightTheConfigDoesNotMakeFp8) {
  EditedCheckpoint none("fbgemm");
  none.config().erase("quantization_config");
  ExpectError(none.Load(), none.model_path(),
              absl::StrCat("tensor '", kQ,
                           ".weight' is F8_E4M3, but the checkpoint has no quantization config"));
  EditedCheckpoint gptq("fbgemm");
  gptq.config()["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
  ExpectError(gptq.Load(), gptq.model_path(), "(gptq) gives module '" + std::string(kQ));
  EditedCheckpoint ignored("ct_channel");  // down_proj is on the ignore list
  RawTensor* down = ignored.Find(absl::StrCat(kDown, ".weight"));
  down->dtype = "F8_E4M3";
  down->bytes.resize(down->bytes.size() / 2, '\x38');
  ExpectError(ignored.Load(), ignored.model_path(),
              absl::StrCat("is F8_E4M3, but module '", kDown, "' is on the ignore list"));
}

TEST(HfFp8BadInputTest, FourBitTensorUnderAnFp8Config) {
  std::vector<RawTensor> tensors =
      ::onecard::testing::ReadRawTensors(Golden("fbgemm") + "/model.safetensors");
  std::erase_if(tensors, [](const RawTensor& t) { return t.name.starts_with(kQ); });
  tensors.push_back({absl::StrCat(kQ, ".qweight"), "I32", {8, 64}, std::string(8 * 64 * 4, '\0')});
  ScratchDir dir;
  dir.Write("config.json", ::onecard::testing::ReadTestFile(Golden("fbgemm") + "/config.json"));
  dir.Write("model.safetensors", ::onecard::testing::SafetensorsRaw(tensors));
  auto ckpt = OpenCheckpoint(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ExpectError(ResolveTensor(*ckpt, TensorPart::kQ, 0).status(), dir.path() + "/model.safetensors",
              "is 4-bit, but the quantization config (fbgemm_fp8");
}

}  // namespace
}  // namespace onecard::engine
