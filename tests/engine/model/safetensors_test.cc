// SafetensorsSource on files written by the safetensors package (single and
// two shards, tests/golden/model/tiny_safetensors, values in expected.json)
// and on crafted bad files: header length, JSON, dtype, shape, offsets, sizes,
// overlaps, and broken shard indexes. Every error names the file and tensor.
#include "engine/model/safetensors.h"

#include <random>

#include "engine/model/dequantize.h"
#include "engine/model/model_weights.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/model_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using namespace ::onecard::testing;  // NOLINT: writers and scratch folders
using ::testing::AllOf;
using ::testing::EndsWith;
using ::testing::HasSubstr;

constexpr char kGolden[] = "tests/golden/model/tiny_safetensors";

DType TorchDType(const std::string& name) {
  if (name == "float32") return DType::kF32;
  if (name == "float16") return DType::kF16;
  if (name == "bfloat16") return DType::kBF16;
  if (name == "int32") return DType::kI32;
  if (name == "int64") return DType::kI64;
  return DType::kU8;
}

std::vector<double> IntegerValues(const TensorView& view) {
  std::vector<double> out;
  for (int64_t i = 0; i < view.NumElements(); ++i) {
    if (view.dtype == DType::kI32) {
      int32_t v;
      std::memcpy(&v, view.data + 4 * i, 4);
      out.push_back(v);
    } else if (view.dtype == DType::kI64) {
      int64_t v;
      std::memcpy(&v, view.data + 8 * i, 8);
      out.push_back(static_cast<double>(v));
    } else {
      out.push_back(view.data[i]);
    }
  }
  return out;
}

void ExpectGoldenTensors(const SafetensorsSource& source, bool sharded) {
  nlohmann::json want = LoadTestJson(SourcePath(std::string(kGolden) + "/expected.json"));
  std::vector<std::string> names;
  for (const auto& [name, t] : want.items()) names.push_back(name);
  EXPECT_EQ(source.TensorNames(), names);  // sorted, as JSON objects are
  for (const auto& [name, t] : want.items()) {
    SCOPED_TRACE(name);
    const TensorView* view = source.Find(name);
    ASSERT_NE(view, nullptr);
    EXPECT_EQ(view->dtype, TorchDType(t["dtype"]));
    EXPECT_EQ(view->shape, t["shape"].get<std::vector<int64_t>>());
    if (sharded) EXPECT_THAT(view->file_path, EndsWith("/" + t["shard"].get<std::string>()));
    if (IsDequantizable(view->dtype)) {
      auto values = DequantizeToF32(*view);
      ASSERT_TRUE(values.ok()) << values.status();
      std::vector<float> expected = t["values"].get<std::vector<float>>();
      EXPECT_EQ(*values, expected);
    } else {
      EXPECT_EQ(IntegerValues(*view), t["values"].get<std::vector<double>>());
    }
  }
  EXPECT_EQ(source.Find("absent"), nullptr);
  EXPECT_EQ(source.metadata().at("format"), "pt");
}

TEST(SafetensorsTest, SingleFileFromTheSafetensorsPackage) {
  std::string path = SourcePath(std::string(kGolden) + "/single/model.safetensors");
  auto source = SafetensorsSource::OpenFile(path);
  ASSERT_TRUE(source.ok()) << source.status();
  ExpectGoldenTensors(**source, false);
  // Views into one mapping: pointer distance equals file-offset distance.
  const TensorView* a = (*source)->Find("a.f32");
  const TensorView* b = (*source)->Find("b.f16");
  EXPECT_EQ(b->data - a->data, static_cast<int64_t>(b->file_offset - a->file_offset));
  EXPECT_THAT((*source)->FilePaths(), ::testing::ElementsAre(path));
}

TEST(SafetensorsTest, ShardedFromTheIndex) {
  auto source = SafetensorsSource::OpenIndex(
      SourcePath(std::string(kGolden) + "/sharded/model.safetensors.index.json"));
  ASSERT_TRUE(source.ok()) << source.status();
  ExpectGoldenTensors(**source, true);
  EXPECT_EQ((*source)->FilePaths().size(), 2u);
}

TEST(SafetensorsTest, DirectoryPrefersTheIndex) {
  auto sharded = SafetensorsSource::OpenDirectory(SourcePath(std::string(kGolden) + "/sharded"));
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_EQ((*sharded)->FilePaths().size(), 2u);
  auto single = SafetensorsSource::OpenDirectory(SourcePath(std::string(kGolden) + "/single"));
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ((*single)->FilePaths().size(), 1u);
  ScratchDir empty;
  auto none = SafetensorsSource::OpenDirectory(empty.path());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("model.safetensors.index.json"));
}

