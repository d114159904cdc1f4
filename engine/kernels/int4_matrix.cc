// Int4Matrix, the packer and the round-to-nearest quantizer (see
// int4_matrix.h). Tested by tests/engine/kernels/int4_matrix_test.cc.
#include "engine/kernels/int4_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/common/fp16.h"
#include "engine/common/status_macros.h"

namespace onecard::engine {
namespace {

absl::Status ShapeError(absl::string_view name, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("int4 weight ", name, ": ", what));
}

void SetHalf(std::vector<uint32_t>* words, const Int4ScalePos& pos, uint16_t bits) {
  uint32_t& w = (*words)[pos.word];
  const int shift = 16 * pos.half;
  w = (w & ~(0xFFFFu << shift)) | (static_cast<uint32_t>(bits) << shift);
}

uint16_t GetHalf(const std::vector<uint32_t>& words, const Int4ScalePos& pos) {
  return static_cast<uint16_t>(words[pos.word] >> (16 * pos.half));
}

// `columns` is a permutation of 0..k-1.
absl::Status ValidateColumns(const std::vector<int32_t>& columns, int64_t k,
                             absl::string_view name) {
  if (static_cast<int64_t>(columns.size()) != k) {
    return ShapeError(name, absl::StrCat("columns has ", columns.size(), ", expected ", k));
  }
  std::vector<bool> seen(k, false);
  for (int32_t c : columns) {
    if (c < 0 || c >= k || seen[c]) {
      return ShapeError(name, absl::StrCat("columns is not a permutation of 0..", k - 1));
    }
    seen[c] = true;
  }
  return absl::OkStatus();
}

}  // namespace

float Int4Value(Int4Offsets offsets, uint8_t q, uint16_t scale_bits, uint16_t offset_bits) {
  const float s = HalfToFloat(scale_bits);
  switch (offsets) {
    case Int4Offsets::kSymmetric:
      return s * static_cast<float>(static_cast<int>(q) - 8);
    case Int4Offsets::kZero:
      return s * static_cast<float>(static_cast<int>(q) - static_cast<int16_t>(offset_bits));
    case Int4Offsets::kFloat:
      return s * static_cast<float>(q) + HalfToFloat(offset_bits);
  }
  return 0.0f;
}

absl::Status ValidateInt4Groups(int64_t n, int64_t k, int32_t group, Int4Offsets offsets,
                                std::span<const uint16_t> offset, absl::string_view name) {
  if (n <= 0 || n % kInt4TileRows != 0) {
    return ShapeError(
        name, absl::StrCat("rows (n = ", n, ") must be a positive multiple of ", kInt4TileRows));
  }
  if (k <= 0 || k % kInt4TileCols != 0) {
    return ShapeError(
        name, absl::StrCat("columns (k = ", k, ") must be a positive multiple of ", kInt4TileCols));
  }
  if (group < kInt4MinGroup || group % kInt4MinGroup != 0 || k % group != 0) {
    return ShapeError(name, absl::StrCat("group size ", group, " must be a multiple of ",
                                         kInt4MinGroup, " dividing k = ", k));
  }
  const int64_t offsets_expected = offsets == Int4Offsets::kSymmetric ? 0 : n * (k / group);
  if (static_cast<int64_t>(offset.size()) != offsets_expected) {
    return ShapeError(name,
                      absl::StrCat("offsets has ", offset.size(), ", expected ", offsets_expected));
  }
  if (offsets != Int4Offsets::kZero) return absl::OkStatus();
  for (size_t i = 0; i < offset.size(); ++i) {
    const int16_t z = static_cast<int16_t>(offset[i]);
    if (z < 0 || z > 127) {
      return ShapeError(name,
                        absl::StrCat("zero point ", z, " of group ", i, " is outside 0..127"));
    }
  }
  return absl::OkStatus();
}

