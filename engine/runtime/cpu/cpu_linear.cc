// CpuLinear, QuantizeRowsQ8, the processor's instruction sets and
// CpuLinearForward (see cpu_linear.h). The product is a grid of (row, output
// feature) dot products: threads take contiguous tiles of kTileOut output
// features (a tile never spans two runs); inside a tile, the tile's weight
// rows stay in cache while the rows of x pass.
// Tested by tests/engine/runtime/cpu/cpu_linear_test.cc.
#include "engine/runtime/cpu/cpu_linear.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "engine/model/dequantize.h"
#include "engine/model/quant_blocks.h"
#include "engine/runtime/cpu/cpu_linear_kernels.h"
#include "engine/runtime/cpu/cpu_matmul.h"

namespace onecard::engine {
namespace {

constexpr int kTileOut = 4;  // output features a tile: the unit threads split
constexpr int64_t kRowBlock = 32;

std::string TypeName(DType dtype) { return std::string(DTypeName(dtype)); }

int64_t RunBytes(DType dtype, int64_t rows, int64_t cols) {
  return rows * (cols / BlockElements(dtype)) * BlockBytes(dtype);
}

// A dtype's kernels: one row at a time (`row`, or `row_k` for the K-quants,
// which take QuantizedRowsK), and kRowsAtOnce rows (null where none).
struct DtypeKernels {
  cpu_linear::RowDot row = nullptr;
  cpu_linear::RowsDot rows = nullptr;
  cpu_linear::RowDotK row_k = nullptr;
  cpu_linear::RowsDotK rows_k = nullptr;
};

DtypeKernels KernelFor(const cpu_linear::Kernels& k, DType dtype) {
  switch (dtype) {
    case DType::kQ4_0:
      return {k.q4_0, k.q4_0_x4};
    case DType::kQ4_1:
      return {k.q4_1, k.q4_1_x4};
    case DType::kQ8_0:
      return {k.q8_0};
    case DType::kQ4_K:
      return {.row_k = k.q4_k, .rows_k = k.q4_k_x4};
    case DType::kQ5_K:
      return {.row_k = k.q5_k, .rows_k = k.q5_k_x4};
    case DType::kQ6_K:
      return {.row_k = k.q6_k, .rows_k = k.q6_k_x4};
    default:
      return {};
  }
}

cpu_linear::XRow RowOf(const QuantizedRows& xq, int64_t r) {
  const int64_t in = xq.cols;
  return {xq.q.data() + r * in, xq.d.data() + r * (in / 32), xq.sum16.data() + r * (in / 16),
          xq.dsum.data() + r * (in / 32)};
}

cpu_linear::XRowK RowOf(const QuantizedRowsK& xk, int64_t r) {
  const int64_t in = xk.cols;
  return {xk.q.data() + r * in, xk.d.data() + r * (in / 256), xk.sum16.data() + r * (in / 16)};
}

// With one row of x, weight rows from o_first kRowsAtOnce at a time by
// `rows` (RowsDot or RowsDotK) while whole groups of them remain before
// o_end; returns the first row left.
template <typename Quantized, typename Dots>
int64_t DotFourRowsAtOnce(const CpuWeightRows& run, int64_t run_offset, int64_t o_first,
                          int64_t o_end, const CpuLinearArgs& a, const Quantized& xq, Dots rows) {
  const float* bias = a.bias != nullptr ? a.bias + run_offset : nullptr;
  const int64_t row_bytes = RunBytes(run.dtype, 1, xq.cols);
  const auto x = RowOf(xq, 0);
  int64_t o = o_first;
  for (; o + cpu_linear::kRowsAtOnce <= o_end; o += cpu_linear::kRowsAtOnce) {
    float dots[cpu_linear::kRowsAtOnce];
    rows(run.blocks.data() + o * row_bytes, row_bytes, x, xq.cols, dots);
    for (int i = 0; i < cpu_linear::kRowsAtOnce; ++i) {
      a.y[run_offset + o + i] = bias != nullptr ? dots[i] + bias[o + i] : dots[i];
    }
  }
  return o;
}

// Weight rows [o_first, o_end) of `run` (relative to its first, output
// feature run_offset) against every row of x, kMaxRows rows of x a call of
// `dot` (RowDot or RowDotK over the matching quantized rows).
template <typename Quantized, typename Dot>
void DotRowBlocks(const CpuWeightRows& run, int64_t run_offset, int64_t o_first, int64_t o_end,
                  const CpuLinearArgs& a, int64_t out_features, const Quantized& xq, Dot dot) {
  const float* bias = a.bias != nullptr ? a.bias + run_offset : nullptr;
  const int64_t row_bytes = RunBytes(run.dtype, 1, xq.cols);
  decltype(RowOf(xq, 0)) x[kRowBlock];
  for (int64_t r0 = 0; r0 < a.num_rows; r0 += kRowBlock) {
    const int64_t r_end = std::min(a.num_rows, r0 + kRowBlock);
    for (int64_t r = r0; r < r_end; ++r) x[r - r0] = RowOf(xq, r);
    for (int64_t o = o_first; o < o_end; ++o) {
      const uint8_t* w = run.blocks.data() + o * row_bytes;
      for (int64_t r = r0; r < r_end; r += cpu_linear::kMaxRows) {
        const int n = static_cast<int>(std::min<int64_t>(cpu_linear::kMaxRows, r_end - r));
        float dots[cpu_linear::kMaxRows];
        dot(w, &x[r - r0], n, xq.cols, dots);
        for (int k = 0; k < n; ++k) {
          a.y[(r + k) * out_features + run_offset + o] =
              bias != nullptr ? dots[k] + bias[o] : dots[k];
        }
      }
    }
  }
}

const cpu_linear::Kernels& KernelsFor(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512Vnni:
    case CpuIsa::kAvx512Bf16:
    case CpuIsa::kAmxBf16:
      return cpu_linear::Avx512VnniKernels();
    case CpuIsa::kAvx2:
      return cpu_linear::Avx2Kernels();
    case CpuIsa::kGeneric:
      break;
  }
  return cpu_linear::GenericKernels();
}

// Output features [o_begin, o_end) of run `run` (whose first row is output
// feature run_offset) for every row of x. fp32 runs are MatMul's slices;
// block runs: each weight row meets the rows of x kMaxRows at a time (its
// codes unpacked once for them); a single row of x meets the weight rows
// kRowsAtOnce at a time where the dtype has such a kernel (the same bits).
void LinearSlice(const CpuWeightRows& run, int64_t run_offset, int64_t o_begin, int64_t o_end,
                 int64_t in, const CpuLinearArgs& a, int64_t out_features,
                 const CpuLinearScratch& xs, DtypeKernels kernels) {
  const float* bias = a.bias != nullptr ? a.bias + run_offset : nullptr;
  if (run.dtype == DType::kF32) {
    MatMulSlice({a.x, run.f32.data(), bias, a.y + run_offset, a.num_rows, in, run.rows},
                o_begin - run_offset, o_end - run_offset, out_features);
    return;
  }
  int64_t o = o_begin - run_offset;
  const bool one_row = a.num_rows == 1;
  if (kernels.row_k != nullptr) {
    if (one_row && kernels.rows_k != nullptr) {
      o = DotFourRowsAtOnce(run, run_offset, o, o_end - run_offset, a, xs.xk, kernels.rows_k);
    }
    DotRowBlocks(run, run_offset, o, o_end - run_offset, a, out_features, xs.xk, kernels.row_k);
    return;
  }
  if (one_row && kernels.rows != nullptr) {
    o = DotFourRowsAtOnce(run, run_offset, o, o_end - run_offset, a, xs.xq, kernels.rows);
  }
  DotRowBlocks(run, run_offset, o, o_end - run_offset, a, out_features, xs.xq, kernels.row);
}

}  // namespace