class SafetensorsBadInputTest : public ::testing::Test {
 protected:
  void ExpectError(const std::string& bytes, const std::string& what,
                   absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
    std::string path = dir_.Write("bad.safetensors", bytes);
    auto source = SafetensorsSource::OpenFile(path);
    ASSERT_FALSE(source.ok()) << "accepted; wanted: " << what;
    EXPECT_EQ(source.status().code(), code) << source.status();
    EXPECT_THAT(std::string(source.status().message()), AllOf(HasSubstr(path), HasSubstr(what)));
  }
  static std::string Header(const std::string& entry) { return "{\"w\": " + entry + "}"; }

  ScratchDir dir_;
};

TEST_F(SafetensorsBadInputTest, HeaderLength) {
  ExpectError("abc", "file truncated: 3 bytes, no header");
  std::string bytes = SafetensorsBytes("{}", "");
  PutU64(&bytes, 0, 1000);
  ExpectError(bytes, "byte offset 0: header length 1000 runs past the end of the file (10 bytes)");
  PutU64(&bytes, 0, ~uint64_t{0});
  ExpectError(bytes, "header length 18446744073709551615 runs past the end");
}

TEST_F(SafetensorsBadInputTest, BadJson) {
  ExpectError(SafetensorsBytes("{\"w\": [1, 2", ""), "header (11 bytes) is not a JSON object");
  ExpectError(SafetensorsBytes("[1]", ""), "is not a JSON object");
  ExpectError(SafetensorsBytes(Header("3"), ""), "tensor 'w': entry is not an object");
  ExpectError(SafetensorsBytes("{\"__metadata__\": {\"k\": 1}}", ""),
              "\"__metadata__\" entry 'k' is not a string");
}

TEST_F(SafetensorsBadInputTest, DTypeAndShape) {
  std::string data(16, '\0');
  ExpectError(SafetensorsBytes(Header(R"({"shape": [4], "data_offsets": [0, 16]})"), data),
              "tensor 'w': missing string \"dtype\"");
  ExpectError(
      SafetensorsBytes(Header(R"({"dtype": "F64", "shape": [2], "data_offsets": [0, 16]})"), data),
      "tensor 'w': dtype \"F64\" is not supported (supported: F32, F16, BF16, I32, I64, U8, "
      "F8_E4M3)",
      absl::StatusCode::kUnimplemented);
  ExpectError(SafetensorsBytes(Header(R"({"dtype": "F32", "data_offsets": [0, 16]})"), data),
              "tensor 'w': missing array \"shape\"");
  ExpectError(
      SafetensorsBytes(Header(R"({"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]})"), data),
      "tensor 'w': bad dimension -4");
  ExpectError(SafetensorsBytes(Header(R"({"dtype": "F32", "shape": [1099511627776, 1099511627776],
                                          "data_offsets": [0, 16]})"),
                               data),
              "tensor 'w': too many elements");
}

TEST_F(SafetensorsBadInputTest, Offsets) {
  std::string data(16, '\0');
  ExpectError(
      SafetensorsBytes(Header(R"({"dtype": "F32", "shape": [4], "data_offsets": [0, 20]})"), data),
      "tensor 'w' data [");
  ExpectError(
      SafetensorsBytes(Header(R"({"dtype": "F32", "shape": [4], "data_offsets": [0, 20]})"), data),
      "runs past the end of the file");
  ExpectError(
      SafetensorsBytes(Header(R"({"dtype": "F32", "shape": [0], "data_offsets": [8, 4]})"), data),
      "tensor 'w': \"data_offsets\" must be [begin, end] with begin <= end");
  ExpectError(
      SafetensorsBytes(Header(R"({"dtype": "F32", "shape": [4], "data_offsets": 0})"), data),
      "\"data_offsets\" must be");
}

