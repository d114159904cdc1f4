// Tests of onecard::ThreadPool (engine/common/thread_pool.cc): the fixed
// partition rule, every index visited exactly once, the ranges handed out are
// exactly PartRange's, nested and concurrent calls, and many calls in a row.
#include "engine/common/thread_pool.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace onecard {
namespace {

TEST(ThreadPoolTest, PartRangeCoversEvenly) {
  for (int64_t n : {0, 1, 2, 5, 7, 64, 1001}) {
    for (int parts : {1, 2, 3, 4, 7}) {
      int64_t next = 0, min_size = n, max_size = 0;
      for (int p = 0; p < parts; ++p) {
        const auto [begin, end] = ThreadPool::PartRange(n, p, parts);
        EXPECT_EQ(begin, next) << n << " " << parts << " " << p;
        min_size = std::min(min_size, end - begin);
        max_size = std::max(max_size, end - begin);
        next = end;
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(max_size - min_size, 1);
    }
  }
}

TEST(ThreadPoolTest, VisitsEveryIndexOnceWithPartRangeRanges) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    ASSERT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 3, 7, 100, 1001}) {
      std::vector<std::atomic<int>> visits(n);
      std::mutex mu;
      std::vector<std::pair<int64_t, int64_t>> ranges;
      pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) visits[i].fetch_add(1);
        std::lock_guard<std::mutex> lock(mu);
        ranges.emplace_back(begin, end);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(visits[i].load(), 1) << n << " " << i;
      // n == 1 runs inline as one range; otherwise the non-empty PartRanges.
      std::vector<std::pair<int64_t, int64_t>> want;
      for (int p = 0; p < threads && n > 1; ++p) {
        const auto range = ThreadPool::PartRange(n, p, threads);
        if (range.first < range.second) want.push_back(range);
      }
      if (n == 1) want = {{0, 1}};
      std::sort(ranges.begin(), ranges.end());
      EXPECT_EQ(ranges, want) << "threads " << threads << " n " << n;
    }
  }
}

TEST(ThreadPoolTest, ParallelForStatusReturnsTheLowestFailingRange) {
  ThreadPool pool(4);
  std::atomic<int64_t> visited{0};
  EXPECT_TRUE(pool.ParallelForStatus(100,
                                     [&](int64_t begin, int64_t end) {
                                       visited += end - begin;
                                       return absl::OkStatus();
                                     })
                  .ok());
  EXPECT_EQ(visited.load(), 100);
  for (int rep = 0; rep < 20; ++rep) {  // whichever range fails first in time
    const absl::Status status = pool.ParallelForStatus(100, [](int64_t begin, int64_t /*end*/) {
      if (begin == 0) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat("range from ", begin));
    });
    EXPECT_EQ(status, absl::InvalidArgumentError(
                          absl::StrCat("range from ", ThreadPool::PartRange(100, 1, 4).first)));
  }
}

TEST(ThreadPoolTest, NestedCallRunsInline) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  pool.ParallelFor(6, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      pool.ParallelFor(10, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
    }
  });
  EXPECT_EQ(total.load(), 60);
}

TEST(ThreadPoolTest, ConcurrentCallersTakeTurns) {
  ThreadPool pool(2);
  std::vector<int64_t> sums(4, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 200; ++round) {
        std::vector<int64_t> part(2, 0);
        pool.ParallelFor(100, [&](int64_t begin, int64_t end) {
          int64_t s = 0;
          for (int64_t i = begin; i < end; ++i) s += i;
          part[begin == 0 ? 0 : 1] = s;
        });
        sums[c] += part[0] + part[1];
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (int c = 0; c < 4; ++c) EXPECT_EQ(sums[c], 200 * 4950) << c;
}

TEST(ThreadPoolTest, ManyCallsInARow) {
  ThreadPool pool(4);
  std::vector<int> data(64, 0);
  for (int round = 0; round < 5000; ++round) {
    pool.ParallelFor(64, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) ++data[i];
    });
  }
  for (int x : data) EXPECT_EQ(x, 5000);
}

TEST(ThreadPoolTest, ZeroMeansHardwareConcurrency) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.num_threads(), std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
}

// The process's virtual memory size in bytes (VmSize of /proc/self/status).
int64_t VirtualMemoryBytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  int64_t kb = 0;
  while (in >> key) {
    if (key == "VmSize:" && in >> kb) return kb * 1024;
  }
  return 0;
}

// Runs a 64-thread pool with too little address space for 64 thread stacks
// (8 MiB each) and exits 0 when the pool is smaller but computes right.
void RunPoolWithLittleAddressSpace() {
  const rlim_t cap = static_cast<rlim_t>(VirtualMemoryBytes() + (64ll << 20));
  const rlimit limit = {cap, cap};
  if (setrlimit(RLIMIT_AS, &limit) != 0) std::_Exit(3);
  ThreadPool pool(64);
  int64_t sum = 0;
  std::mutex mu;
  pool.ParallelFor(1000, [&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mu);
    for (int64_t i = begin; i < end; ++i) sum += i;
  });
  std::_Exit(pool.num_threads() < 64 && sum == 999 * 1000 / 2 ? 0 : 1);
}

// A thread the system refuses leaves a smaller pool that still works, never
// a std::system_error that ends the process (issue 22: num_threads: 100000
// aborted the worker).
TEST(ThreadPoolDeathTest, RefusedThreadsLeaveASmallerWorkingPool) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(RunPoolWithLittleAddressSpace(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace onecard
