// Broken HF 4-bit checkpoints: edited copies of tests/golden/hf_int4/ (a
// missing scales tensor, wrong shapes and dtypes, packed sizes that do not
// match, g_idx out of range or with uneven groups, an unknown quant_method, a
// sym checkpoint whose zero points are not 8, 4-bit tensors without a config,
// compressed-tensors weight_shape and target mismatches), each error naming
// the file, the tensor and the field; BF16 / F32 scales read exactly when
// fp16 holds them and refused when not; and a fuzz pass (truncations and
// seeded bit flips of every file) that never crashes and whose every error
// names the file it comes from.
#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"
#include "engine/common/fp16.h"
#include "engine/common/status_macros.h"
#include "engine/model/hf_int4.h"
#include "engine/model/layer_tensors.h"
#include "engine/model/model_weights.h"
#include "engine/model/quant_blocks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/model_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using ::onecard::testing::RawTensor;
using ::onecard::testing::ScratchDir;
using ::testing::HasSubstr;

constexpr char kQ[] = "model.layers.0.self_attn.q_proj";

std::string Golden(const std::string& dir) {
  return ::onecard::testing::SourcePath("tests/golden/hf_int4/" + dir);
}

// A copy of a golden checkpoint in a scratch folder, its tensors editable.
class EditedCheckpoint : public ::onecard::testing::EditedCheckpoint {
 public:
  explicit EditedCheckpoint(const std::string& dir)
      : ::onecard::testing::EditedCheckpoint(Golden(dir)) {}
  // Writes the tensors and reads q_proj's 4-bit matrix.
  absl::StatusOr<Int4Matrix> ReadQ() const {
    WriteTensors();
    ASSIGN_OR_RETURN(const Checkpoint ckpt, OpenCheckpoint(path()));
    ASSIGN_OR_RETURN(const ResolvedTensor t, ResolveTensor(ckpt, TensorPart::kQ, 0));
    return ReadTensorInt4(t);
  }
};

int32_t GetI32(const RawTensor& t, int64_t i) {
  int32_t v;
  std::memcpy(&v, t.bytes.data() + 4 * i, 4);
  return v;
}
void SetI32(RawTensor* t, int64_t i, int32_t v) { std::memcpy(t->bytes.data() + 4 * i, &v, 4); }

void ExpectError(const absl::Status& status, const std::string& file, const std::string& needle) {
  ASSERT_FALSE(status.ok()) << "expected an error with: " << needle;
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(file + ": ")) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(needle)) << status;
}

TEST(HfInt4BadInputTest, MissingScales) {
  EditedCheckpoint c("gptq_v1_act");
  c.Remove(absl::StrCat(kQ, ".scales"));
  ExpectError(c.Load(), c.model_path(),
              absl::StrCat("tensor '", kQ, ".scales' (GPTQ field scales): not found"));
}

TEST(HfInt4BadInputTest, WrongShapes) {
  EditedCheckpoint c("gptq_v1_act");
  c.Find(absl::StrCat(kQ, ".qzeros"))->shape = {1, 16};
  ExpectError(c.Load(), c.model_path(),
              absl::StrCat("tensor '", kQ,
                           ".qzeros' (GPTQ field qzeros): has shape [1, 16], "
                           "expected [k / group, n / 8] = [2, 8]"));
  EditedCheckpoint awq("awq");
  RawTensor* qweight = awq.Find(absl::StrCat(kQ, ".qweight"));
  qweight->shape = {32, 16};
  ExpectError(awq.Load(), awq.model_path(),
              absl::StrCat("tensor '", kQ,
                           ".qweight' (AWQ field qweight): has shape [32, 16], "
                           "expected [k, n / 8] = [64, 8]"));
}

TEST(HfInt4BadInputTest, PackedSizeDoesNotMatchItsShape) {
  EditedCheckpoint c("gptq_v2_sym");
  RawTensor* qweight = c.Find(absl::StrCat(kQ, ".qweight"));
  qweight->bytes.resize(qweight->bytes.size() - 4);
  ExpectError(c.Load(), c.model_path(),
              absl::StrCat("tensor '", kQ, ".qweight' holds 2044 bytes; I32 of 512 elements"));
}

