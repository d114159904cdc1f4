// cpu_linear_speed: how fast CpuLinearForward (engine/runtime/cpu/cpu_linear.h)
// reads weights of each block type at one activation row (decode), per
// kernel set and thread count, on the shapes of the two real test models
// (SmolLM2-135M Q4_1 / Q8_0, Qwen2.5-Coder-1.5B Q4_K / Q6_K). Prints the
// median over repetitions of wall time and the weight bytes read per second.
// Usage: cpu_linear_speed [--reps N] [--threads T]  (random weights; the
// numbers go in notes, not in bench/results).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/common/fp16.h"
#include "engine/model/quant_blocks.h"
#include "engine/runtime/cpu/cpu_linear.h"

namespace {

using onecard::ThreadPool;
using namespace onecard::engine;

std::vector<uint8_t> RandomBlocks(DType dtype, int64_t rows, int64_t cols) {
  std::mt19937 rng(7);
  const int64_t n = rows * cols / BlockElements(dtype), bytes = BlockBytes(dtype);
  std::vector<uint8_t> out(n * bytes);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  const uint16_t h = FloatToHalf(0.01f);
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* blk = out.data() + i * bytes;
    const int at = dtype == DType::kQ6_K ? 208 : 0;
    std::memcpy(blk + at, &h, 2);
    if (dtype == DType::kQ4_1 || dtype == DType::kQ4_K || dtype == DType::kQ5_K) {
      std::memcpy(blk + 2, &h, 2);
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 50, threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
  }
  struct Case {
    const char* name;
    DType dtype;
    int64_t out, in;
  };
  const Case cases[] = {
      {"smollm2 gate_up q4_1", DType::kQ4_1, 3072, 576},
      {"smollm2 lm_head q8_0", DType::kQ8_0, 49152, 576},
      {"qwen gate_up q4_k", DType::kQ4_K, 17920, 1536},
      {"qwen down q6_k", DType::kQ6_K, 1536, 8960},
      {"qwen down q4_k", DType::kQ4_K, 1536, 8960},
      {"qwen lm_head q6_k", DType::kQ6_K, 151936, 1536},
  };
  ThreadPool pool(threads);
  std::printf("threads %d, best isa %s\n", pool.num_threads(), CpuIsaName(DetectCpuIsa()));
  for (const Case& c : cases) {
    auto w =
        CpuLinear::FromBlocks(c.dtype, RandomBlocks(c.dtype, c.out, c.in), c.out, c.in, c.name);
    if (!w.ok()) return 1;
    std::vector<float> x(c.in), y(c.out);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (float& v : x) v = dist(rng);
    for (CpuIsa isa : {CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512Vnni}) {
      if (!CpuSupports(isa)) continue;
      CpuLinearScratch scratch;
      std::vector<double> us;
      const int n = isa == CpuIsa::kGeneric ? std::max(3, reps / 10) : reps;
      for (int r = 0; r < n; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        CpuLinearForward(pool, *w, {x.data(), nullptr, y.data(), 1}, &scratch, isa);
        us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count());
      }
      std::sort(us.begin(), us.end());
      const double med = us[us.size() / 2];
      std::printf("%-24s %-10s %9.1f us  %6.2f GB/s\n", c.name, CpuIsaName(isa), med,
                  static_cast<double>(w->bytes()) / med / 1e3);
    }
  }
  return 0;
}
