// Tests of engine/common/host_info.h: the host's memory and cores are
// positive, the memory available now is part of it, and the thread cap is 4
// a core, at most 1024.
#include "engine/common/host_info.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace onecard {
namespace {

TEST(HostInfoTest, MemoryAndCoresArePositive) {
  EXPECT_GT(HostMemoryBytes(), 64ll << 20);
  EXPECT_GE(HostCores(), 1);
}

// What is available now is some of the host's memory: more than nothing on
// any machine that runs these tests, never more than all of it.
TEST(HostInfoTest, AvailableMemoryIsPartOfTheHosts) {
  const int64_t available = HostAvailableMemoryBytes();
  EXPECT_GT(available, 16ll << 20);
  EXPECT_LE(available, HostMemoryBytes());
}

TEST(HostInfoTest, ThreadCapIsFourACoreAtMost1024) {
  EXPECT_EQ(MaxConfiguredThreads(), std::min(1024, 4 * HostCores()));
}

}  // namespace
}  // namespace onecard
