// The row kernels behind CpuLinearForward (cpu_linear.h), one table per
// instruction set: each computes the dot products of one weight row, in its
// GGUF blocks, with up to kMaxRows rows of 8-bit activations (QuantizedRows,
// or QuantizedRowsK for the K-quants). The AVX2
// and AVX-512 tables live in translation units compiled for those sets
// (cpu_linear_avx2.cc, cpu_linear_avx512.cc), which include nothing that
// defines inline code shared with the rest of the program, so no function
// compiled for one set can stand in for another's. Internal to the cpu
// backend. Tested through tests/engine/runtime/cpu/cpu_linear_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CPU_CPU_LINEAR_KERNELS_H_
#define ONECARD_ENGINE_RUNTIME_CPU_CPU_LINEAR_KERNELS_H_

#include <cstdint>

namespace onecard::engine::cpu_linear {

// One row of quantized activations (QuantizedRows): q [cols], d [cols / 32],
// sum16 [cols / 16], dsum [cols / 32].
struct XRow {
  const int8_t* q;
  const float* d;
  const int32_t* sum16;
  const float* dsum;
};

// One row of activations quantized per 256 columns (QuantizedRowsK), for the
// K-quant kernels: q [cols], d [cols / 256], sum16 [cols / 16].
struct XRowK {
  const int8_t* q;
  const float* d;
  const int16_t* sum16;
};

inline constexpr int kMaxRows = 4;  // rows of x a kernel call takes

// out[r] = the sum over the weight row's blocks of W[o, block] . x[r][block],
// for r < n (1..kMaxRows); `cols` is the row's length, a multiple of the
// dtype's block. out[r] depends on x[r] alone: the same operations in the
// same order whatever n.
using RowDot = void (*)(const uint8_t* w, const XRow* x, int n, int64_t cols, float* out);
// The same for the K-quants, whose activations come per 256 columns.
using RowDotK = void (*)(const uint8_t* w, const XRowK* x, int n, int64_t cols, float* out);

// out[i] = W[o + i] . x for i < kRowsAtOnce consecutive weight rows (the i-th
// at w + i row_bytes) and one row of x: the same bits as RowDot computes for
// each row alone, with the rows' overheads (the call, the reductions) shared.
inline constexpr int kRowsAtOnce = 4;
using RowsDot = void (*)(const uint8_t* w, int64_t row_bytes, const XRow& x, int64_t cols,
                         float* out);
using RowsDotK = void (*)(const uint8_t* w, int64_t row_bytes, const XRowK& x, int64_t cols,
                          float* out);

struct Kernels {
  RowDot q4_0 = nullptr;
  RowDot q4_1 = nullptr;
  RowDot q8_0 = nullptr;
  RowDotK q4_k = nullptr;
  RowDotK q5_k = nullptr;
  RowDotK q6_k = nullptr;
  // kRowsAtOnce weight rows at once, one row of x; null where a set has none.
  RowsDot q4_0_x4 = nullptr;
  RowsDot q4_1_x4 = nullptr;
  RowsDotK q4_k_x4 = nullptr;
  RowsDotK q5_k_x4 = nullptr;
  RowsDotK q6_k_x4 = nullptr;
};

// Q4_0 and Q4_1 rows are held with each whole group of eight blocks
// rearranged (the same bytes: 144 or 160 a group), the blocks after the last
// whole group as the file has them. A group is the eight fp16 d, for Q4_1 the
// eight fp16 m, then four chunks of 32 bytes: byte l of chunk c holds code l
// of block 2 c in its low nibble and code l of block 2 c + 1 in its high one
// (code l: element l of the block, 0..31). So a 32-byte load and two masks
// give two blocks' codes in element order, and a 16-byte load a group's
// scales.
// PackQ4Row rearranges one row of GGUF blocks in place; UnpackQ4Group writes
// a packed group back as eight GGUF blocks.
void PackQ4Row(bool with_min, uint8_t* row, int64_t cols);
void UnpackQ4Group(bool with_min, const uint8_t* group, uint8_t* blocks);

const Kernels& GenericKernels();
const Kernels& Avx2Kernels();
const Kernels& Avx512VnniKernels();

}  // namespace onecard::engine::cpu_linear

#endif  // ONECARD_ENGINE_RUNTIME_CPU_CPU_LINEAR_KERNELS_H_