bool IsKQuant(DType dtype) {
  return dtype == DType::kQ4_K || dtype == DType::kQ5_K || dtype == DType::kQ6_K;
}

bool IsCpuLinearDtype(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ8_0:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<CpuLinear> CpuLinear::FromF32(std::vector<float> w, int64_t rows,
                                             int64_t in_features, absl::string_view name) {
  if (rows <= 0 || in_features <= 0 || static_cast<int64_t>(w.size()) != rows * in_features) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", w.size(), " values for [", rows, ", ", in_features, "]"));
  }
  CpuLinear out;
  out.in_features_ = in_features;
  out.out_features_ = rows;
  out.runs_.push_back({DType::kF32, rows, std::move(w), {}});
  return out;
}

absl::StatusOr<CpuLinear> CpuLinear::FromBlocks(DType dtype, std::vector<uint8_t> blocks,
                                                int64_t rows, int64_t in_features,
                                                absl::string_view name) {
  if (!IsCpuLinearDtype(dtype) || dtype == DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": dtype ", TypeName(dtype), " is not a block type the cpu backend multiplies"));
  }
  const int64_t elements = BlockElements(dtype);
  if (rows <= 0 || in_features <= 0 || in_features % elements != 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": [", rows, ", ", in_features,
                                                   "] is not whole rows of ", TypeName(dtype),
                                                   " blocks of ", elements));
  }
  if (static_cast<int64_t>(blocks.size()) != RunBytes(dtype, rows, in_features)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", blocks.size(), " bytes of ", TypeName(dtype), " blocks; [", rows,
                     ", ", in_features, "] needs ", RunBytes(dtype, rows, in_features)));
  }
  if (dtype == DType::kQ4_0 || dtype == DType::kQ4_1) {
    const int64_t row_bytes = RunBytes(dtype, 1, in_features);
    for (int64_t r = 0; r < rows; ++r) {
      cpu_linear::PackQ4Row(dtype == DType::kQ4_1, blocks.data() + r * row_bytes, in_features);
    }
  }
  CpuLinear out;
  out.in_features_ = in_features;
  out.out_features_ = rows;
  out.runs_.push_back({dtype, rows, {}, std::move(blocks)});
  return out;
}

