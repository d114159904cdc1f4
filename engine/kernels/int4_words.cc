// Int4WordMatrix and PackInt4WordRows (see int4_words.h): the destination is
// built tile by tile, each pair of rows gr and gr + 8 of a tile (the low and
// high halves of the same bytes) from one word of each at a time. Tested by
// tests/engine/kernels/int4_words_test.cc.
#include "engine/kernels/int4_words.h"

#include <cstring>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"

namespace onecard::engine {
namespace {

constexpr char kCaller[] = "PackInt4WordRows";

// The eight codes of a word (columns 8 a .. 8 a + 7 of a tile row) in the
// layout's byte order, each in the low half of a byte. A lane's byte b of a
// 16-column word holds column j with b = 2 (j & 1) + (j >> 1)
// (Int4CodePosition), so the nibbles go in the order 0, 2, 1, 3 | 4, 6, 5, 7:
// of each 16 bits, nibbles 0 and 2 stay where they are and 1 and 3 move up
// 12 bits. Bytes 0..3 belong at lane t = 2 (a % 2), bytes 4..7 at lane
// t + 1, both at word a / 2 of the lane.
inline uint64_t TileRowBytes(uint32_t word) {
  const uint64_t halves = (word & 0xFFFFull) | (uint64_t{word & 0xFFFF0000u} << 16);
  return (halves & 0x00000F0F00000F0Full) | ((halves & 0x0000F0F00000F0F0ull) << 12);
}

// Where destination row d comes from (part -1: no part), and where that
// row's words are.
struct RowSource {
  int32_t part = -1;
  int64_t row = 0;
  const uint8_t* words = nullptr;  // word (row, 0)
  int64_t word_bytes = 0;          // from word (row, w) to word (row, w + 1)
};

// The eight words of one source row at one k tile: word a at in + a stride
// (in null: no row).
struct WordRun {
  const uint8_t* in = nullptr;
  int64_t stride = 0;
  uint64_t Bytes(int a) const {
    uint32_t word;
    std::memcpy(&word, in + a * stride, 4);
    return TileRowBytes(word);
  }
};

// The words of s's row at k tile kt.
WordRun RunAt(const RowSource& s, int64_t kt) {
  if (s.words == nullptr) return {};
  return {s.words + kt * 8 * s.word_bytes, s.word_bytes};
}

// Stores the low 32 bits of `bits`, keeping the bits of the old value that
// `keep` selects.
inline void Put(uint8_t* at, uint64_t bits, uint32_t keep) {
  uint32_t v = static_cast<uint32_t>(bits);
  if (keep != 0) {
    uint32_t old;
    std::memcpy(&old, at, 4);
    v |= old & keep;
  }
  std::memcpy(at, &v, 4);
}

// Rows gr (lo, the low halves) and gr + 8 (hi) of a tile at one k tile: the
// 64 bytes at `out`. A missing row's halves keep their bits.
void PackRowPair(const WordRun& lo, const WordRun& hi, uint8_t* out) {
  if (lo.in != nullptr && hi.in != nullptr) {
    for (int a = 0; a < 8; ++a) {
      const uint64_t bytes = lo.Bytes(a) | (hi.Bytes(a) << 4);
      uint8_t* at = out + 32 * (a % 2) + 4 * (a / 2);
      Put(at, bytes, 0);
      Put(at + 16, bytes >> 32, 0);
    }
    return;
  }
  if (lo.in == nullptr && hi.in == nullptr) return;
  const WordRun& run = lo.in != nullptr ? lo : hi;
  const int shift = lo.in != nullptr ? 0 : 4;
  const uint32_t keep = ~(0x0F0F0F0Fu << shift);
  for (int a = 0; a < 8; ++a) {
    const uint64_t bytes = run.Bytes(a) << shift;
    uint8_t* at = out + 32 * (a % 2) + 4 * (a / 2);
    Put(at, bytes, keep);
    Put(at + 16, bytes >> 32, keep);
  }
}

// Sets the fp16 `bits` in its half of the scale (or offset) word at pos.
void PutHalf(std::vector<uint32_t>& words, const Int4ScalePos& pos, uint16_t bits) {
  uint32_t& word = words[pos.word];
  word =
      pos.half == 0 ? (word & 0xFFFF0000u) | bits : (word & 0x0000FFFFu) | (uint32_t{bits} << 16);
}

// The codes of destination row group rg at k tile kt: its tiles there are
// consecutive, 512 bytes each.
void PackRowGroupCodes(std::span<const Int4WordPart> parts, std::span<const RowSource> from,
                       int64_t n_dst, int64_t rg, int64_t kt, Int4Packed* dst) {
  const int64_t k_tiles = parts[0].words->k / kInt4TileCols, n_tiles = n_dst / kInt4TileRows;
  uint8_t* tile = dst->codes.data() + Int4TileIndex(8 * rg, kt, k_tiles, n_tiles) * kInt4TileBytes;
  for (int64_t t = 0; t < Int4GroupTiles(rg, n_tiles); ++t, tile += kInt4TileBytes) {
    const RowSource* rows = &from[(8 * rg + t) * kInt4TileRows];
    for (int gr = 0; gr < 8; ++gr) {
      PackRowPair(RunAt(rows[gr], kt), RunAt(rows[gr + 8], kt), tile + gr * 64);
    }
  }
}

// The scales and offsets of destination row group rg.
void PackRowGroupScales(std::span<const Int4WordPart> parts, std::span<const RowSource> from,
                        int64_t n_dst, int64_t rg, Int4Packed* dst) {
  const int64_t groups = parts[0].words->num_groups();
  const int64_t begin = 8 * rg * kInt4TileRows;
  const int64_t end = begin + Int4GroupTiles(rg, n_dst / kInt4TileRows) * kInt4TileRows;
  for (int64_t gi = 0; gi < groups; ++gi) {
    for (int64_t d = begin; d < end; ++d) {
      if (from[d].part < 0) continue;
      const Int4WordMatrix& w = *parts[from[d].part].words;
      const int64_t r = from[d].row;
      uint16_t scale;
      std::memcpy(&scale, w.scales + 2 * (r * w.scale_row_stride + gi * w.scale_group_stride), 2);
      const Int4ScalePos pos = Int4ScalePosition(d, gi, groups, n_dst);
      PutHalf(dst->scales, pos, scale);
      if (w.offsets != Int4Offsets::kSymmetric) {
        PutHalf(dst->offsets, pos, w.offset[r * groups + gi]);
      }
    }
  }
}

absl::Status PartError(size_t part, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(kCaller, ": part ", part, " ", what));
}

// The source of each destination row, the parts checked against each other
// and the destination.
absl::StatusOr<std::vector<RowSource>> RowSources(std::span<const Int4WordPart> parts,
                                                  int64_t n_dst, const Int4Packed& dst) {
  if (parts.empty()) return absl::InvalidArgumentError(absl::StrCat(kCaller, ": no parts"));
  const Int4WordMatrix& first = *parts[0].words;
  RETURN_IF_ERROR(CheckInt4Destination(dst, n_dst, first.k, first.group, first.offsets, kCaller));
  std::vector<RowSource> from(n_dst);
  for (size_t p = 0; p < parts.size(); ++p) {
    const Int4WordMatrix& w = *parts[p].words;
    if (w.k != first.k || w.group != first.group || w.offsets != first.offsets) {
      return PartError(
          p, absl::StrCat("is ", w.k, " wide in groups of ", w.group, "; part 0 is ", first.k,
                          " in groups of ", first.group, " (or its offsets differ)"));
    }
    if (w.codes == nullptr || w.scales == nullptr ||
        static_cast<int64_t>(w.offset.size()) !=
            (w.offsets == Int4Offsets::kSymmetric ? 0 : w.n * w.num_groups())) {
      return PartError(p, "has no codes, no scales or not one offset a scale");
    }
    if (static_cast<int64_t>(parts[p].dest_rows.size()) != w.n) {
      return PartError(
          p, absl::StrCat("has ", parts[p].dest_rows.size(), " destination rows for ", w.n));
    }
    for (int64_t r = 0; r < w.n; ++r) {
      const int64_t d = parts[p].dest_rows[r];
      if (d < 0 || d >= n_dst) {
        return PartError(p, absl::StrCat("row ", r, " goes to ", d, ", outside [0, ", n_dst, ")"));
      }
      if (from[d].part >= 0) {
        return PartError(p, absl::StrCat("row ", r, " goes to ", d, ", as part ", from[d].part,
                                         " row ", from[d].row, " does"));
      }
      from[d] = {static_cast<int32_t>(p), r, w.codes + 4 * r * w.code_row_stride,
                 4 * w.code_word_stride};
    }
  }
  return from;
}

}  // namespace

