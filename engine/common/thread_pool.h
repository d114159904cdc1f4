// ThreadPool: a small fixed pool of threads for data-parallel loops.
// ParallelFor(n, fn) cuts [0, n) into num_threads() contiguous ranges by a
// fixed rule (it depends only on n and num_threads(), never on timing), runs
// fn(begin, end) for each, the first on the calling thread, and returns when
// all are done. Work split this way is deterministic: which thread computes an
// element never changes what is computed. Calls from several threads take
// turns; a call from inside fn runs inline on that thread, all of [0, n) at once.
// ParallelForStatus does the same with an fn that may fail and returns the
// error of the lowest failing range (whatever the timing), OK when none failed.
// Between calls, workers and the waiting caller spin for up to kSpin before
// they sleep on a condition variable: a decode step makes hundreds of short
// calls back to back, and a sleeping thread takes tens of microseconds to
// wake.
// Tested by tests/engine/common/thread_pool_test.cc.
#ifndef ONECARD_ENGINE_COMMON_THREAD_POOL_H_
#define ONECARD_ENGINE_COMMON_THREAD_POOL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace onecard {

class ThreadPool {
 public:
  using RangeFn = std::function<void(int64_t begin, int64_t end)>;
  using StatusRangeFn = std::function<absl::Status(int64_t begin, int64_t end)>;

  // num_threads counts the calling thread: 1 runs everything inline.
  // Values below 1 mean std::thread::hardware_concurrency(). When the system
  // refuses a thread, the pool runs with the threads it could start (logged),
  // so num_threads() may be smaller than asked.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  void ParallelFor(int64_t n, const RangeFn& fn);
  absl::Status ParallelForStatus(int64_t n, const StatusRangeFn& fn);

  // The range [begin, end) of part `part` of `num_parts` over [0, n): the
  // first n % num_parts parts get one element more.
  static std::pair<int64_t, int64_t> PartRange(int64_t n, int part, int num_parts);

  static constexpr std::chrono::microseconds kSpin{200};

 private:
  void WorkerLoop(int worker);

  std::mutex call_mu_;  // one ParallelFor at a time
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  // Written under mu_ before generation_ is bumped; read by workers after
  // they see the new generation.
  const RangeFn* fn_ = nullptr;
  int64_t n_ = 0;
  std::atomic<uint64_t> generation_{0};  // bumped under mu_ per ParallelFor
  std::atomic<int> pending_{0};          // workers still running this call
  bool stop_ = false;                    // guarded by mu_
  std::vector<std::thread> workers_;
};

}  // namespace onecard

#endif  // ONECARD_ENGINE_COMMON_THREAD_POOL_H_
