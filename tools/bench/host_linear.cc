// Scenario host-linear: the rate at which HostLinearForward
// (engine/runtime/cpu/host_linear.h) reads a weight kept in the CUDA layout in
// host memory, against the rate at which the same threads read plain memory.
// Cases: 4-bit (groups of 128, symmetric) 8192 x 8192 and 28672 x 8192, BF16
// 8192 x 8192, at 1, 2, 4 and 8 rows of x, with --threads threads (0: all
// cores) and the kernels of --cpu_isa (empty: the best the processor runs;
// its name ends each case's; as in serving, amxbf16's one-row 4-bit cases run
// the AVX-512 BF16 kernels). Each weight is copied until the copies fill about 1 GiB and a pass
// runs the product over every copy once, so the bytes come from memory, not
// a cache; the figure is the median pass's weight bytes (codes, scales) per
// second. Alternating with those passes, the same threads sum the copies as
// 64-bit words (the plain read rate of the same bytes, at the same time).
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

#include "absl/status/statusor.h"
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
constexpr int kPasses = 5;

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

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename Pass>
double Seconds(const Pass& pass) {
  const auto start = std::chrono::steady_clock::now();
  pass();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Sums `bytes` as 64-bit words with the pool's threads.
void PlainRead(ThreadPool& pool, const uint8_t* bytes, int64_t size) {
  const auto* words = reinterpret_cast<const uint64_t*>(bytes);
  std::atomic<uint64_t> sink{0};
  pool.ParallelFor(size / 8, [&](int64_t begin, int64_t end) {
    uint64_t sum = 0;
    for (int64_t i = begin; i < end; ++i) sum += words[i];
    sink += sum;
  });
  if (sink.load() == 1) std::cerr << "";  // keeps the sums
}

struct WeightCase {
  std::string name;
  HostWeight::Format format;
  int64_t n;
  int64_t k;
};

struct Rates {
  double kernel = 0;  // weight bytes per second
  double plain = 0;   // bytes per second of a plain read of the same copies
};

// Copies of one random weight filling kFootprintBytes, and their views.
struct Copies {
  std::vector<uint8_t> bytes;
  std::vector<HostWeight> weights;
};

Copies MakeCopies(const WeightCase& c) {
  constexpr int32_t kGroup = 128;
  const bool int4 = c.format == HostWeight::Format::kInt4;
  const int64_t data_bytes = int4 ? c.n * c.k / 2 : c.n * c.k * 2;
  const int64_t scale_bytes = int4 ? c.n * (c.k / kGroup) * 2 : 0;
  const int64_t copy_bytes = data_bytes + scale_bytes;
  const int64_t copies = std::max<int64_t>(1, kFootprintBytes / copy_bytes);
  const std::vector<uint8_t> data = RandomBytes(data_bytes, 1);
  std::vector<uint8_t> scales(scale_bytes);
  for (int64_t i = 0; i + 2 <= scale_bytes; i += 2) {  // fp16 0.01 + a little
    const uint16_t h = static_cast<uint16_t>(0x211e + (i / 2) % 64);
    std::memcpy(scales.data() + i, &h, 2);
  }
  Copies out;
  out.bytes.resize(copies * copy_bytes);
  for (int64_t i = 0; i < copies; ++i) {
    uint8_t* base = out.bytes.data() + i * copy_bytes;
    std::memcpy(base, data.data(), data_bytes);
    std::memcpy(base + data_bytes, scales.data(), scale_bytes);
    out.weights.push_back({.format = c.format, .n = c.n, .k = c.k, .data = base});
    if (int4) {
      out.weights.back().scales = base + data_bytes;
      out.weights.back().group = kGroup;
    }
  }
  return out;
}

// HostLinearForward over every copy at `rows` rows, and a plain read of the
// copies, pass after pass (both see the machine as it is then): medians.
Rates Measure(ThreadPool& pool, const Copies& copies, int64_t rows, engine::CpuIsa isa) {
  const HostWeight& w = copies.weights.front();
  std::vector<float> x(rows * w.k, 0.5f), y(rows * w.n);
  engine::HostLinearScratch scratch;
  auto forward = [&] {
    for (const HostWeight& c : copies.weights) {
      engine::HostLinearForward(pool, c, x.data(), rows, y.data(), &scratch, isa);
    }
  };
  const auto size = static_cast<int64_t>(copies.bytes.size());
  forward();  // warm-up
  std::vector<double> kernel, plain;
  for (int i = 0; i < kPasses; ++i) {
    plain.push_back(size / Seconds([&] { PlainRead(pool, copies.bytes.data(), size); }));
    kernel.push_back(size / Seconds(forward));
  }
  return {.kernel = Median(kernel), .plain = Median(plain)};
}

// The kernel set named `name` (CpuIsaName), or the best; FailedPrecondition
// naming --cpu_isa for one this processor does not run.
absl::StatusOr<engine::CpuIsa> IsaNamed(const std::string& name) {
  if (name.empty()) return engine::DetectCpuIsa();
  std::string supported;
  for (engine::CpuIsa isa : engine::SupportedCpuIsas()) {
    if (name == engine::CpuIsaName(isa)) return isa;
    absl::StrAppend(&supported, supported.empty() ? "" : ", ", engine::CpuIsaName(isa));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "--cpu_isa ", name, ": not a kernel set this processor runs (it runs ", supported, ")"));
}

absl::Status RunHostLinear(const BenchOptions& options, BenchReporter& reporter) {
  ASSIGN_OR_RETURN(const engine::CpuIsa isa, IsaNamed(options.cpu_isa));
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
  const WeightCase cases[] = {
      {"int4-g128-8192x8192", HostWeight::Format::kInt4, 8192, 8192},
      {"int4-g128-28672x8192", HostWeight::Format::kInt4, 28672, 8192},
      {"bf16-8192x8192", HostWeight::Format::kBf16, 8192, 8192},
  };
  for (const WeightCase& c : cases) {
    const Copies copies = MakeCopies(c);
    for (int64_t rows : {1, 2, 4, 8}) {
      const Rates r = Measure(pool, copies, rows, isa);
      const std::string name =
          absl::StrCat(c.name, "-rows", rows, "-", threads, "-", engine::CpuIsaName(isa));
      add(name, "weight_read_gb_per_second", r.kernel / 1e9, "GB/s");
      add(name, "plain_read_gb_per_second", r.plain / 1e9, "GB/s");
      add(name, "fraction_of_plain_read", r.kernel / r.plain, "ratio");
    }
  }
  return absl::OkStatus();
}

const bool kRegistered = RegisterScenario(
    {"host-linear",
     "HostLinearForward's weight read rate (4-bit, BF16; 1, 2, 4, 8 rows) against a plain read",
     &RunHostLinear});

}  // namespace
}  // namespace onecard::bench
