// Tests of engine/common/regular_file.h: a regular file is read whole; a
// FIFO (with no writer: opening it for reading would block), a device, a
// directory and a missing path are refused at once, naming the path and
// what it is.
#include "engine/common/regular_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/regular_file_test_" + std::to_string(getpid()) + "_" + name;
}

TEST(RegularFileTest, ReadsARegularFile) {
  const std::string path = TempPath("plain");
  std::ofstream(path) << "hello\nworld";
  absl::StatusOr<std::string> text = ReadRegularFile(path);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "hello\nworld");
  std::remove(path.c_str());
}

// Issue 22: `onecard inspect` on a FIFO hung in open().
TEST(RegularFileTest, FifoIsRefusedWithoutBlocking) {
  const std::string path = TempPath("fifo");
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  absl::StatusOr<std::string> text = ReadRegularFile(path);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(text.status().message(), path + ": a FIFO, not a regular file");
  std::remove(path.c_str());
}

TEST(RegularFileTest, DevicesDirectoriesAndMissingPaths) {
  EXPECT_EQ(ReadRegularFile("/dev/null").status().message(),
            "/dev/null: a character device, not a regular file");
  const absl::Status dir = ReadRegularFile(::testing::TempDir()).status();
  EXPECT_EQ(dir.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dir.message(), HasSubstr("a directory, not a regular file"));
  const absl::Status missing = ReadRegularFile("/nonexistent/x.json").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("/nonexistent/x.json"));
}

}  // namespace
}  // namespace onecard
