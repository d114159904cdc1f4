// GgufFile on well-formed input: a file written by the gguf package
// (tests/golden/model/tiny_v3.gguf, with what gguf.GGUFReader read back in
// tiny_v3.json) and crafted v2 / v3 files from the test writer: metadata of
// every type, typed getters, tensor infos, alignment, shapes outermost first.
// Bad inputs are in gguf_bad_input_test.cc.
#include "engine/model/gguf.h"

#include <cmath>

#include "engine/model/dequantize.h"
#include "engine/model/model_weights.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/model_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using ::onecard::testing::GgufTestWriter;
using ::onecard::testing::ScratchDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kGolden[] = "tests/golden/model/tiny_v3";
constexpr char kNulString[] = "tokens \xe2\x96\x81 and \x00 nul";
const std::string kNul(kNulString, sizeof(kNulString) - 1);

TEST(GgufTest, ReadsMetadataWrittenByTheGgufPackage) {
  auto gguf = GgufFile::Open(::onecard::testing::SourcePath(std::string(kGolden) + ".gguf"));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  nlohmann::json want = ::onecard::testing::LoadTestJson(
      ::onecard::testing::SourcePath(std::string(kGolden) + ".json"));
  EXPECT_EQ((*gguf)->version(), 3u);
  EXPECT_EQ((*gguf)->metadata().size(), want["metadata"].size());
  for (const auto& [key, value] : want["metadata"].items()) {
    SCOPED_TRACE(key);
    ASSERT_NE((*gguf)->FindMetadata(key), nullptr);
    if (value.is_boolean()) {
      EXPECT_EQ((*gguf)->GetBool(key).value(), value.get<bool>());
    } else if (value.is_number_integer()) {
      EXPECT_EQ((*gguf)->GetInt(key).value(), value.get<int64_t>());
    } else if (value.is_number()) {
      EXPECT_EQ((*gguf)->GetFloat(key).value(), value.get<double>());
    } else if (value.is_string()) {
      EXPECT_EQ((*gguf)->GetString(key).value(), value.get<std::string>());
    } else if (value[0].is_string()) {
      EXPECT_EQ((*gguf)->GetStringArray(key).value(), value.get<std::vector<std::string>>());
    } else if (value[0].is_boolean()) {
      EXPECT_EQ(std::get<std::vector<bool>>(
                    std::get<GgufValue::Array>((*gguf)->FindMetadata(key)->value)),
                value.get<std::vector<bool>>());
    } else if (value[0].is_number_integer()) {
      EXPECT_EQ((*gguf)->GetIntArray(key).value(), value.get<std::vector<int64_t>>());
    } else {
      EXPECT_EQ((*gguf)->GetFloatArray(key).value(), value.get<std::vector<double>>());
    }
  }
}