absl::Status CpuLinear::Append(CpuLinear other, absl::string_view name) {
  if (empty()) {
    *this = std::move(other);
    return absl::OkStatus();
  }
  if (other.in_features_ != in_features_) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": ", other.in_features_, " input features; the rows above it have ", in_features_));
  }
  out_features_ += other.out_features_;
  for (CpuWeightRows& run : other.runs_) runs_.push_back(std::move(run));
  return absl::OkStatus();
}

bool CpuLinear::quantized() const {
  return std::any_of(runs_.begin(), runs_.end(),
                     [](const CpuWeightRows& r) { return r.dtype != DType::kF32; });
}

int64_t CpuLinear::bytes() const {
  int64_t total = 0;
  for (const CpuWeightRows& r : runs_) {
    total += r.dtype == DType::kF32 ? static_cast<int64_t>(r.f32.size() * sizeof(float))
                                    : static_cast<int64_t>(r.blocks.size());
  }
  return total;
}

void CpuLinear::RowF32(int64_t r, float* out) const {
  assert(r >= 0 && r < out_features_ && "CpuLinear::RowF32: row out of range");
  for (const CpuWeightRows& run : runs_) {
    if (r >= run.rows) {
      r -= run.rows;
      continue;
    }
    if (run.dtype == DType::kF32) {
      std::copy_n(run.f32.data() + r * in_features_, in_features_, out);
      return;
    }
    const uint8_t* row = run.blocks.data() + RunBytes(run.dtype, r, in_features_);
    if (run.dtype == DType::kQ4_0 || run.dtype == DType::kQ4_1) {  // groups packed: unpack them
      const int64_t row_bytes = RunBytes(run.dtype, 1, in_features_);
      const int64_t group_bytes = 8 * BlockBytes(run.dtype);
      std::vector<uint8_t> blocks(row, row + row_bytes);
      for (int64_t at = 0; at + group_bytes <= row_bytes; at += group_bytes) {
        cpu_linear::UnpackQ4Group(run.dtype == DType::kQ4_1, row + at, blocks.data() + at);
      }
      DequantizeElements(run.dtype, blocks.data(), in_features_, out);
      return;
    }
    DequantizeElements(run.dtype, row, in_features_, out);
    return;
  }
}

