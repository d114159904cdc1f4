// Scenario host-linear: the rate at which HostLinearForward
// (engine/runtime/cpu/host_linear.h) reads a weight kept in the CUDA layout in
// host memory, against the rate at which the same threads read plain memory.
// Cases: 4-bit (groups of 128, symmetric) 8192 x 8192 and 28672 x 8192, BF16
// 8192 x 8192, at 1 and 4 rows of x, with --threads threads (0: all cores).
// Each weight is copied until the copies fill about 1 GiB and a pass runs the
// product over every copy once, so the bytes come from memory, not a cache;
// the figure is the median pass's weight bytes (codes, scales) per second.
// "plain-read" sums a 1 GiB buffer of 64-bit words with the same pool.
// Run by hand: `onecard-bench host-linear --threads 16`.
#include "engine/runtime/cpu/host_linear.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/common/status_macros.h"
#include "engine/common/thread_pool.h"
#include "tools/bench/bench_registry.h"
#include "tools/bench/bench_report.h"

namespace onecard::bench {
namespace {

using engine::HostWeight;

constexpr int64_t kFootprintBytes = int64_t{1} << 30;  // what a pass reads
constexpr int kPasses = 7;

// Bytes, filled from a seeded xorshift (every byte random).
std::vector<uint8_t> RandomBytes(int64_t n, uint64_t seed) {
  std::vector<uint8_t> out(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    std::memcpy(out.data() + i, &s, 8);
  }
  return out;
}

// The median of kPasses runs of `pass`, in bytes per second.
template <typename Pass>
double MedianRate(int64_t bytes, const Pass& pass) {
  std::vector<double> rates;
  for (int i = 0; i < kPasses; ++i) {
    const auto start = std::chrono::steady_clock::now();
    pass();
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    rates.push_back(static_cast<double>(bytes) / seconds.count());
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

double PlainReadRate(ThreadPool& pool) {
  const int64_t words = kFootprintBytes / 8;
  std::vector<uint64_t> buffer(words);
  for (int64_t i = 0; i < words; ++i) buffer[i] = static_cast<uint64_t>(i);
  std::atomic<uint64_t> sink{0};
  const double rate = MedianRate(kFootprintBytes, [&] {
    pool.ParallelFor(words, [&](int64_t begin, int64_t end) {
      uint64_t sum = 0;
      for (int64_t i = begin; i < end; ++i) sum += buffer[i];
      sink += sum;
    });
  });
  if (sink.load() == 1) std::cerr << "";  // keeps the sums
  return rate;
}

struct WeightCase {
  std::string name;
  HostWeight::Format format;
  int64_t n;
  int64_t k;
};

// Weight bytes per second of HostLinearForward at `rows` rows over copies of
// one random weight filling kFootprintBytes.
double WeightRate(ThreadPool& pool, const WeightCase& c, int64_t rows) {
  const bool int4 = c.format == HostWeight::Format::kInt4;
  constexpr int32_t kGroup = 128;
  const int64_t data_bytes = int4 ? c.n * c.k / 2 : c.n * c.k * 2;
  const int64_t scale_bytes = int4 ? c.n * (c.k / kGroup) * 2 : 0;
  const int64_t copy_bytes = data_bytes + scale_bytes;
  const int64_t copies = std::max<int64_t>(1, kFootprintBytes / copy_bytes);
  std::vector<uint8_t> data = RandomBytes(data_bytes, 1), scales(scale_bytes);
  for (int64_t i = 0; i + 2 <= scale_bytes; i += 2) {  // fp16 0.01 + a little
    const uint16_t h = static_cast<uint16_t>(0x211e + (i / 2) % 64);
    std::memcpy(scales.data() + i, &h, 2);
  }
  std::vector<uint8_t> all(copies * copy_bytes);
  std::vector<HostWeight> weights;
  for (int64_t i = 0; i < copies; ++i) {
    uint8_t* base = all.data() + i * copy_bytes;
    std::memcpy(base, data.data(), data_bytes);
    std::memcpy(base + data_bytes, scales.data(), scale_bytes);
    weights.push_back({.format = c.format, .n = c.n, .k = c.k, .data = base});
    if (int4) {
      weights.back().scales = base + data_bytes;
      weights.back().group = kGroup;
    }
  }
  std::vector<float> x(rows * c.k, 0.5f), y(rows * c.n);
  engine::HostLinearScratch scratch;
  return MedianRate(copies * copy_bytes, [&] {
    for (const HostWeight& w : weights) {
      engine::HostLinearForward(pool, w, x.data(), rows, y.data(), &scratch);
    }
  });
}

absl::Status RunHostLinear(const BenchOptions& options, BenchReporter& reporter) {
  ThreadPool pool(options.num_threads);
  const std::string threads = absl::StrCat(pool.num_threads(), "threads");
  auto add = [&](const std::string& case_name, const std::string& metric, double value,
                 const std::string& unit) {
    std::cerr << absl::StrFormat("host-linear %s %s: %.3f %s\n", case_name, metric, value, unit);
    reporter.Add({.scenario = "host-linear",
                  .case_name = case_name,
                  .metric = metric,
                  .value = value,
                  .unit = unit});
  };
  const double plain = PlainReadRate(pool);
  add(absl::StrCat("plain-read-", threads), "read_gb_per_second", plain / 1e9, "GB/s");
  const WeightCase cases[] = {
      {"int4-g128-8192x8192", HostWeight::Format::kInt4, 8192, 8192},
      {"int4-g128-28672x8192", HostWeight::Format::kInt4, 28672, 8192},
      {"bf16-8192x8192", HostWeight::Format::kBf16, 8192, 8192},
  };
  for (const WeightCase& c : cases) {
    for (int64_t rows : {1, 4}) {
      const double rate = WeightRate(pool, c, rows);
      const std::string name = absl::StrCat(c.name, "-rows", rows, "-", threads);
      add(name, "weight_read_gb_per_second", rate / 1e9, "GB/s");
      add(name, "fraction_of_plain_read", rate / plain, "ratio");
    }
  }
  return absl::OkStatus();
}

const bool kRegistered = RegisterScenario(
    {"host-linear",
     "HostLinearForward's weight read rate (4-bit, BF16; 1 and 4 rows) against a plain read",
     &RunHostLinear});

}  // namespace
}  // namespace onecard::bench
