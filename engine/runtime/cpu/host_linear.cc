// CheckHostWeight and HostLinearForward (see host_linear.h): x laid out in the
// kernels' lanes once a call (gathered by the column map, with the 4-bit
// groups' sums of x), then threads over 16-row tiles. Also the portable
// kernels, which follow the same lanes in plain loops (the index math through
// int4_layout.h, an independent check of the AVX-512 file's own).
// Tested by tests/engine/runtime/cpu/host_linear_test.cc.
#include "engine/runtime/cpu/host_linear.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/common/fp16.h"
#include "engine/runtime/cpu/host_linear_kernels.h"

namespace onecard::engine {
namespace {

using host_linear::Bf16Args;
using host_linear::Int4Args;
using host_linear::kLanes;
using host_linear::OffsetTerm;

absl::Status WeightError(absl::string_view name, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("host weight ", name, ": ", what));
}

absl::Status CheckInt4(const HostWeight& w, absl::string_view name) {
  if (w.n <= 0 || w.n % kInt4TileRows != 0 || w.k <= 0 || w.k % kInt4TileCols != 0) {
    return WeightError(
        name, absl::StrCat("4-bit shape [", w.n, ", ", w.k, "] must have n % ", kInt4TileRows,
                           " == 0 and k % ", kInt4TileCols, " == 0, both positive"));
  }
  if (w.group < kInt4MinGroup || w.group % kInt4MinGroup != 0 || w.k % w.group != 0) {
    return WeightError(name, absl::StrCat("group size ", w.group, " must be a multiple of ",
                                          kInt4MinGroup, " dividing k = ", w.k));
  }
  if (w.data == nullptr || w.scales == nullptr) {
    return WeightError(name, "4-bit codes and scales must not be null");
  }
  if ((w.offset_kind == Int4Offsets::kSymmetric) != (w.offsets == nullptr)) {
    return WeightError(name, "offsets must be given for zero points or mins, and only then");
  }
  if (w.columns == nullptr) return absl::OkStatus();
  std::vector<bool> seen(w.k, false);
  for (int64_t j = 0; j < w.k; ++j) {
    const int32_t c = w.columns[j];
    if (c < 0 || c >= w.k || seen[c]) {
      return WeightError(name, absl::StrCat("columns is not a permutation of 0..", w.k - 1,
                                            " (entry ", j, " is ", c, ")"));
    }
    seen[c] = true;
  }
  return absl::OkStatus();
}

// Storage of at least `count` floats starting on a 64-byte boundary.
float* AlignedFloats(std::vector<float>* v, int64_t count) {
  constexpr int64_t kPad = 64 / sizeof(float);
  if (static_cast<int64_t>(v->size()) < count + kPad) v->resize(count + kPad);
  const auto address = reinterpret_cast<uintptr_t>(v->data());
  return v->data() + ((64 - address % 64) % 64) / sizeof(float);
}

OffsetTerm TermOf(Int4Offsets kind) {
  switch (kind) {
    case Int4Offsets::kSymmetric:
      return OffsetTerm::kNone;
    case Int4Offsets::kZero:
      return OffsetTerm::kZero;
    case Int4Offsets::kFloat:
      return OffsetTerm::kFloat;
  }
  return OffsetTerm::kNone;
}

// x rows [0, rows) in 4-bit lanes (host_linear_kernels.h), and their sums
// over each group (in column order, fp32) where the weight has offsets.
void LayOutInt4X(const HostWeight& w, const float* x, int rows, HostLinearScratch* s, Int4Args* a) {
  const int64_t k = w.k, k_tiles = k / kInt4TileCols, groups = k / w.group;
  float* lanes = AlignedFloats(&s->x_lanes, k * rows);
  auto source = [&](int r, int64_t c) {
    return x[r * k + (w.columns == nullptr ? c : w.columns[c])];
  };
  for (int64_t kt = 0; kt < k_tiles; ++kt) {
    for (int j = 0; j < 4; ++j) {
      for (int r = 0; r < rows; ++r) {
        float* v = lanes + ((kt * 4 + j) * rows + r) * kLanes;
        for (int d = 0; d < kLanes; ++d) {  // d = 4 t + i: column 16 i + 4 t + j
          v[d] = source(r, kt * kInt4TileCols + 16 * (d % 4) + 4 * (d / 4) + j);
        }
      }
    }
  }
  a->x_lanes = lanes;
  if (w.offset_kind == Int4Offsets::kSymmetric) return;
  s->x_sums.resize(rows * groups);
  for (int r = 0; r < rows; ++r) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      float sum = 0.0f;
      for (int64_t c = gi * w.group; c < (gi + 1) * w.group; ++c) sum += source(r, c);
      s->x_sums[r * groups + gi] = sum;
    }
  }
  a->x_sums = s->x_sums.data();
}

