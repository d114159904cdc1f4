// HF 4-bit projections: GPTQ (AutoGPTQ / GPTQModel), AWQ (AutoAWQ GEMM) and
// compressed-tensors pack-quantized, found by their tensor names where a
// module's ".weight" is absent, and read into an Int4Matrix without
// re-rounding. For module m, W [n, k] (n outputs, k inputs), groups of g
// columns, G = k / g:
//   GPTQ  m.qweight I32 [k / 8, n]: code of (row r, column c) in bits
//         4 (c % 8) of word [c / 8][r]; m.qzeros I32 [G, n / 8]: zero point of
//         (r, group) in bits 4 (r % 8) of [group][r / 8], v1 files ("gptq")
//         storing z - 1 (read as GPTQModel loads them: each int32 word plus
//         0x11111111); m.scales [G, n]; m.g_idx I32 [k] (optional).
//   AWQ   m.qweight I32 [k, n / 8] and m.qzeros I32 [G, n / 8] with row 8 w + j
//         of word w in nibble {0, 4, 1, 5, 2, 6, 3, 7}[j] (AutoAWQ's order);
//         m.scales [G, n].
//   compressed-tensors  m.weight_packed I32 [n, ceil(k / 8)]: column c in
//         bits 4 (c % 8) of [r][c / 8], code q = x_q + 8; m.weight_scale
//         [n, G]; asymmetric: m.weight_zero_point I32 [ceil(n / 8), G] packed
//         along rows (z = zp + 8); m.weight_shape I64 [2] = [n, k];
//         m.weight_g_idx I32 [k] (optional; a -1 in it means none).
// Values: s (q - 8) (GPTQ sym, compressed-tensors symmetric: Int4Offsets
// kSymmetric) or s (q - z) (kZero). Scales are F16, or BF16 / F32 values
// exact in fp16. A g_idx other than c / g (GPTQ desc_act) puts columns in
// groups out of order: the matrix's columns are sorted by group once (a
// stable sort; Int4Matrix::columns) so that every group is g contiguous
// columns. g_idx values outside [0, G), groups of other than g columns, a GPTQ
// sym zero point other than 8, and every dtype, shape or size mismatch are
// InvalidArgument naming the file, the tensor and the field.
// GPTQ's codes can also be taken as stored, eight to a word
// (ReadHfInt4Words), for the packer of int4_words.h.
// Tested by tests/engine/model/hf_int4_test.cc (against the upstream
// dequantizations in tests/golden/hf_int4/), hf_int4_bad_input_test.cc and
// hf_int4_words_test.cc.
#ifndef ONECARD_ENGINE_MODEL_HF_INT4_H_
#define ONECARD_ENGINE_MODEL_HF_INT4_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/kernels/int4_matrix.h"
#include "engine/kernels/int4_words.h"
#include "engine/model/checkpoint.h"

namespace onecard::engine {

// One module's 4-bit tensors, dtypes and shapes checked.
struct HfInt4Tensors {
  HfQuantMethod method = HfQuantMethod::kNone;
  std::string module;                  // "model.layers.0.self_attn.q_proj"
  const TensorView* packed = nullptr;  // qweight / weight_packed
  const TensorView* scales = nullptr;  // scales / weight_scale
  const TensorView* zeros = nullptr;   // qzeros / weight_zero_point; null when symmetric
  const TensorView* g_idx = nullptr;   // g_idx / weight_g_idx, or null
  int64_t n = 0;                       // [n, k]
  int64_t k = 0;
  int32_t group = 0;  // columns a scale covers (k: one a row)
  bool symmetric = false;
  bool zeros_minus_one = false;  // GPTQ v1
  Int4Offsets offsets() const { return symmetric ? Int4Offsets::kSymmetric : Int4Offsets::kZero; }
};

// Module `module`'s 4-bit tensors for W [n, k]; nullopt when the checkpoint
// has none for it (no qweight / weight_packed).
absl::StatusOr<std::optional<HfInt4Tensors>> FindHfInt4(const Checkpoint& checkpoint,
                                                        const std::string& module, int64_t n,
                                                        int64_t k);

// The codes, scales and zero points exactly as stored, columns sorted by
// group where g_idx asks for it.
// With a pool, GPTQ codes are unpacked in parallel (the same values).
absl::StatusOr<Int4Matrix> ReadHfInt4(const HfInt4Tensors& tensors, ThreadPool* pool = nullptr);

// GPTQ's codes and fp16 scales as stored (views of the mapped tensors,
// valid while the checkpoint is open) and its zero points read: what
// PackInt4WordRows puts into the device layout with no Int4Matrix in
// between, the bytes PackInt4Rows writes for ReadHfInt4's matrix. nullopt
// where the stored form is not that (AWQ, compressed-tensors, act order,
// BF16 / F32 scales): ReadHfInt4 reads those. Shapes, sizes, g_idx and the
// zero points are checked as ReadHfInt4 checks them, with the same errors.
absl::StatusOr<std::optional<Int4WordMatrix>> ReadHfInt4Words(const HfInt4Tensors& tensors);

// Whether ReadHfInt4 reorders the columns (reads g_idx only).
absl::StatusOr<bool> HfInt4ReordersColumns(const HfInt4Tensors& tensors);
// The order ReadHfInt4 gives the columns (Int4Matrix::columns; empty: as
// stored), from g_idx only.
absl::StatusOr<std::vector<int32_t>> HfInt4ColumnOrder(const HfInt4Tensors& tensors);

// Where tensor `name` belongs in a 4-bit module ("...q_proj.qzeros" of a GPTQ
// checkpoint: kGptq, module "...q_proj", field "qzeros"); nullopt for a
// tensor that is not part of one.
struct HfInt4Part {
  HfQuantMethod method = HfQuantMethod::kNone;
  std::string module;
  std::string field;
};
std::optional<HfInt4Part> HfInt4PartOf(const Checkpoint& checkpoint, const std::string& name);

// The format of `module`'s 4-bit tensors as the config gives it: "gptq int4
// g128", "gptq int4 g32 zero desc_act", "awq int4 g128 zero",
// "compressed-tensors int4 channel" (one scale a row).
std::string HfInt4FormatName(const HfQuantConfig& config, const std::string& module);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_HF_INT4_H_
