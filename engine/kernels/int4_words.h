// 4-bit codes as GPTQ stores them, eight to a 32-bit word along k
// (Int4WordMatrix, a view), and PackInt4WordRows, which puts the parts of a
// fused weight into the device layout of int4_layout.h with no Int4Matrix (a
// byte a code) in between: the bytes PackInt4Rows writes for the same codes,
// scales and offsets. Plain C++. Tested by
// tests/engine/kernels/int4_words_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_INT4_WORDS_H_
#define ONECARD_ENGINE_KERNELS_INT4_WORDS_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/common/thread_pool.h"
#include "engine/kernels/int4_layout.h"
#include "engine/kernels/int4_matrix.h"

namespace onecard::engine {

// W [n, k] with its codes stored eight to a 32-bit word along k: code
// (r, 8 w + i) in bits 4 i .. 4 i + 3 of word (r, w), little-endian (GPTQ's
// qweight [k / 8, n]: code_row_stride 1, code_word_stride n). The codes and
// the fp16 scales are views (of a mapped file: no alignment assumed), valid
// while their owner is; the offsets are held as Int4Matrix::offset holds
// them. A word's codes are 0..15 by construction: nothing per code needs
// validating.
struct Int4WordMatrix {
  int64_t n = 0;  // [n, k]
  int64_t k = 0;
  int32_t group = 0;  // columns a scale covers; k for one scale a row
  Int4Offsets offsets = Int4Offsets::kSymmetric;
  const uint8_t* codes = nullptr;  // word (r, w) at byte 4 (r code_row_stride + w code_word_stride)
  int64_t code_row_stride = 0;     // in words
  int64_t code_word_stride = 0;
  const uint8_t* scales = nullptr;  // fp16 bits of (r, group gi) at byte
  int64_t scale_row_stride = 0;     // 2 (r scale_row_stride + gi scale_group_stride)
  int64_t scale_group_stride = 0;
  std::vector<uint16_t> offset;  // [n, k / group] as Int4Matrix::offset; empty for kSymmetric
  int64_t num_groups() const { return group > 0 ? k / group : 0; }
  // Int4Matrix::Validate's checks but the per-code one, and the views set.
  absl::Status Validate(absl::string_view name) const;
};

// One part of a fused weight: its words, and the destination row of each of
// its rows (ConcatRows, InterleavedGateUpRows).
struct Int4WordPart {
  const Int4WordMatrix* words = nullptr;
  std::span<const int64_t> dest_rows;  // [words->n]
};

// Writes the parts' rows into their rows of `dst` (n_dst rows; the parts'
// k, group and offsets, which must agree), the same bytes as PackInt4Rows of
// each part's Int4Matrix in turn. A destination row no part maps to keeps
// its bytes; a row mapped twice, or outside [0, n_dst), is InvalidArgument.
// The work goes a destination row group (128 rows) at a time, in parallel
// over `pool` when there is one, whatever the maps: each destination byte is
// written once, by one thread.
absl::Status PackInt4WordRows(std::span<const Int4WordPart> parts, int64_t n_dst, Int4Packed* dst,
                              ThreadPool* pool = nullptr);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_INT4_WORDS_H_