// x rows [0, rows) in BF16 lanes: per 32 columns an even and an odd vector.
void LayOutBf16X(const HostWeight& w, const float* x, int rows, HostLinearScratch* s, Bf16Args* a) {
  const int64_t k = w.k, runs = (k + host_linear::kBf16RunCols - 1) / host_linear::kBf16RunCols;
  float* lanes = AlignedFloats(&s->x_lanes, runs * 2 * rows * kLanes);
  for (int64_t c = 0; c < runs; ++c) {
    for (int p = 0; p < 2; ++p) {
      for (int r = 0; r < rows; ++r) {
        float* v = lanes + ((c * 2 + p) * rows + r) * kLanes;
        for (int d = 0; d < kLanes; ++d) {
          const int64_t col = c * host_linear::kBf16RunCols + 2 * d + p;
          v[d] = col < k ? x[r * k + col] : 0.0f;
        }
      }
    }
  }
  a->x_lanes = lanes;
}

const host_linear::Kernels& KernelsFor(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512Vnni:
      return host_linear::Avx512Kernels();
    case CpuIsa::kAvx2:
    case CpuIsa::kGeneric:
      break;
  }
  return host_linear::GenericKernels();
}

// Rows [0, rows) of x, rows <= kHostLinearMaxRows.
void ForwardChunk(ThreadPool& pool, const HostWeight& w, const float* x, int rows, float* y,
                  HostLinearScratch* scratch, const host_linear::Kernels& kernels) {
  const int64_t tiles = (w.n + kInt4TileRows - 1) / kInt4TileRows;
  switch (w.format) {
    case HostWeight::Format::kInt4: {
      Int4Args a{.codes = static_cast<const uint8_t*>(w.data),
                 .scales = static_cast<const uint32_t*>(w.scales),
                 .offsets = static_cast<const uint32_t*>(w.offsets),
                 .n = w.n,
                 .k = w.k,
                 .group = w.group,
                 .offset_term = TermOf(w.offset_kind),
                 .rows = rows,
                 .y = y,
                 .y_stride = w.n};
      LayOutInt4X(w, x, rows, scratch, &a);
      pool.ParallelFor(tiles, [&](int64_t begin, int64_t end) { kernels.int4(a, begin, end); });
      return;
    }
    case HostWeight::Format::kBf16: {
      Bf16Args a{.w = static_cast<const uint16_t*>(w.data),
                 .n = w.n,
                 .k = w.k,
                 .rows = rows,
                 .y = y,
                 .y_stride = w.n};
      LayOutBf16X(w, x, rows, scratch, &a);
      pool.ParallelFor(tiles, [&](int64_t begin, int64_t end) { kernels.bf16(a, begin, end); });
      return;
    }
  }
}

}  // namespace

absl::Status CheckHostWeight(const HostWeight& w, absl::string_view name) {
  switch (w.format) {
    case HostWeight::Format::kInt4:
      return CheckInt4(w, name);
    case HostWeight::Format::kBf16:
      if (w.n <= 0 || w.k <= 0) {
        return WeightError(name,
                           absl::StrCat("BF16 shape [", w.n, ", ", w.k, "] must be positive"));
      }
      if (w.data == nullptr) return WeightError(name, "BF16 data must not be null");
      if (w.scales != nullptr || w.offsets != nullptr || w.columns != nullptr) {
        return WeightError(name, "BF16 takes no scales, offsets or column map");
      }
      return absl::OkStatus();
  }
  return WeightError(name, absl::StrCat("format ", static_cast<int>(w.format),
                                        " is not supported; supported: BF16, 4-bit"));
}

void HostLinearForward(ThreadPool& pool, const HostWeight& w, const float* x, int64_t rows,
                       float* y, HostLinearScratch* scratch, CpuIsa isa) {
  assert(CheckHostWeight(w, "HostLinearForward").ok() && "HostLinearForward: a checked weight");
  assert(CpuSupports(isa) && "HostLinearForward: the processor does not run this isa");
  const host_linear::Kernels& kernels = KernelsFor(isa);
  for (int64_t r = 0; r < rows; r += kHostLinearMaxRows) {
    const int chunk = static_cast<int>(std::min<int64_t>(kHostLinearMaxRows, rows - r));
    ForwardChunk(pool, w, x + r * w.k, chunk, y + r * w.n, scratch, kernels);
  }
}

}  // namespace onecard::engine
