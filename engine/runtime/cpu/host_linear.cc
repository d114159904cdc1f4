// CheckHostWeight and HostLinearForward (see host_linear.h): x rounded,
// gathered by the column map and laid out in the kernels' lanes once a call
// (threads over its k tiles; the 4-bit groups' sums of x from the kernels'
// half sums), then threads over 16-row tiles of the weight.
// Tested by tests/engine/runtime/cpu/host_linear_test.cc.
#include "engine/runtime/cpu/host_linear.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"
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

absl::Status Unsupported(absl::string_view name, absl::string_view what) {
  return absl::UnimplementedError(absl::StrCat("host weight ", name, ": ", what));
}

absl::Status CheckInt4(const HostWeight& w, absl::string_view name) {
  if (w.n <= 0 || w.n % kInt4TileRows != 0 || w.k <= 0 || w.k % kInt4TileCols != 0) {
    return Unsupported(
        name, absl::StrCat("4-bit shape [", w.n, ", ", w.k, "] is not supported; supported: n % ",
                           kInt4TileRows, " == 0 and k % ", kInt4TileCols, " == 0, both positive"));
  }
  if (!HostLinearTakesGroup(w.group) || w.k % w.group != 0) {
    return Unsupported(
        name, absl::StrCat("group size ", w.group, " is not supported; supported: ", kInt4MinGroup,
                           ", or a multiple of ", kInt4TileCols, ", dividing k = ", w.k));
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

// X[r][gi]: the half sums of group gi, in order.
void GroupSums(const HostWeight& w, int rows, const float* half_sums, float* sums) {
  const int64_t halves = w.k / 32, per_group = w.group / 32, groups = w.k / w.group;
  for (int r = 0; r < rows; ++r) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      const float* h = half_sums + r * halves + gi * per_group;
      float sum = h[0];
      for (int64_t i = 1; i < per_group; ++i) sum += h[i];
      sums[r * groups + gi] = sum;
    }
  }
}

// Lays out x for a 4-bit weight, in parallel over k tiles (a.x_lanes or
// a.x_pairs, and a.x_sums where the weight has offsets).
void PrepareInt4X(ThreadPool& pool, const HostWeight& w, const float* x, int rows,
                  const host_linear::Kernels& kernels, HostLinearScratch* s, Int4Args* a) {
  host_linear::XArgs xa{.x = x, .columns = w.columns, .k = w.k, .rows = rows};
  if (kernels.int4_layout == host_linear::XLayout::kF32Lanes) {
    a->x_lanes = xa.lanes = Aligned64(&s->x_lanes, w.k * rows);
  } else {
    a->x_pairs = xa.pairs = Aligned64(&s->x_pairs, w.k / 2 * rows);
  }
  const bool sums = w.offset_kind != Int4Offsets::kSymmetric;
  if (sums) xa.half_sums = Aligned64(&s->x_half_sums, w.k / 32 * rows);
  pool.ParallelFor(w.k / kInt4TileCols,
                   [&](int64_t begin, int64_t end) { kernels.int4_x(xa, begin, end); });
  if (!sums) return;
  s->x_sums.resize(rows * (w.k / w.group));
  GroupSums(w, rows, xa.half_sums, s->x_sums.data());
  a->x_sums = s->x_sums.data();
}

// Lays out x for a BF16 weight, in parallel over runs of 32 columns.
void PrepareBf16X(ThreadPool& pool, const HostWeight& w, const float* x, int rows,
                  const host_linear::Kernels& kernels, HostLinearScratch* s, Bf16Args* a) {
  const int64_t runs = (w.k + host_linear::kBf16RunCols - 1) / host_linear::kBf16RunCols;
  host_linear::XArgs xa{.x = x, .k = w.k, .rows = rows};
  if (kernels.bf16_layout == host_linear::XLayout::kF32Lanes) {
    a->x_lanes = xa.lanes = Aligned64(&s->x_lanes, runs * 2 * rows * kLanes);
  } else {
    a->x_pairs = xa.pairs = Aligned64(&s->x_pairs, runs * rows * kLanes);
  }
  pool.ParallelFor(runs, [&](int64_t begin, int64_t end) { kernels.bf16_x(xa, begin, end); });
}

const host_linear::Kernels& KernelsFor(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAmxBf16:
      return host_linear::AmxBf16Kernels();
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
      PrepareInt4X(pool, w, x, rows, kernels, scratch, &a);
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
      PrepareBf16X(pool, w, x, rows, kernels, scratch, &a);
      pool.ParallelFor(tiles, [&](int64_t begin, int64_t end) { kernels.bf16(a, begin, end); });
      return;
    }
  }
}

}  // namespace

bool HostLinearTakesGroup(int32_t group) {
  return group == kInt4MinGroup || (group > 0 && group % kInt4TileCols == 0);
}

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
  return Unsupported(name, absl::StrCat("format ", static_cast<int>(w.format),
                                        " is not supported; supported: BF16, 4-bit"));
}

void HostLinearForward(ThreadPool& pool, const HostWeight& w, const float* x, int64_t rows,
                       float* y, HostLinearScratch* scratch, CpuIsa isa) {
  assert(CpuSupports(isa) && "HostLinearForward: the processor does not run this isa");
  // One row of x against 4-bit codes: the AVX-512 BF16 kernels, which read the
  // codes faster there than the tile unit (host_linear.h; kAmxBf16 includes
  // AVX-512 BF16).
  if (isa == CpuIsa::kAmxBf16 && rows == 1 && w.format == HostWeight::Format::kInt4) {
    isa = CpuIsa::kAvx512Bf16;
  }
  host_linear::ForwardWith(pool, w, x, rows, y, scratch, KernelsFor(isa));
}

void host_linear::ForwardWith(ThreadPool& pool, const HostWeight& w, const float* x, int64_t rows,
                              float* y, HostLinearScratch* scratch, const Kernels& kernels) {
  assert(CheckHostWeight(w, "HostLinearForward").ok() && "HostLinearForward: a checked weight");
  for (int64_t r = 0; r < rows; r += kHostLinearMaxRows) {
    const int chunk = static_cast<int>(std::min<int64_t>(kHostLinearMaxRows, rows - r));
    ForwardChunk(pool, w, x + r * w.k, chunk, y + r * w.n, scratch, kernels);
  }
}

}  // namespace onecard::engine