TEST(HfInt4BadInputTest, WrongDtype) {
  EditedCheckpoint c("awq");
  RawTensor* scales = c.Find(absl::StrCat(kQ, ".scales"));
  scales->dtype = "I32";
  scales->shape = {1, 32};
  ExpectError(c.Load(), c.model_path(),
              absl::StrCat("tensor '", kQ, ".scales' (AWQ field scales): has dtype I32"));
}

TEST(HfInt4BadInputTest, GIdxOutOfRangeOrUneven) {
  EditedCheckpoint c("gptq_v1_act");
  RawTensor* g_idx = c.Find(absl::StrCat(kQ, ".g_idx"));
  SetI32(g_idx, 5, 99);
  ExpectError(c.Load(), c.model_path(),
              absl::StrCat("tensor '", kQ,
                           ".g_idx' (GPTQ field g_idx): g_idx[5] = 99 is "
                           "outside [0, 2)"));
  SetI32(g_idx, 5, -1);
  ExpectError(c.Load(), c.model_path(), "g_idx[5] = -1 is outside [0, 2)");
  EditedCheckpoint uneven("gptq_v1_act");
  g_idx = uneven.Find(absl::StrCat(kQ, ".g_idx"));
  SetI32(g_idx, 5, 1 - GetI32(*g_idx, 5));  // one column moves to the other group
  ExpectError(uneven.Load(), uneven.model_path(),
              absl::StrCat("tensor '", kQ, ".g_idx' (GPTQ field g_idx): group 0 holds 3"));
}

TEST(HfInt4BadInputTest, UnknownQuantMethod) {
  EditedCheckpoint c("gptq_v1_act");
  c.WriteFile("quantize_config.json", R"({"quant_method": "hqq", "bits": 4})");
  const absl::Status status = c.Load();
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(c.path() + "/quantize_config.json: field 'quant_method' is \"hqq\""));
}

TEST(HfInt4BadInputTest, SymmetricZeroPointsMustBeEight) {
  EditedCheckpoint c("gptq_v2_sym");
  SetI32(c.Find(absl::StrCat(kQ, ".qzeros")), 0, 0x88888878);
  ExpectError(c.Load(), c.model_path(),
              absl::StrCat("tensor '", kQ,
                           ".qzeros' (GPTQ field qzeros): zero point 7 of row 1, "
                           "group 0 is not 8, though the config says sym = true"));
}

TEST(HfInt4BadInputTest, FourBitTensorsWithoutAConfig) {
  EditedCheckpoint c("gptq_v1_act");
  c.RemoveFile("quantize_config.json");
  ExpectError(c.Load(), c.model_path(),
              absl::StrCat("tensor '", kQ,
                           ".qweight' (field qweight) is 4-bit, but the "
                           "checkpoint has no quantization config"));
}

TEST(HfInt4BadInputTest, CompressedWeightShapeAndTargets) {
  EditedCheckpoint c("compressed");
  c.Remove(absl::StrCat(kQ, ".weight_shape"));
  ExpectError(c.Load(), c.model_path(),
              absl::StrCat("tensor '", kQ,
                           ".weight_shape' (compressed-tensors field "
                           "weight_shape): not found"));
  EditedCheckpoint wrong("compressed");
  SetI32(wrong.Find(absl::StrCat(kQ, ".weight_shape")), 0, 65);  // low word of an I64
  ExpectError(wrong.Load(), wrong.model_path(), "must be an I64 [2] holding [64, 64]");
  EditedCheckpoint untargeted("compressed");
  std::string config = ::onecard::testing::ReadTestFile(Golden("compressed") + "/config.json");
  config.replace(config.find("\"Linear\""), 8, "\"re:nothing\"");
  untargeted.WriteFile("config.json", config);
  ExpectError(
      untargeted.Load(), untargeted.path() + "/config.json",
      "field 'config_groups' has no group whose targets match module "
      "'model.layers.0.mlp.gate_proj' (tensor 'model.layers.0.mlp.gate_proj.weight_packed')");
}