namespace {

// One block of kBlock values of x (a multiple of 16) into kBlock codes q and
// their sums per 16 (sum16, Sum: int32_t or int16_t, |sum| <= 16 * 127);
// returns the scale d. Inlined into each clone of its callers.
template <int kBlock, typename Sum>
[[gnu::always_inline]] inline float QuantizeBlock(const float* xb, int8_t* q, Sum* sum16) {
  float amax = 0.0f;
  for (int i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int g = 0; g < kBlock / 16; ++g) {
    int32_t sum = 0;
    for (int i = 16 * g; i < 16 * g + 16; ++i) {
      const float v = std::clamp(std::nearbyint(xb[i] * id), -127.0f, 127.0f);
      q[i] = static_cast<int8_t>(v);
      sum += q[i];
    }
    sum16[g] = static_cast<Sum>(sum);
  }
  return d;
}

// Blocks [b_begin, b_end) of 32 values of x into out (sized). Cloned for
// AVX-512 and AVX2 so that the rounding is an instruction, not a call (the
// same values in each: nearbyint rounds to nearest even in every clone).
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void QuantizeBlocks(
    const float* x, int64_t b_begin, int64_t b_end, QuantizedRows* out) {
  for (int64_t b = b_begin; b < b_end; ++b) {
    const float d = QuantizeBlock<32>(x + b * 32, out->q.data() + b * 32, &out->sum16[2 * b]);
    out->d[b] = d;
    out->dsum[b] = d * static_cast<float>(out->sum16[2 * b] + out->sum16[2 * b + 1]);
  }
}

void SizeQuantizedRows(int64_t rows, int64_t cols, QuantizedRows* out) {
  out->rows = rows;
  out->cols = cols;
  out->q.resize(rows * cols);
  out->d.resize(rows * (cols / 32));
  out->sum16.resize(rows * (cols / 16));
  out->dsum.resize(rows * (cols / 32));
}

// Blocks [b_begin, b_end) of 256 values of x into out (sized): the rule of
// QuantizeRowsQ8KRef, cloned like QuantizeBlocks.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void QuantizeBlocksK(
    const float* x, int64_t b_begin, int64_t b_end, QuantizedRowsK* out) {
  for (int64_t b = b_begin; b < b_end; ++b) {
    out->d[b] = QuantizeBlock<256>(x + b * 256, out->q.data() + b * 256, &out->sum16[16 * b]);
  }
}

void SizeQuantizedRowsK(int64_t rows, int64_t cols, QuantizedRowsK* out) {
  out->rows = rows;
  out->cols = cols;
  out->q.resize(rows * cols);
  out->d.resize(rows * (cols / 256));
  out->sum16.resize(rows * (cols / 16));
}

}  // namespace

void QuantizeRowsQ8(const float* x, int64_t rows, int64_t cols, QuantizedRows* out) {
  assert(cols % 32 == 0 && "QuantizeRowsQ8: cols must be a multiple of 32");
  SizeQuantizedRows(rows, cols, out);
  QuantizeBlocks(x, 0, rows * (cols / 32), out);
}

void QuantizeRowsQ8K(const float* x, int64_t rows, int64_t cols, QuantizedRowsK* out) {
  assert(cols % 256 == 0 && "QuantizeRowsQ8K: cols must be a multiple of 256");
  SizeQuantizedRowsK(rows, cols, out);
  QuantizeBlocksK(x, 0, rows * (cols / 256), out);
}

namespace {

// CPUID leaf 1, ECX bit 29 (not every compiler's __builtin_cpu_supports
// knows "f16c").
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

// AMX-TILE and AMX-BF16: CPUID leaf 7, subleaf 0, EDX bits 24 and 22 (read
// directly: older compilers' __builtin_cpu_supports has no names for them).
bool HasAmxBf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (edx & (1u << 24)) != 0 &&
         (edx & (1u << 22)) != 0;
}

// Linux hands a process the AMX tile state only when asked
// (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, 18); asked once.
bool TileStatePermitted() {
  static const bool permitted = [] {
    constexpr int kArchReqXcompPerm = 0x1023;
    constexpr int kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return permitted;
}

}  // namespace

