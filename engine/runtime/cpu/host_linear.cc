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
#include "engine/kernels/bf16.h"
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

// Storage of at least `count` elements starting on a 64-byte boundary.
template <typename T>
T* Aligned64(std::vector<T>* v, int64_t count) {
  constexpr int64_t kPad = 64 / sizeof(T);
  if (static_cast<int64_t>(v->size()) < count + kPad) v->resize(count + kPad);
  const auto address = reinterpret_cast<uintptr_t>(v->data());
  return v->data() + ((64 - address % 64) % 64) / sizeof(T);
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

// x rows [0, rows) rounded to BF16 into scratch->x_bf16 [rows, k], in the
// weight's stored column order (gathered by the act-order map).
void RoundX(const HostWeight& w, const float* x, int rows, HostLinearScratch* s) {
  const int64_t k = w.k;
  s->x_bf16.resize(rows * k);
  for (int r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      s->x_bf16[r * k + c] = FloatToBf16(x[r * k + (w.columns == nullptr ? c : w.columns[c])]);
    }
  }
}

// The rounded x in the 4-bit kernels' layout (host_linear_kernels.h), and its
// sums over each group (in column order, fp32) where the weight has offsets.
void LayOutInt4X(const HostWeight& w, int rows, host_linear::XLayout layout, HostLinearScratch* s,
                 Int4Args* a) {
  const int64_t k = w.k, k_tiles = k / kInt4TileCols, groups = k / w.group;
  const uint16_t* xb = s->x_bf16.data();
  auto at = [&](int r, int64_t kt, int d, int j) {  // d = 4 t + i: column 16 i + 4 t + j
    return xb[r * k + kt * kInt4TileCols + 16 * (d % 4) + 4 * (d / 4) + j];
  };
  if (layout == host_linear::XLayout::kF32Lanes) {
    float* lanes = Aligned64(&s->x_lanes, k * rows);
    for (int64_t kt = 0; kt < k_tiles; ++kt) {
      for (int j = 0; j < 4; ++j) {
        for (int r = 0; r < rows; ++r) {
          float* v = lanes + ((kt * 4 + j) * rows + r) * kLanes;
          for (int d = 0; d < kLanes; ++d) v[d] = Bf16ToFloat(at(r, kt, d, j));
        }
      }
    }
    a->x_lanes = lanes;
  } else {
    uint32_t* pairs = Aligned64(&s->x_pairs, k / 2 * rows);
    for (int64_t kt = 0; kt < k_tiles; ++kt) {
      for (int p = 0; p < 2; ++p) {
        for (int r = 0; r < rows; ++r) {
          uint32_t* v = pairs + ((kt * 2 + p) * rows + r) * kLanes;
          for (int d = 0; d < kLanes; ++d) {
            v[d] = at(r, kt, d, 2 * p) | static_cast<uint32_t>(at(r, kt, d, 2 * p + 1)) << 16;
          }
        }
      }
    }
    a->x_pairs = pairs;
  }
  if (w.offset_kind == Int4Offsets::kSymmetric) return;
  s->x_sums.resize(rows * groups);
  for (int r = 0; r < rows; ++r) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      float sum = 0.0f;
      for (int64_t c = gi * w.group; c < (gi + 1) * w.group; ++c) sum += Bf16ToFloat(xb[r * k + c]);
      s->x_sums[r * groups + gi] = sum;
    }
  }
  a->x_sums = s->x_sums.data();
}

// The rounded x in BF16 lanes: per 32 columns an even and an odd vector.
void LayOutBf16X(const HostWeight& w, int rows, HostLinearScratch* s, Bf16Args* a) {
  const int64_t k = w.k, runs = (k + host_linear::kBf16RunCols - 1) / host_linear::kBf16RunCols;
  float* lanes = Aligned64(&s->x_lanes, runs * 2 * rows * kLanes);
  for (int64_t c = 0; c < runs; ++c) {
    for (int p = 0; p < 2; ++p) {
      for (int r = 0; r < rows; ++r) {
        float* v = lanes + ((c * 2 + p) * rows + r) * kLanes;
        for (int d = 0; d < kLanes; ++d) {
          const int64_t col = c * host_linear::kBf16RunCols + 2 * d + p;
          v[d] = col < k ? Bf16ToFloat(s->x_bf16[r * k + col]) : 0.0f;
        }
      }
    }
  }
  a->x_lanes = lanes;
}

const host_linear::Kernels& KernelsFor(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512Bf16:
      return host_linear::Avx512Bf16Kernels();
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
      RoundX(w, x, rows, scratch);
      LayOutInt4X(w, rows, kernels.int4_x, scratch, &a);
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
      RoundX(w, x, rows, scratch);
      LayOutBf16X(w, rows, scratch, &a);
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