absl::Status Int4Matrix::Validate(absl::string_view name) const {
  RETURN_IF_ERROR(ValidateInt4Groups(n, k, group, offsets, offset, name));
  if (static_cast<int64_t>(q.size()) != n * k) {
    return ShapeError(name, absl::StrCat("q has ", q.size(), " codes, expected ", n * k));
  }
  if (static_cast<int64_t>(scales.size()) != n * num_groups()) {
    return ShapeError(name,
                      absl::StrCat("scales has ", scales.size(), ", expected ", n * num_groups()));
  }
  // Eight codes a step (a load's codes are hundreds of MB); the first bad
  // one is then found one by one.
  uint64_t high = 0;
  size_t i = 0;
  for (; i + 8 <= q.size(); i += 8) {
    uint64_t eight;
    std::memcpy(&eight, q.data() + i, 8);
    high |= eight & 0xF0F0F0F0F0F0F0F0ull;
  }
  for (; i < q.size(); ++i) high |= q[i] & 0xF0;
  if (high != 0) {
    for (size_t j = 0; j < q.size(); ++j) {
      if (q[j] > 15) return ShapeError(name, absl::StrCat("code ", int{q[j]}, " at ", j, " > 15"));
    }
  }
  if (!columns.empty()) RETURN_IF_ERROR(ValidateColumns(columns, k, name));
  return absl::OkStatus();
}

float Int4Matrix::Value(int64_t r, int64_t c) const {
  const int64_t gi = r * num_groups() + c / group;
  return Int4Value(offsets, q[r * k + c], scales[gi],
                   offsets == Int4Offsets::kSymmetric ? uint16_t{0} : offset[gi]);
}

std::vector<float> DequantizeInt4(const Int4Matrix& m) {
  std::vector<float> w(m.n * m.k);
  for (int64_t r = 0; r < m.n; ++r) {
    for (int64_t j = 0; j < m.k; ++j) {
      const int64_t c = m.columns.empty() ? j : m.columns[j];
      w[r * m.k + c] = m.Value(r, j);
    }
  }
  return w;
}

absl::Status ConvertInt4Offsets(Int4Matrix* m, Int4Offsets to, absl::string_view name) {
  if (m->offsets == to) return absl::OkStatus();
  const int64_t groups = static_cast<int64_t>(m->scales.size());
  std::vector<uint16_t> offset(groups);
  for (int64_t i = 0; i < groups; ++i) {
    const float s = HalfToFloat(m->scales[i]);
    const int z = m->offsets == Int4Offsets::kZero ? static_cast<int16_t>(m->offset[i]) : 8;
    if (to == Int4Offsets::kZero && m->offsets == Int4Offsets::kSymmetric) {
      offset[i] = 8;
      continue;
    }
    if (to != Int4Offsets::kFloat || m->offsets == Int4Offsets::kFloat) {
      return ShapeError(name, "offsets can only become zero points (from symmetric) or mins");
    }
    offset[i] = FloatToHalf(-static_cast<float>(z) * s);
    if (HalfToFloat(offset[i]) != -static_cast<float>(z) * s) {
      return ShapeError(name, absl::StrCat("group ", i, ": min -", z, " * ", s,
                                           " is not exact in fp16; the offsets cannot be mixed"));
    }
  }
  m->offset = std::move(offset);
  m->offsets = to;
  return absl::OkStatus();
}

Int4Packed MakeInt4Packed(int64_t n, int64_t k, int32_t group, Int4Offsets offsets) {
  Int4Packed p;
  p.codes.assign(Int4CodeBytes(n, k), 0);
  p.scales.assign(Int4ScaleBytes(n, k, group) / 4, 0);
  p.offsets.assign(Int4OffsetBytes(n, k, group, offsets) / 4, 0);
  return p;
}

void ResizeInt4Packed(Int4Packed* p, int64_t n, int64_t k, int32_t group, Int4Offsets offsets) {
  p->codes.resize(Int4CodeBytes(n, k));
  p->scales.resize(Int4ScaleBytes(n, k, group) / 4);
  p->offsets.resize(Int4OffsetBytes(n, k, group, offsets) / 4);
}

