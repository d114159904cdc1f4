// 4-bit weights on the host: Int4Matrix, the logical form every source turns
// into (GGUF Q4_0 / Q4_1 / Q4_K blocks, round-to-nearest quantization, and the HF
// 4-bit formats), and Int4Packed, the device layout of int4_layout.h that the
// CUDA kernels read. Plain C++. Tested by tests/engine/kernels/int4_matrix_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_INT4_MATRIX_H_
#define ONECARD_ENGINE_KERNELS_INT4_MATRIX_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/common/thread_pool.h"
#include "engine/kernels/int4_layout.h"

namespace onecard::engine {

// W [n, k] as codes, per-group scales and offsets (int4_layout.h gives the
// value of each kind of offset).
struct Int4Matrix {
  int64_t n = 0;
  int64_t k = 0;
  int32_t group = 0;  // columns a scale covers; k for one scale a row
  Int4Offsets offsets = Int4Offsets::kSymmetric;
  std::vector<uint8_t> q;        // [n, k] codes, 0..15
  std::vector<uint16_t> scales;  // [n, k / group] fp16 bits
  std::vector<uint16_t> offset;  // [n, k / group]: int16 z (kZero), fp16 m (kFloat);
                                 // empty for kSymmetric
  // [k] or empty (the source's order): stored column j is the source's
  // column columns[j] (GPTQ act order, sorted so that groups are whole). The
  // product W x is then (stored W) x' with x'[j] = x[columns[j]].
  std::vector<int32_t> columns;
  int64_t num_groups() const { return group > 0 ? k / group : 0; }
  // InvalidArgument naming `name` and the field when the shape is not one
  // the kernels take (int4_layout.h) or the arrays do not match it.
  absl::Status Validate(absl::string_view name) const;
  // The fp32 value of stored W[r][c] (the spec: s * (q - 8), s * (q - z),
  // s * q + m); exact: an fp16 times a small integer fits fp32's mantissa.
  float Value(int64_t r, int64_t c) const;
};

// The checks of Int4Matrix::Validate on the shape and the offsets: n, k and
// the group size as the kernels take them (int4_layout.h), one offset a scale
// (none for kSymmetric), zero points in 0..127. InvalidArgument naming `name`.
absl::Status ValidateInt4Groups(int64_t n, int64_t k, int32_t group, Int4Offsets offsets,
                                std::span<const uint16_t> offset, absl::string_view name);

// W [n, k] in fp32, row-major, in the source's column order (`columns`
// undone).
std::vector<float> DequantizeInt4(const Int4Matrix& m);

// The fp32 value of code q with scale and offset bits of the given kind.
float Int4Value(Int4Offsets offsets, uint8_t q, uint16_t scale_bits, uint16_t offset_bits);

// Rewrites m's offsets as the kind `to` where that is exact: symmetric as
// zero points 8 or mins -8 s; zero points as mins -z s where that fp16 is
// exact. Anything else is InvalidArgument naming `name` (and is never
// rounded).
absl::Status ConvertInt4Offsets(Int4Matrix* m, Int4Offsets to, absl::string_view name);

// The device layout: codes, scale words, offset words (empty for kSymmetric).
struct Int4Packed {
  std::vector<uint8_t> codes;     // Int4CodeBytes(n, k)
  std::vector<uint32_t> scales;   // Int4ScaleBytes / 4
  std::vector<uint32_t> offsets;  // Int4OffsetBytes / 4
};

// An empty packed weight of n rows (codes and scales zero).
Int4Packed MakeInt4Packed(int64_t n, int64_t k, int32_t group, Int4Offsets offsets);

// Whether dst is sized as the packed form of n_dst rows of k columns in
// these groups and offsets, in whole tiles; InvalidArgument naming `caller`
// otherwise.
absl::Status CheckInt4Destination(const Int4Packed& dst, int64_t n_dst, int64_t k, int32_t group,
                                  Int4Offsets offsets, absl::string_view caller);

// Sizes p as MakeInt4Packed(n, k, group, offsets) does, keeping the bytes it
// holds (zero where it grows): a loader's staging buffer, reused layer after
// layer, into which the packers then write every byte of whole rows.
void ResizeInt4Packed(Int4Packed* p, int64_t n, int64_t k, int32_t group, Int4Offsets offsets);

// Writes src's row r into row dest_rows[r] of `dst` (n_dst rows, src's k,
// group and offsets). Fused weights are packed part by part this way (QKV
// rows one after the other; gate and up interleaved by 8 rows). With a pool,
// blocks of 64 source rows go in parallel when no two blocks write into one
// 16-row tile (dest_rows increasing, blocks ending at tile bounds: both the
// fused maps); the bytes are the same either way.
absl::Status PackInt4Rows(const Int4Matrix& src, std::span<const int64_t> dest_rows, int64_t n_dst,
                          Int4Packed* dst, ThreadPool* pool = nullptr);

// The logical form back from the device layout (for references and tests).
Int4Matrix UnpackInt4(const Int4Packed& packed, int64_t n, int64_t k, int32_t group,
                      Int4Offsets offsets);

// Row maps of the fused weights: rows [offset, offset + n) for a part of a
// concatenation; gate (part 0) or up (part 1) of an interleaved gate/up
// weight, 8 rows of each in turn (fused row 16 b + j: gate row 8 b + j for
// j < 8, up row 8 b + j - 8 otherwise).
std::vector<int64_t> ConcatRows(int64_t n, int64_t offset);
std::vector<int64_t> InterleavedGateUpRows(int64_t n, int part);

// Round-to-nearest quantization of fp32 W [n, k] with groups of `group`, as
// GPTQ's quantizer rounds (its `Quantizer.find_params` without the search):
// kSymmetric: s = 2 max|w| / 15, q = clamp(round(w / s) + 8, 0, 15);
// kZero: s = (max(w, 0) - min(w, 0)) / 15, z = round(-min(w, 0) / s),
// q = clamp(round(w / s) + z, 0, 15). s is rounded to fp16 first and q is
// computed with the rounded s. An all-zero group gets s = 1. kFloat is not a
// quantizer's output: InvalidArgument.
absl::StatusOr<Int4Matrix> QuantizeInt4Rtn(std::span<const float> w, int64_t n, int64_t k,
                                           int32_t group, Int4Offsets offsets);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_INT4_MATRIX_H_