TEST(GgufTest, ReadsTensorsWrittenByTheGgufPackage) {
  std::string path = ::onecard::testing::SourcePath(std::string(kGolden) + ".gguf");
  auto gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  nlohmann::json want = ::onecard::testing::LoadTestJson(
      ::onecard::testing::SourcePath(std::string(kGolden) + ".json"));
  std::vector<std::string> names;
  for (const auto& t : want["tensors"]) names.push_back(t["name"]);
  EXPECT_EQ((*gguf)->TensorNames(), names);
  for (const auto& t : want["tensors"]) {
    SCOPED_TRACE(t["name"].get<std::string>());
    const TensorView* view = (*gguf)->Find(t["name"]);
    ASSERT_NE(view, nullptr);
    EXPECT_EQ(DTypeName(view->dtype), t["type"].get<std::string>());
    EXPECT_EQ(view->shape, t["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(view->file_offset, t["offset"].get<uint64_t>());
    EXPECT_EQ(view->size_bytes, t["bytes"].get<uint64_t>());
    EXPECT_EQ(view->file_path, path);
    auto values = DequantizeToF32(*view);
    ASSERT_TRUE(values.ok()) << values.status();
    std::vector<float> expected = t["values"].get<std::vector<float>>();
    EXPECT_ALL_CLOSE(*values, expected, (::onecard::testing::Tolerance{1e-6, 1e-6, 1e-12}));
  }
  EXPECT_EQ((*gguf)->Find("absent"), nullptr);
}

// Every metadata type and array kind, in either version.
GgufTestWriter EveryTypeWriter(uint32_t version) {
  using namespace ::onecard::testing;  // NOLINT: the type constants
  GgufTestWriter w(version);
  w.AddInt("u8", kMetaU8, 255);
  w.AddInt("i8", kMetaI8, -128);
  w.AddInt("u16", kMetaU16, 65535);
  w.AddInt("i16", kMetaI16, -32768);
  w.AddInt("u32", kMetaU32, 4294967295);
  w.AddInt("i32", kMetaI32, -2147483648ll);
  w.AddInt("u64", kMetaU64, int64_t{1} << 62);
  w.AddInt("i64", kMetaI64, -(int64_t{1} << 62));
  w.AddF32("f32", 0.25f);
  w.AddF64("f64", -1e300);
  w.AddBool("yes", true);
  w.AddBool("no", false);
  w.AddString("s", kNul);
  w.AddString("empty", "");
  w.AddIntArray("ai8", kMetaI8, {-1, 2});
  w.AddIntArray("au64", kMetaU64, {0, 1ll << 40});
  w.AddF32Array("af32", {1.5f, -2.0f});
  w.AddStringArray("astr", {"x", "", "zz"});
  w.AddIntArray("aempty", kMetaI32, {});
  w.AddRaw("abool", kMetaArray, std::string("\x07\0\0\0\x02\0\0\0\0\0\0\0\x01\x00", 14));
  w.AddF32Tensor("t", {2, 3}, {1, 2, 3, 4, 5, 6});
  return w;
}

class GgufVersionTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufVersionTest, ReadsEveryMetadataType) {
  ScratchDir dir;
  std::string path = dir.Write("every.gguf", EveryTypeWriter(GetParam()).Build().bytes);
  auto gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const GgufFile& g = **gguf;
  EXPECT_EQ(g.version(), GetParam());
  EXPECT_EQ(g.GetInt("u8").value(), 255);
  EXPECT_EQ(g.GetInt("i8").value(), -128);
  EXPECT_EQ(g.GetInt("u16").value(), 65535);
  EXPECT_EQ(g.GetInt("i16").value(), -32768);
  EXPECT_EQ(g.GetInt("u32").value(), 4294967295);
  EXPECT_EQ(g.GetInt("i32").value(), -2147483648ll);
  EXPECT_EQ(g.GetInt("u64").value(), int64_t{1} << 62);
  EXPECT_EQ(g.GetInt("i64").value(), -(int64_t{1} << 62));
  EXPECT_EQ(g.GetFloat("f32").value(), 0.25);
  EXPECT_EQ(g.GetFloat("f64").value(), -1e300);
  EXPECT_EQ(g.GetFloat("u8").value(), 255.0);  // ints read as floats
  EXPECT_TRUE(g.GetBool("yes").value());
  EXPECT_FALSE(g.GetBool("no").value());
  EXPECT_EQ(g.GetString("s").value(), kNul);
  EXPECT_EQ(kNul.size(), 20u);
  EXPECT_EQ(g.GetString("empty").value(), "");
  EXPECT_THAT(g.GetIntArray("ai8").value(), ElementsAre(-1, 2));
  EXPECT_THAT(g.GetIntArray("au64").value(), ElementsAre(0, 1ll << 40));
  EXPECT_THAT(g.GetFloatArray("af32").value(), ElementsAre(1.5, -2.0));
  EXPECT_THAT(g.GetFloatArray("ai8").value(), ElementsAre(-1.0, 2.0));
  EXPECT_THAT(g.GetStringArray("astr").value(), ElementsAre("x", "", "zz"));
  EXPECT_TRUE(g.GetIntArray("aempty").value().empty());
  EXPECT_EQ(std::get<std::vector<bool>>(std::get<GgufValue::Array>(g.FindMetadata("abool")->value)),
            (std::vector<bool>{true, false}));
  const TensorView* t = g.Find("t");
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->shape, ElementsAre(2, 3));
  EXPECT_EQ(t->NumElements(), 6);
  EXPECT_EQ(DequantizeToF32(*t).value(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

INSTANTIATE_TEST_SUITE_P(V2AndV3, GgufVersionTest, ::testing::Values(2u, 3u));

TEST(GgufTest, TypedGettersNameTheKeyAndTheTypes) {
  ScratchDir dir;
  std::string path = dir.Write("every.gguf", EveryTypeWriter(3).Build().bytes);
  auto gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  absl::Status missing = (*gguf)->GetInt("nope").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()), HasSubstr("'nope'"));
  EXPECT_THAT(std::string(missing.message()), HasSubstr(path));
  absl::Status wrong = (*gguf)->GetInt("s").status();
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.message()), HasSubstr("'s' is string, not int"));
  EXPECT_THAT(std::string((*gguf)->GetString("astr").status().message()),
              HasSubstr("'astr' is array of string, not string"));
  EXPECT_FALSE((*gguf)->GetBool("u8").ok());
  EXPECT_FALSE((*gguf)->GetStringArray("ai8").ok());
  EXPECT_FALSE((*gguf)->GetFloatArray("astr").ok());
}

