// MappedFile: maps the bytes of a file read-only; errors name the file.
#include "engine/model/mapped_file.h"

#include <sys/stat.h>

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/model_test_util.h"

namespace onecard::engine {
namespace {

using ::onecard::testing::ScratchDir;
using ::testing::HasSubstr;

TEST(MappedFileTest, MapsTheWholeFile) {
  ScratchDir dir;
  std::string bytes("abc\0def", 7);
  std::string path = dir.Write("f.bin", bytes);
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->path(), path);
  ASSERT_EQ((*file)->size(), 7u);
  EXPECT_EQ(std::memcmp((*file)->data(), bytes.data(), 7), 0);
}

TEST(MappedFileTest, EmptyFileHasNoData) {
  ScratchDir dir;
  auto file = MappedFile::Open(dir.Write("empty", ""));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->size(), 0u);
  EXPECT_EQ((*file)->data(), nullptr);
}

TEST(MappedFileTest, MissingFileIsNotFound) {
  auto file = MappedFile::Open("/nonexistent/x.gguf");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(file.status().message()), HasSubstr("/nonexistent/x.gguf"));
}

TEST(MappedFileTest, DirectoryIsRefused) {
  ScratchDir dir;
  auto file = MappedFile::Open(dir.path());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(file.status().message()),
              HasSubstr(dir.path() + ": a directory, not a regular file"));
}

// Issue 22: opening a FIFO for reading waited for a writer, forever.
TEST(MappedFileTest, FifoIsRefusedWithoutBlocking) {
  ScratchDir dir;
  const std::string path = dir.path() + "/model.gguf";
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  auto file = MappedFile::Open(path);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(file.status().message()), HasSubstr(path + ": a FIFO"));
}

}  // namespace
}  // namespace onecard::engine
