// Tests of engine/common/host_info.h: the host's memory and cores are
// positive and the thread cap is 4 a core, at most 1024.
#include "engine/common/host_info.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace onecard {
namespace {

TEST(HostInfoTest, MemoryAndCoresArePositive) {
  EXPECT_GT(HostMemoryBytes(), 64ll << 20);
  EXPECT_GE(HostCores(), 1);
}

TEST(HostInfoTest, ThreadCapIsFourACoreAtMost1024) {
  EXPECT_EQ(MaxConfiguredThreads(), std::min(1024, 4 * HostCores()));
}

}  // namespace
}  // namespace onecard
