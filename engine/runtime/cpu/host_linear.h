// HostLinear: y = x W^T on the CPU over a weight kept in the CUDA backend's
// device layout in host memory (a layer streamed to the card from pinned
// memory, which the CPU may also compute at decode batch sizes).
//
// Formats (HostWeight::Format):
//   kBf16: W row-major [n, k] BF16 (any n, k >= 1).
//   kInt4: the 4-bit layout of engine/kernels/int4_layout.h (n % 16 == 0,
//          k % 64 == 0, a group of 32 or a multiple of 64 dividing k: the
//          kernels close groups at every half k tile for groups of 32, else
//          at k tile ends, so groups of 96, 160, ..., which end mid-tile, are
//          refused, HostLinearTakesGroup), every Int4Offsets kind,
//          with an optional act-order column map.
// Numerics: W's values exactly (Int4Value's), x rounded to BF16 (to nearest
// even; exact for the GPU's activations, which are BF16), so that every
// product is exact in fp32, and fp32 sums; x is never quantized further. A
// 4-bit weight is summed per group as s * sum((q - 8) x) plus, for kZero and
// kFloat, the group's offset term c * sum(x), c = s (8 - z) or 8 s + m
// (w = s (q - 8) + c in each case). The BF16 dot products of kAvx512Bf16
// treat denormal inputs and sums as zero (vdpbf16ps).
//
// Every y[r][o] is computed from row r of x and row o of W by one sequence of
// operations, whatever the number of rows in the call or of threads (the
// kernels are batch- and thread-count-invariant, bit for bit, on one ISA),
// with one exception: kAmxBf16 gives a call of one row against 4-bit codes to
// the kAvx512Bf16 kernels (on the 16-core Xeon of the H100 machine, 77-78
// GB/s of codes against the tile kernels' 55-69 at one row; 45-61 against
// 28-31 at four rows: bench/results/host-linear.md), so
// there a row's outputs depend on whether it came alone.
// Threads split the output rows in 16-row tiles (ThreadPool's fixed
// partition); a call takes up to kHostLinearMaxRows rows of x at a time.
//
// Kernels: portable (host_linear_generic.cc; also for CpuIsa::kAvx2), AVX-512
// (host_linear_avx512.cc, kAvx512Vnni: fp32 multiply-adds), AVX-512 BF16
// (host_linear_avx512bf16.cc, kAvx512Bf16: the 4-bit products as BF16 dot
// products), the 4-bit ones sharing host_linear_int4_avx512.inc, and AMX
// (host_linear_amx.cc, kAmxBf16: the products as tile products, all rows of
// x in one). The treatment of denormals above holds for kAmxBf16 too. The reference
// HostLinearRef (host_linear_ref.cc) decodes W through Int4CodePosition /
// Int4ScalePosition / Int4Value and sums in double.
// Tested by tests/engine/runtime/cpu/host_linear_test.cc; timed by
// `onecard-bench host-linear` (tools/bench/host_linear.cc).
#ifndef ONECARD_ENGINE_RUNTIME_CPU_HOST_LINEAR_H_
#define ONECARD_ENGINE_RUNTIME_CPU_HOST_LINEAR_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/common/thread_pool.h"
#include "engine/kernels/int4_layout.h"
#include "engine/runtime/cpu/cpu_linear.h"

namespace onecard::engine {

// Rows of x one pass over the weights takes; more rows loop over chunks.
inline constexpr int kHostLinearMaxRows = 8;

// A weight as the CUDA backend lays it out (CudaWeight), in host memory. The
// caller owns the buffers.
struct HostWeight {
  enum class Format : uint8_t { kBf16, kInt4 };
  Format format = Format::kBf16;
  int64_t n = 0;  // [n, k]: n outputs, k inputs
  int64_t k = 0;
  const void* data = nullptr;     // BF16 [n, k], or the 4-bit codes (Int4CodeBytes(n, k))
  const void* scales = nullptr;   // 4-bit: uint32 [n / 128][k / group][tiles][8] (int4_layout.h)
  const void* offsets = nullptr;  // 4-bit kZero / kFloat: as scales; null otherwise
  int32_t group = 0;              // 4-bit: columns a scale covers
  Int4Offsets offset_kind = Int4Offsets::kSymmetric;
  const int32_t* columns = nullptr;  // 4-bit act order: [k], stored column j is x's columns[j]
};

// Reused between calls so that a call allocates nothing after the first of
// its size. One scratch serves one call at a time.
struct HostLinearScratch {
  std::vector<float> x_lanes;      // x in the kernels' lane order (host_linear_kernels.h)
  std::vector<uint32_t> x_pairs;   // or as BF16 pairs
  std::vector<float> x_half_sums;  // 4-bit: [rows, k / 32] sums of x over each 32 columns
  std::vector<float> x_sums;       // 4-bit: [rows, k / group] sums of x over each group
};

// Whether the 4-bit kernels take groups of `group` columns (32, or a
// multiple of 64); CheckHostWeight also wants it to divide k.
bool HostLinearTakesGroup(int32_t group);

// OK; Unimplemented naming `name` and what is supported for a format, shape
// or group size outside the rules above; InvalidArgument naming `name` for a
// pointer the format needs that is null (or one it does not take that is
// not), or a column map that is not a permutation of [0, k).
absl::Status CheckHostWeight(const HostWeight& w, absl::string_view name);

// y [rows, w.n] = x [rows, w.k] W^T, fp32 in and out, with the kernels of
// `isa` (which the processor must run). w must pass CheckHostWeight; y must
// not alias x. rows <= 0 does nothing.
void HostLinearForward(ThreadPool& pool, const HostWeight& w, const float* x, int64_t rows,
                       float* y, HostLinearScratch* scratch, CpuIsa isa = DetectCpuIsa());

// The reference: W decoded value by value from its layout, x rounded to BF16
// and gathered by the column map, every dot product in double.
void HostLinearRef(const HostWeight& w, const float* x, int64_t rows, float* y);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CPU_HOST_LINEAR_H_
