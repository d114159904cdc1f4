// How long does GPTQ's solver (engine/model/gptq_solver.h QuantizeGptq) take
// for one projection of k inputs and n outputs, and how much of it is the
// inverse factor of H (measured as the time at n = 8, where the column
// updates cost next to nothing)? H = 2 X^T X / N of seeded correlated inputs
// (4 factors plus noise, N = 2k rows, added 512 at a time), W seeded normal;
// prints the Hessian's seconds, then one JSON line per n with the seconds
// and a checksum of the codes (equal checksums: the same result).
//   gptq_solver_time K N [N ...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <vector>

#include "engine/model/gptq_solver.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s K N [N ...]\n", argv[0]);
    return 2;
  }
  const int64_t k = std::atoll(argv[1]);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 2 * k, factors = 4;
  std::vector<float> mix(factors * k);
  for (float& v : mix) v = normal(rng);
  onecard::engine::GptqHessian hessian(k);
  constexpr int64_t kChunk = 512;  // rows added at once, as a calibration chunk is
  std::vector<float> x(kChunk * k);
  const auto hessian_start = std::chrono::steady_clock::now();
  for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
    const int64_t m = std::min(kChunk, rows - r0);
    for (int64_t r = 0; r < m; ++r) {
      float f[factors];
      for (float& v : f) v = normal(rng);
      for (int64_t c = 0; c < k; ++c) {
        float& v = x[r * k + c];
        v = 0.1f * normal(rng);
        for (int64_t j = 0; j < factors; ++j) v += f[j] * mix[j * k + c];
      }
    }
    hessian.Add(std::span<const float>(x.data(), m * k), m);
  }
  const std::vector<double> h = hessian.Matrix();
  std::printf(
      "{\"k\": %lld, \"hessian_rows\": %lld, \"hessian_seconds\": %.3f}\n",
      static_cast<long long>(k), static_cast<long long>(rows),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - hessian_start).count());
  for (int a = 2; a < argc; ++a) {
    const int64_t n = std::atoll(argv[a]);
    std::vector<float> w(n * k);
    for (float& v : w) v = 0.02f * normal(rng);
    const auto start = std::chrono::steady_clock::now();
    auto q = onecard::engine::QuantizeGptq(w, n, k, h, {.group = 128});
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!q.ok()) {
      std::fprintf(stderr, "%s\n", q.status().ToString().c_str());
      return 1;
    }
    uint64_t sum = 0;
    for (size_t i = 0; i < q->codes.size(); ++i) sum = sum * 31 + q->codes[i];
    std::printf("{\"k\": %lld, \"n\": %lld, \"seconds\": %.3f, \"codes_checksum\": %llu}\n",
                static_cast<long long>(k), static_cast<long long>(n), seconds,
                static_cast<unsigned long long>(sum));
  }
  return 0;
}
