// Host references run over shares of their rows at once, one share a core,
// for the GPU tests' large shapes (one 70B projection's reference at 128 rows
// is half a minute on one core). Tested by tests/engine/kernels/
// int4_gemm_ref_test.cc and fp8_gemm_ref_test.cc (shares against the whole).
#ifndef ONECARD_TESTS_TESTING_ROWS_ON_CORES_H_
#define ONECARD_TESTS_TESTING_ROWS_ON_CORES_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace onecard::testing {

// fn(begin, end) for consecutive shares [begin, end) of [0, rows), as many
// as `threads` (0: the host's hardware threads), each on its own thread;
// returns once every share has.
inline void ForRowsOnCores(int64_t rows, const std::function<void(int64_t, int64_t)>& fn,
                           int64_t threads = 0) {
  if (threads <= 0) threads = std::thread::hardware_concurrency();
  threads = std::clamp<int64_t>(threads, 1, std::max<int64_t>(rows, 1));
  const int64_t share = (rows + threads - 1) / threads;
  std::vector<std::thread> workers;
  for (int64_t begin = 0; begin < rows; begin += share) {
    workers.emplace_back(fn, begin, std::min(rows, begin + share));
  }
  for (std::thread& w : workers) w.join();
}

// ref(part) over shares of p's rows (ForRowsOnCores), for references whose
// rows are independent: a row's outputs read only its own row of x. `part`
// is p with the share's `rows` and with x (BF16, x_row_stride elements a
// row) and y (y_row_bytes a row) starting at the share's first row (null
// ones left null). The first share's error, else OK; p as it is where it
// has no rows.
template <typename Params, typename Ref>
absl::Status RowsOnCores(const Params& p, int64_t y_row_bytes, Ref ref, int64_t threads = 0) {
  if (p.rows < 1) return ref(p);
  std::vector<absl::Status> status(p.rows);
  ForRowsOnCores(
      p.rows,
      [&](int64_t begin, int64_t end) {
        Params part = p;
        part.rows = static_cast<decltype(p.rows)>(end - begin);
        if (p.x != nullptr) part.x = static_cast<const uint16_t*>(p.x) + begin * p.x_row_stride;
        if (p.y != nullptr) part.y = static_cast<uint8_t*>(p.y) + begin * y_row_bytes;
        status[begin] = ref(part);
      },
      threads);
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_TESTING_ROWS_ON_CORES_H_