// The fp16 scales rounded to bf16's 8 significant bits, stored as F16, BF16
// and F32: all three read to the same matrix; a BF16 scale that fp16 cannot
// hold is refused.
TEST(HfInt4BadInputTest, Bf16AndF32ScalesAreReadExactlyOrNotAtAll) {
  const std::string name = absl::StrCat(kQ, ".weight_scale");
  EditedCheckpoint f16("compressed"), bf16("compressed"), f32("compressed");
  RawTensor* s16 = f16.Find(name);
  const int64_t count = static_cast<int64_t>(s16->bytes.size()) / 2;
  std::string b16(count * 2, '\0'), b32(count * 4, '\0');
  for (int64_t i = 0; i < count; ++i) {
    uint16_t h;
    std::memcpy(&h, s16->bytes.data() + 2 * i, 2);
    const uint16_t b = FloatToBf16(HalfToFloat(h));
    const float v = Bf16ToFloat(b);
    h = FloatToHalf(v);
    std::memcpy(s16->bytes.data() + 2 * i, &h, 2);
    std::memcpy(b16.data() + 2 * i, &b, 2);
    std::memcpy(b32.data() + 4 * i, &v, 4);
  }
  *bf16.Find(name) = {name, "BF16", s16->shape, b16};
  *f32.Find(name) = {name, "F32", s16->shape, b32};
  auto want = f16.ReadQ();
  ASSERT_TRUE(want.ok()) << want.status();
  for (EditedCheckpoint* c : {&bf16, &f32}) {
    auto got = c->ReadQ();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->scales, want->scales);
    EXPECT_EQ(got->offset, want->offset);
    EXPECT_EQ(got->q, want->q);
  }
  const uint16_t tiny = FloatToBf16(1e-9f);
  std::memcpy(bf16.Find(name)->bytes.data() + 2 * 3, &tiny, 2);
  ExpectError(bf16.ReadQ().status(), bf16.model_path(),
              absl::StrCat("tensor '", name, "' (compressed-tensors field weight_scale): scale ",
                           Bf16ToFloat(tiny), " at index 3 is not exact in fp16"));
}

// Loads `dir` as the CPU backend and the CUDA loader would; an error must
// name the folder or one of its files.
void ExpectLoadsOrNamesTheFile(const std::string& dir) {
  auto ckpt = OpenCheckpoint(dir);
  absl::Status status = ckpt.status();
  if (ckpt.ok()) status = LoadWeightsF32(*ckpt).status();
  for (TensorPart part : {TensorPart::kQ, TensorPart::kGate, TensorPart::kDown}) {
    if (!status.ok()) break;
    auto t = ResolveTensor(*ckpt, part, 0);
    status = t.ok() ? Int4FormOf(*t).status() : t.status();
    if (status.ok()) status = ReadTensorInt4(*t).status();
  }
  if (!status.ok()) EXPECT_THAT(std::string(status.message()), HasSubstr(dir)) << status;
}

TEST(HfInt4FuzzTest, TruncatedAndBitFlippedFilesNeverCrash) {
  std::mt19937 rng(17);
  for (const char* variant : {"gptq_v1_act", "gptq_v2_sym", "awq", "compressed"}) {
    std::vector<std::string> files = {"model.safetensors", "config.json"};
    if (std::filesystem::exists(Golden(variant) + "/quantize_config.json")) {
      files.push_back("quantize_config.json");
    }
    ScratchDir d;
    for (const std::string& f : files) {
      d.Write(f, ::onecard::testing::ReadTestFile(Golden(variant) + "/" + f));
    }
    for (const std::string& f : files) {
      const std::string original = ::onecard::testing::ReadTestFile(Golden(variant) + "/" + f);
      for (int cut = 0; cut < 16; ++cut) {
        d.Write(f, original.substr(0, original.size() * cut / 16));
        ExpectLoadsOrNamesTheFile(d.path());
      }
      std::uniform_int_distribution<size_t> pos(0, original.size() - 1);
      for (int i = 0; i < 80; ++i) {
        std::string flipped = original;
        for (int b = 0; b < 1 + i % 4; ++b)
          flipped[pos(rng)] ^= static_cast<char>(1 << (rng() % 8));
        d.Write(f, flipped);
        ExpectLoadsOrNamesTheFile(d.path());
      }
      d.Write(f, original);
    }
  }
}

}  // namespace
}  // namespace onecard::engine
