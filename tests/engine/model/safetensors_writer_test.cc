// SafetensorsWriter: files it writes read back through SafetensorsSource
// (names, dtypes, shapes, bytes, metadata, the 8-byte aligned data start),
// and its errors: bad specs, tensors out of order or of the wrong size, an
// unfinished file (no PATH left), an uncreatable path.
#include "engine/model/safetensors_writer.h"

#include <cstring>
#include <filesystem>
#include <random>

#include "engine/model/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/model_test_util.h"

namespace onecard::engine {
namespace {

using ::onecard::testing::ReadTestFile;
using ::onecard::testing::ScratchDir;
using ::testing::HasSubstr;

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

TEST(SafetensorsWriterTest, WritesWhatTheReaderReadsBack) {
  ScratchDir dir;
  const std::string path = dir.path() + "/model.safetensors";
  // Awkward sizes (3 bytes of U8, an empty tensor) so the offsets are tested.
  const std::vector<SafetensorsTensorSpec> specs = {{"b.weight", DType::kBF16, {3, 5}},
                                                    {"a.qweight", DType::kI32, {2, 7}},
                                                    {"u8", DType::kU8, {3}},
                                                    {"f8", DType::kF8E4M3, {5, 3}},
                                                    {"empty", DType::kF32, {0, 4}},
                                                    {"h", DType::kF16, {1}},
                                                    {"i64", DType::kI64, {2}},
                                                    {"f", DType::kF32, {2, 2, 2}}};
  auto writer = SafetensorsWriter::Create(path, specs, {{"format", "pt"}});
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::vector<std::vector<uint8_t>> data;
  for (size_t i = 0; i < specs.size(); ++i) {
    data.push_back(RandomBytes(specs[i].SizeBytes(), 17 + i));
    ASSERT_TRUE((*writer)->Write(specs[i].name, data.back()).ok());
  }
  ASSERT_TRUE((*writer)->Finish().ok());
  EXPECT_EQ((*writer)->file_bytes(), std::filesystem::file_size(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  const std::string bytes = ReadTestFile(path);
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), 8);
  EXPECT_EQ(header_bytes % 8, 0u);

  auto source = SafetensorsSource::OpenFile(path);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->metadata().at("format"), "pt");
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorView* view = (*source)->Find(specs[i].name);
    ASSERT_NE(view, nullptr) << specs[i].name;
    EXPECT_EQ(view->dtype, specs[i].dtype);
    EXPECT_EQ(view->shape, specs[i].shape);
    ASSERT_EQ(view->size_bytes, data[i].size());
    if (data[i].empty()) continue;  // an empty tensor: nothing to compare (no memcmp on null)
    EXPECT_EQ(std::memcmp(view->data, data[i].data(), data[i].size()), 0) << specs[i].name;
  }
}

TEST(SafetensorsWriterTest, RejectsBadSpecsAndWritesOutOfOrder) {
  ScratchDir dir;
  const std::string path = dir.path() + "/m.safetensors";
  EXPECT_THAT(SafetensorsWriter::Create(path, {{"x", DType::kQ4_0, {32}}}).status().message(),
              HasSubstr("dtype Q4_0"));
  EXPECT_THAT(SafetensorsWriter::Create(path, {{"x", DType::kF32, {1}}, {"x", DType::kF32, {1}}})
                  .status()
                  .message(),
              HasSubstr("\"x\""));
  EXPECT_THAT(SafetensorsWriter::Create(path, {{"x", DType::kF32, {-1}}}).status().message(),
              HasSubstr("negative"));

  {
    auto writer =
        SafetensorsWriter::Create(path, {{"a", DType::kF32, {2}}, {"b", DType::kF32, {1}}});
    ASSERT_TRUE(writer.ok());
    const std::vector<uint8_t> four(4), eight(8);
    EXPECT_THAT((*writer)->Write("b", four).message(), HasSubstr("out of order (expected a)"));
    EXPECT_THAT((*writer)->Write("a", four).message(), HasSubstr("4 bytes, expected 8"));
    ASSERT_TRUE((*writer)->Write("a", eight).ok());
    EXPECT_THAT((*writer)->Finish().message(), HasSubstr("1 of 2 tensors"));
  }
  // Unfinished: neither the file nor its temporary is left.
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(SafetensorsWriterTest, UncreatablePathIsNamed) {
  const absl::Status s =
      SafetensorsWriter::Create("/nonexistent/dir/m.safetensors", {{"a", DType::kF32, {1}}})
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/dir/m.safetensors.tmp"));
}

}  // namespace
}  // namespace onecard::engine