TEST(GgufTest, HonoursGeneralAlignment) {
  using namespace ::onecard::testing;  // NOLINT: the type constants
  GgufTestWriter w;
  w.AddInt("general.alignment", kMetaU32, 64);
  w.set_alignment(64);
  w.AddF32Tensor("a", {3}, {1, 2, 3});
  w.AddF32Tensor("b", {2, 2}, {4, 5, 6, 7});
  GgufBytes built = w.Build();
  ScratchDir dir;
  auto gguf = GgufFile::Open(dir.Write("aligned.gguf", built.bytes));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  EXPECT_EQ(built.data_offset % 64, 0u);
  EXPECT_EQ((*gguf)->Find("a")->file_offset, built.data_offset);
  EXPECT_EQ((*gguf)->Find("b")->file_offset, built.data_offset + 64);
  EXPECT_EQ(DequantizeToF32(*(*gguf)->Find("b")).value(), (std::vector<float>{4, 5, 6, 7}));
}

TEST(GgufTest, ReportsShapesOutermostFirstForEveryQuantType) {
  using namespace ::onecard::testing;  // NOLINT: the type constants
  GgufTestWriter w;
  w.AddTensor("q8", kGgmlQ8_0, {3, 64}, std::string(3 * 2 * 34, '\0'));
  w.AddTensor("q40", kGgmlQ4_0, {2, 32}, std::string(2 * 18, '\0'));
  w.AddTensor("q41", kGgmlQ4_1, {1, 32}, std::string(20, '\0'));
  w.AddTensor("q4k", kGgmlQ4_K, {2, 1, 256}, std::string(2 * 144, '\0'));
  w.AddTensor("q6k", kGgmlQ6_K, {512}, std::string(2 * 210, '\0'));
  w.AddTensor("f16", kGgmlF16, {5, 1}, std::string(10, '\0'));
  w.AddTensor("bf16", kGgmlBF16, {7}, std::string(14, '\0'));
  ScratchDir dir;
  auto gguf = GgufFile::Open(dir.Write("quant.gguf", w.Build().bytes));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const GgufFile& g = **gguf;
  EXPECT_EQ(g.Find("q8")->dtype, DType::kQ8_0);
  EXPECT_THAT(g.Find("q8")->shape, ElementsAre(3, 64));
  EXPECT_EQ(g.Find("q8")->size_bytes, 3u * 2 * 34);
  EXPECT_EQ(g.Find("q40")->dtype, DType::kQ4_0);
  EXPECT_EQ(g.Find("q41")->dtype, DType::kQ4_1);
  EXPECT_THAT(g.Find("q4k")->shape, ElementsAre(2, 1, 256));
  EXPECT_EQ(g.Find("q4k")->dtype, DType::kQ4_K);
  EXPECT_EQ(g.Find("q6k")->size_bytes, 420u);
  EXPECT_EQ(g.Find("f16")->dtype, DType::kF16);
  EXPECT_THAT(g.Find("f16")->shape, ElementsAre(5, 1));
  EXPECT_EQ(g.Find("bf16")->dtype, DType::kBF16);
}

TEST(GgufTest, MissingFileIsNotFoundNamingThePath) {
  auto gguf = GgufFile::Open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(gguf.ok());
  EXPECT_EQ(gguf.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(gguf.status().message()), HasSubstr("/nonexistent/dir/model.gguf"));
}

}  // namespace
}  // namespace onecard::engine