namespace {

// Byte of column col (of a 64-column k tile) within its row's 64 bytes of a
// tile, as Int4CodePosition lays them out: lane 4 gr + t holds bytes
// lane * 16 + word * 4 + nibble / 2, and a row's nibbles are all in the low
// (row < 8) or all in the high (row >= 8) half of their bytes.
struct ColumnBytes {
  uint8_t offset[kInt4TileCols];
  constexpr ColumnBytes() : offset() {
    for (int col = 0; col < kInt4TileCols; ++col) {
      const int word = col / 16, t = (col % 16) / 4, j = col % 4;
      offset[col] = static_cast<uint8_t>(t * 16 + word * 4 + (4 * (j & 1) + 2 * (j >> 1)) / 2);
    }
  }
};
constexpr ColumnBytes kColumnBytes;

// Rows [begin, end) of src into their destination rows (PackInt4Rows).
void PackRows(const Int4Matrix& src, std::span<const int64_t> dest_rows, int64_t n_dst,
              int64_t begin, int64_t end, Int4Packed* dst) {
  const int64_t groups = src.num_groups(), k_tiles = src.k / kInt4TileCols;
  const int64_t n_tiles = n_dst / kInt4TileRows;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t d = dest_rows[r];
    const int row = static_cast<int>(d % kInt4TileRows);
    const int gr = row % 8, shift = 4 * (row / 8);
    const uint8_t keep = static_cast<uint8_t>(~(0xF << shift));
    const uint8_t* q = src.q.data() + r * src.k;
    for (int64_t kt = 0; kt < k_tiles; ++kt) {
      uint8_t* bytes = dst->codes.data() +
                       Int4TileIndex(d / kInt4TileRows, kt, k_tiles, n_tiles) * kInt4TileBytes +
                       gr * 64;
      const uint8_t* qt = q + kt * kInt4TileCols;
      for (int col = 0; col < kInt4TileCols; ++col) {
        uint8_t& b = bytes[kColumnBytes.offset[col]];
        b = static_cast<uint8_t>((b & keep) | ((qt[col] & 0xF) << shift));
      }
    }
    for (int64_t gi = 0; gi < groups; ++gi) {
      const Int4ScalePos pos = Int4ScalePosition(d, gi, groups, n_dst);
      SetHalf(&dst->scales, pos, src.scales[r * groups + gi]);
      if (src.offsets != Int4Offsets::kSymmetric) {
        SetHalf(&dst->offsets, pos, src.offset[r * groups + gi]);
      }
    }
  }
}

}  // namespace

absl::Status CheckInt4Destination(const Int4Packed& dst, int64_t n_dst, int64_t k, int32_t group,
                                  Int4Offsets offsets, absl::string_view caller) {
  if (k % kInt4TileCols != 0 || n_dst % kInt4TileRows != 0) {
    return absl::InvalidArgumentError(absl::StrCat(caller, ": ", n_dst, " x ", k,
                                                   " is not whole tiles of ", kInt4TileRows, " x ",
                                                   kInt4TileCols));
  }
  if (static_cast<int64_t>(dst.codes.size()) != Int4CodeBytes(n_dst, k) ||
      static_cast<int64_t>(dst.scales.size()) * 4 != Int4ScaleBytes(n_dst, k, group) ||
      static_cast<int64_t>(dst.offsets.size()) * 4 != Int4OffsetBytes(n_dst, k, group, offsets)) {
    return absl::InvalidArgumentError(absl::StrCat(caller, ": the destination is not ", n_dst,
                                                   " x ", k, " group ", group,
                                                   " with these offsets"));
  }
  return absl::OkStatus();
}

absl::Status PackInt4Rows(const Int4Matrix& src, std::span<const int64_t> dest_rows, int64_t n_dst,
                          Int4Packed* dst, ThreadPool* pool) {
  if (static_cast<int64_t>(dest_rows.size()) != src.n) {
    return absl::InvalidArgumentError(
        absl::StrCat("PackInt4Rows: ", dest_rows.size(), " destination rows for ", src.n));
  }
  RETURN_IF_ERROR(CheckInt4Destination(*dst, n_dst, src.k, src.group, src.offsets, "PackInt4Rows"));
  bool increasing = true;
  for (int64_t r = 0; r < src.n; ++r) {
    const int64_t d = dest_rows[r];
    if (d < 0 || d >= n_dst) {
      return absl::InvalidArgumentError(
          absl::StrCat("PackInt4Rows: row ", r, " goes to ", d, ", outside [0, ", n_dst, ")"));
    }
    increasing = increasing && (r == 0 || d > dest_rows[r - 1]);
  }
  // Blocks of 64 rows in parallel only where no tile is shared between two
  // blocks (a tile's bytes hold two rows' nibbles: rows g and g + 8).
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (src.n + kBlock - 1) / kBlock;
  bool disjoint = increasing && pool != nullptr && pool->num_threads() > 1 && blocks > 1;
  for (int64_t b = 1; disjoint && b < blocks; ++b) {
    disjoint = dest_rows[b * kBlock - 1] / kInt4TileRows != dest_rows[b * kBlock] / kInt4TileRows;
  }
  if (!disjoint) {
    PackRows(src, dest_rows, n_dst, 0, src.n, dst);
    return absl::OkStatus();
  }
  pool->ParallelFor(blocks, [&](int64_t b0, int64_t b1) {
    PackRows(src, dest_rows, n_dst, b0 * kBlock, std::min(src.n, b1 * kBlock), dst);
  });
  return absl::OkStatus();
}