absl::Status Int4WordMatrix::Validate(absl::string_view name) const {
  RETURN_IF_ERROR(ValidateInt4Groups(n, k, group, offsets, offset, name));
  if (codes == nullptr || scales == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("int4 weight ", name, ": the codes or the scales are missing"));
  }
  return absl::OkStatus();
}

absl::Status PackInt4WordRows(std::span<const Int4WordPart> parts, int64_t n_dst, Int4Packed* dst,
                              ThreadPool* pool) {
  ASSIGN_OR_RETURN(const std::vector<RowSource> from, RowSources(parts, n_dst, *dst));
  const int64_t row_groups = (n_dst / kInt4TileRows + 7) / 8;
  const int64_t k_tiles = parts[0].words->k / kInt4TileCols;
  // A k tile of every row group in turn: each of the tile's 8 word rows is
  // then read in order (GPTQ: row after row), which the hardware prefetches.
  const auto pack = [&](int64_t begin, int64_t end) {
    for (int64_t kt = 0; kt < k_tiles; ++kt) {
      for (int64_t rg = begin; rg < end; ++rg) PackRowGroupCodes(parts, from, n_dst, rg, kt, dst);
    }
    for (int64_t rg = begin; rg < end; ++rg) PackRowGroupScales(parts, from, n_dst, rg, dst);
  };
  if (pool != nullptr && pool->num_threads() > 1) {
    pool->ParallelFor(row_groups, pack);
  } else {
    pack(0, row_groups);
  }
  return absl::OkStatus();
}

}  // namespace onecard::engine