bool CpuSupports(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kGeneric:
      return true;
    case CpuIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && HasF16c();
    case CpuIsa::kAvx512Vnni:
      return CpuSupports(CpuIsa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512vnni");
    case CpuIsa::kAvx512Bf16:
      return CpuSupports(CpuIsa::kAvx512Vnni) && __builtin_cpu_supports("avx512bf16");
    case CpuIsa::kAmxBf16:
      return CpuSupports(CpuIsa::kAvx512Bf16) && HasAmxBf16() && TileStatePermitted();
  }
  return false;
}

std::vector<CpuIsa> SupportedCpuIsas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : {CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512Vnni, CpuIsa::kAvx512Bf16,
                     CpuIsa::kAmxBf16}) {
    if (CpuSupports(isa)) out.push_back(isa);
  }
  return out;
}

CpuIsa DetectCpuIsa() {
  static const CpuIsa isa = [] {
    for (CpuIsa i : {CpuIsa::kAmxBf16, CpuIsa::kAvx512Bf16, CpuIsa::kAvx512Vnni, CpuIsa::kAvx2}) {
      if (CpuSupports(i)) return i;
    }
    return CpuIsa::kGeneric;
  }();
  return isa;
}

const char* CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kGeneric:
      return "generic";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512Vnni:
      return "avx512vnni";
    case CpuIsa::kAvx512Bf16:
      return "avx512bf16";
    case CpuIsa::kAmxBf16:
      return "amxbf16";
  }
  return "?";
}

void CpuLinearForward(ThreadPool& pool, const CpuLinear& w, const CpuLinearArgs& args,
                      CpuLinearScratch* scratch, CpuIsa isa) {
  assert(args.x != nullptr && args.y != nullptr && !w.empty() && "CpuLinearForward: operands");
  assert(CpuSupports(isa) && "CpuLinearForward: the processor does not run this isa");
  if (args.num_rows <= 0) return;
  const int64_t in = w.in_features();
  const std::vector<CpuWeightRows>& runs = w.runs();
  // Rows quantized in parallel (blocks are independent), in the formats the
  // runs take.
  const bool any_k = std::any_of(runs.begin(), runs.end(),
                                 [](const CpuWeightRows& r) { return IsKQuant(r.dtype); });
  const bool any_q8 = std::any_of(runs.begin(), runs.end(), [](const CpuWeightRows& r) {
    return r.dtype != DType::kF32 && !IsKQuant(r.dtype);
  });
  if (any_q8) SizeQuantizedRows(args.num_rows, in, &scratch->xq);
  if (any_k) SizeQuantizedRowsK(args.num_rows, in, &scratch->xk);
  if (any_q8 || any_k) {
    pool.ParallelFor(args.num_rows, [&](int64_t begin, int64_t end) {
      if (any_q8) QuantizeBlocks(args.x, begin * (in / 32), end * (in / 32), &scratch->xq);
      if (any_k) QuantizeBlocksK(args.x, begin * (in / 256), end * (in / 256), &scratch->xk);
    });
  }
  const cpu_linear::Kernels& kernels = KernelsFor(isa);
  // Tiles of kTileOut features, run by run: tile_start[i] is run i's first.
  absl::InlinedVector<int64_t, 8> tile_start(runs.size() + 1, 0), row_start(runs.size() + 1, 0);
  for (size_t i = 0; i < runs.size(); ++i) {
    tile_start[i + 1] = tile_start[i] + (runs[i].rows + kTileOut - 1) / kTileOut;
    row_start[i + 1] = row_start[i] + runs[i].rows;
  }
  pool.ParallelFor(tile_start.back(), [&](int64_t tile_begin, int64_t tile_end) {
    for (size_t i = 0; i < runs.size(); ++i) {
      const int64_t t0 = std::max(tile_begin, tile_start[i]);
      const int64_t t1 = std::min(tile_end, tile_start[i + 1]);
      if (t0 >= t1) continue;
      const int64_t o_begin = row_start[i] + (t0 - tile_start[i]) * kTileOut;
      const int64_t o_end =
          std::min(row_start[i + 1], row_start[i] + (t1 - tile_start[i]) * kTileOut);
      LinearSlice(runs[i], row_start[i], o_begin, o_end, in, args, w.out_features(), *scratch,
                  KernelFor(kernels, runs[i].dtype));
    }
  });
}

}  // namespace onecard::engine
