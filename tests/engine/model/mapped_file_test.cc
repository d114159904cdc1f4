// MappedFile: maps the bytes of a file read-only; errors name the file.
// DropMappedPages gives read pages back (the process's resident pages, from
// /proc/self/statm, fall) and the bytes stay readable.
#include "engine/model/mapped_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

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

// Resident pages of this process (/proc/self/statm's second field).
int64_t ResidentPages() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident;
}

TEST(MappedFileTest, DropMappedPagesLowersResidentPagesAndKeepsTheBytes) {
  ScratchDir dir;
  constexpr size_t kBytes = 64 << 20;
  std::string bytes(kBytes, '\0');
  for (size_t i = 0; i < kBytes; i += 4096) bytes[i] = static_cast<char>(i / 4096 % 251 + 1);
  auto file = MappedFile::Open(dir.Write("big.bin", bytes));
  bytes.clear();
  bytes.shrink_to_fit();
  ASSERT_TRUE(file.ok()) << file.status();
  const uint8_t* data = (*file)->data();
  const int64_t before = ResidentPages();
  int64_t sum = 0;
  for (size_t i = 0; i < kBytes; i += 4096) sum += data[i];  // fault every page in
  const int64_t touched = ResidentPages();
  const int64_t pages = kBytes / static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_GE(touched - before, pages * 9 / 10);
  DropMappedPages(data + 1, kBytes - 2);  // widened to the whole pages
  EXPECT_LE(ResidentPages() - before, pages / 10);
  int64_t again = 0;
  for (size_t i = 0; i < kBytes; i += 4096) {
    again += data[i];
    ASSERT_EQ(data[i], i / 4096 % 251 + 1) << i;
  }
  EXPECT_EQ(again, sum);
  DropMappedPages(nullptr, 10);  // nothing to drop
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