TEST_F(SafetensorsBadInputTest, WrongSizeForTheDType) {
  std::string header = Header(R"({"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]})");
  ExpectError(SafetensorsBytes(header, std::string(16, '\0')),
              "tensor 'w' holds 12 bytes; F32 of 4 elements needs 16");
  header = Header(R"({"dtype": "BF16", "shape": [3], "data_offsets": [0, 12]})");
  ExpectError(SafetensorsBytes(header, std::string(16, '\0')),
              "holds 12 bytes; BF16 of 3 elements needs 6");
  header = Header(R"({"dtype": "F8_E4M3", "shape": [2, 3], "data_offsets": [0, 12]})");
  ExpectError(SafetensorsBytes(header, std::string(16, '\0')),
              "holds 12 bytes; F8_E4M3 of 6 elements needs 6");
}

// F8_E4M3 (as the safetensors library names torch.float8_e4m3fn): one byte a
// value, the codes as stored.
TEST_F(SafetensorsBadInputTest, ReadsF8E4M3Codes) {
  const std::string header =
      Header(R"({"dtype": "F8_E4M3", "shape": [2, 3], "data_offsets": [0, 6]})");
  const std::string codes = {'\x00', '\x38', '\x7e', '\xfe', '\x01', '\x7f'};
  auto source =
      SafetensorsSource::OpenFile(dir_.Write("f8.safetensors", SafetensorsBytes(header, codes)));
  ASSERT_TRUE(source.ok()) << source.status();
  const TensorView* w = (*source)->Find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kF8E4M3);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(w->size_bytes, 6u);
  EXPECT_EQ(std::memcmp(w->data, codes.data(), 6), 0);
}

TEST_F(SafetensorsBadInputTest, OverlappingTensors) {
  std::string header = R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                           "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})";
  ExpectError(SafetensorsBytes(header, std::string(16, '\0')), "tensor 'b' overlaps tensor 'a'");
}

TEST_F(SafetensorsBadInputTest, BrokenIndexes) {
  std::string shard = SafetensorsF32({{"x", {2}, {1, 2}}, {"y", {1}, {3}}});
  dir_.Write("model-1.safetensors", shard);
  auto open = [&](const std::string& index_json) {
    return SafetensorsSource::OpenIndex(dir_.Write("model.safetensors.index.json", index_json))
        .status();
  };
  EXPECT_TRUE(open(R"({"weight_map": {"x": "model-1.safetensors"}})").ok());
  EXPECT_THAT(std::string(open(R"({"metadata": {}})").message()),
              HasSubstr("model.safetensors.index.json: missing object field \"weight_map\""));
  EXPECT_THAT(std::string(open("{not json").message()), HasSubstr("not a JSON object"));
  EXPECT_THAT(std::string(open(R"({"weight_map": {"x": "../model-1.safetensors"}})").message()),
              HasSubstr("'x' names bad shard \"../model-1.safetensors\""));
  absl::Status absent = open(R"({"weight_map": {"z": "model-1.safetensors"}})");
  EXPECT_EQ(absent.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(absent.message()), HasSubstr("tensor 'z' is not in its shard"));
  absl::Status missing_shard = open(R"({"weight_map": {"x": "model-2.safetensors"}})");
  EXPECT_EQ(missing_shard.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing_shard.message()), HasSubstr("model-2.safetensors"));
  dir_.Write("model-2.safetensors", shard);
  EXPECT_THAT(std::string(open(R"({"weight_map": {"x": "model-1.safetensors",
                                                  "y": "model-2.safetensors"}})")
                              .message()),
              HasSubstr("tensor 'x' is also in"));
}

TEST_F(SafetensorsBadInputTest, TruncationAndRandomCorruptionNeverCrash) {
  const std::string valid =
      ReadTestFile(SourcePath(std::string(kGolden) + "/single/model.safetensors"));
  ASSERT_FALSE(valid.empty());
  for (size_t n = 0; n < valid.size(); ++n) {
    std::string path = dir_.Write("cut.safetensors", valid.substr(0, n));
    auto source = SafetensorsSource::OpenFile(path);
    ASSERT_FALSE(source.ok()) << n;
    ASSERT_THAT(std::string(source.status().message()), HasSubstr(path)) << n;
  }
  std::mt19937 rng(77);
  int rejected = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string bytes = valid;
    for (int f = 0; f <= trial % 3; ++f) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    std::string path = dir_.Write("fuzz.safetensors", bytes);
    auto source = SafetensorsSource::OpenFile(path);
    if (source.ok()) continue;
    ++rejected;
    ASSERT_THAT(std::string(source.status().message()), HasSubstr(path)) << trial;
  }
  EXPECT_GT(rejected, 40);
}

}  // namespace
}  // namespace onecard::engine
