// ThreadPool (see thread_pool.h): workers spin, then sleep on a condition
// variable, until a new ParallelFor generation; the caller runs part 0 and
// then waits (spinning, then sleeping) for the workers' parts. Tested by
// tests/engine/common/thread_pool_test.cc.
#include "engine/common/thread_pool.h"

#include <algorithm>
#include <system_error>

#include "engine/common/log.h"

namespace onecard {
namespace {

// Set on pool threads and on a caller while its ParallelFor runs, so that a
// nested ParallelFor runs inline instead of waiting on itself.
thread_local bool in_parallel_for = false;

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads < 1) {
    num_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  workers_.reserve(num_threads - 1);
  for (int w = 0; w + 1 < num_threads; ++w) {
    // std::thread reports a thread the system refuses (no memory for its
    // stack, a process limit) by throwing; the pool keeps the threads it has.
    try {
      workers_.emplace_back([this, w] { WorkerLoop(w); });
    } catch (const std::system_error& e) {
      Log(LogLevel::kWarn, "thread_pool", "%d of %d threads started (%s); running with those",
          w + 1, num_threads, e.what());
      break;
    }
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

std::pair<int64_t, int64_t> ThreadPool::PartRange(int64_t n, int part, int num_parts) {
  const int64_t base = n / num_parts;
  const int64_t extra = n % num_parts;
  const int64_t begin = part * base + std::min<int64_t>(part, extra);
  return {begin, begin + base + (part < extra ? 1 : 0)};
}

namespace {

// Spins until done() or ThreadPool::kSpin passes; whether done() held.
template <typename Done>
bool SpinUntil(const Done& done) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1;; ++i) {
    if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (i % 64 == 0 && std::chrono::steady_clock::now() - start > ThreadPool::kSpin) return false;
  }
}

}  // namespace

void ThreadPool::ParallelFor(int64_t n, const RangeFn& fn) {
  if (n <= 0) return;
  if (workers_.empty() || in_parallel_for || n == 1) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_all();
  in_parallel_for = true;
  const auto [begin, end] = PartRange(n, 0, num_threads());
  if (begin < end) fn(begin, end);
  in_parallel_for = false;
  auto all_done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!SpinUntil(all_done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, all_done);
  }
}

absl::Status ThreadPool::ParallelForStatus(int64_t n, const StatusRangeFn& fn) {
  std::mutex mu;
  absl::Status first_error;  // the error of the lowest failing range
  int64_t first_error_begin = n;
  ParallelFor(n, [&](int64_t begin, int64_t end) {
    absl::Status status = fn(begin, end);
    if (status.ok()) return;
    std::lock_guard<std::mutex> lock(mu);
    if (begin < first_error_begin) {
      first_error = std::move(status);
      first_error_begin = begin;
    }
  });
  return first_error;
}

void ThreadPool::WorkerLoop(int worker) {
  in_parallel_for = true;
  uint64_t seen = 0;
  while (true) {
    auto new_call = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!SpinUntil(new_call)) {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || new_call(); });
      if (stop_) return;
    }
    seen = generation_.load(std::memory_order_acquire);
    const RangeFn* fn = fn_;
    const auto [begin, end] = PartRange(n_, worker + 1, num_threads());
    if (begin < end) (*fn)(begin, end);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);  // the caller may be between its check and its wait
      done_cv_.notify_one();
    }
  }
}

}  // namespace onecard