Int4Matrix UnpackInt4(const Int4Packed& p, int64_t n, int64_t k, int32_t group,
                      Int4Offsets offsets) {
  Int4Matrix m;
  m.n = n;
  m.k = k;
  m.group = group;
  m.offsets = offsets;
  const int64_t groups = m.num_groups();
  m.q.resize(n * k);
  m.scales.resize(n * groups);
  if (offsets != Int4Offsets::kSymmetric) m.offset.resize(n * groups);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      const Int4CodePos pos = Int4CodePosition(r, c, k, n);
      m.q[r * k + c] = (p.codes[pos.byte] >> pos.shift) & 0xF;
    }
    for (int64_t gi = 0; gi < groups; ++gi) {
      const Int4ScalePos pos = Int4ScalePosition(r, gi, groups, n);
      m.scales[r * groups + gi] = GetHalf(p.scales, pos);
      if (offsets != Int4Offsets::kSymmetric) m.offset[r * groups + gi] = GetHalf(p.offsets, pos);
    }
  }
  return m;
}

std::vector<int64_t> ConcatRows(int64_t n, int64_t offset) {
  std::vector<int64_t> rows(n);
  for (int64_t r = 0; r < n; ++r) rows[r] = offset + r;
  return rows;
}

std::vector<int64_t> InterleavedGateUpRows(int64_t n, int part) {
  std::vector<int64_t> rows(n);
  for (int64_t r = 0; r < n; ++r) rows[r] = (r / 8) * 16 + 8 * part + r % 8;
  return rows;
}

absl::StatusOr<Int4Matrix> QuantizeInt4Rtn(std::span<const float> w, int64_t n, int64_t k,
                                           int32_t group, Int4Offsets offsets) {
  if (offsets == Int4Offsets::kFloat) {
    return absl::InvalidArgumentError("QuantizeInt4Rtn: offsets must be symmetric or zero points");
  }
  if (static_cast<int64_t>(w.size()) != n * k || group <= 0 || k % group != 0) {
    return absl::InvalidArgumentError(absl::StrCat("QuantizeInt4Rtn: ", w.size(), " values for ", n,
                                                   " x ", k, ", group ", group));
  }
  Int4Matrix m;
  m.n = n;
  m.k = k;
  m.group = group;
  m.offsets = offsets;
  const int64_t groups = k / group;
  m.q.resize(n * k);
  m.scales.resize(n * groups);
  if (offsets == Int4Offsets::kZero) m.offset.resize(n * groups);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      const float* v = w.data() + r * k + gi * group;
      float lo = 0.0f, hi = 0.0f;
      for (int32_t i = 0; i < group; ++i) lo = std::min(lo, v[i]), hi = std::max(hi, v[i]);
      float range = offsets == Int4Offsets::kSymmetric ? 2.0f * std::max(-lo, hi) : hi - lo;
      uint16_t s_bits = FloatToHalf(range > 0.0f ? range / 15.0f : 1.0f);
      float s = HalfToFloat(s_bits);
      if (s == 0.0f) s_bits = FloatToHalf(6.1035156e-05f), s = HalfToFloat(s_bits);
      int zero = 8;
      if (offsets == Int4Offsets::kZero) {
        zero = std::clamp(static_cast<int>(std::nearbyint(-lo / s)), 0, 15);
        m.offset[r * groups + gi] = static_cast<uint16_t>(zero);
      }
      m.scales[r * groups + gi] = s_bits;
      for (int32_t i = 0; i < group; ++i) {
        const int q = static_cast<int>(std::nearbyint(v[i] / s)) + zero;
        m.q[r * k + gi * group + i] = static_cast<uint8_t>(std::clamp(q, 0, 15));
      }
    }
  }
  return m;
}

}  // namespace onecard::engine
