// CpuLinear: a weight matrix W [out_features, in_features] of the cpu
// backend as the file stores it, and y = x W^T + b over it.
//
// A CpuLinear is a stack of row runs (CpuWeightRows), each in one dtype:
// fp32, or a GGUF block type kept as its blocks (Q4_0, Q4_1, Q8_0, Q4_K,
// Q5_K, Q6_K: engine/model/quant_blocks.h), so that a 4-bit file is held and
// read at its own size. Fused weights stack their parts (q, k, v of one
// layer may be Q4_K, Q4_K and Q6_K in a Q4_K_M file).
//
// The product: a block run multiplies 8-bit activations. For Q4_0, Q4_1 and
// Q8_0 runs each row of x is quantized per 32 columns (QuantizeRowsQ8:
// d = max|x| / 127, q = round to nearest even of x / d), then every 32-column
// block of a weight row is an exact integer dot product with the codes,
// scaled in fp32 by the weight's and the activation's scales (with the offset
// terms through the codes' sums). For the K-quant runs (Q4_K, Q5_K, Q6_K)
// each row is quantized the same way per 256 columns (QuantizeRowsQ8K,
// llama.cpp's Q8_K), so that a super-block's sub-block scales multiply its
// integer sums in integers and the super-block costs one conversion to fp32.
// This is llama.cpp's scheme. fp32 runs use cpu::DotRows (cpu_dot.h).
//
// Kernels: a portable one and, chosen at run time from what the processor
// reports, AVX2 (+FMA) and AVX-512 VNNI (+BW, VL). Every y[r, o] is computed
// from row r of x and row o of W alone, by one code path whatever the number
// of rows or threads, so results are batch-invariant on a machine (kernels
// differ from each other only in the order of the fp32 sums of the blocks).
// Threads split the output features (ThreadPool's fixed partition).
//
// The reference (CpuLinearRef, cpu_linear_ref.cc) dequantizes the weights
// with the GGUF dequantizers (checked against the gguf package) and the
// quantized activations exactly, and sums in double: the kernels are tested
// against it over awkward shapes (tests/engine/runtime/cpu/cpu_linear_test.cc).
#ifndef ONECARD_ENGINE_RUNTIME_CPU_CPU_LINEAR_H_
#define ONECARD_ENGINE_RUNTIME_CPU_CPU_LINEAR_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/common/dtype.h"
#include "engine/common/thread_pool.h"

namespace onecard::engine {

// Whether a CpuLinear keeps rows of this dtype as they are: kF32 and the
// GGUF block types Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K.
bool IsCpuLinearDtype(DType dtype);
// Whether runs of this dtype take their activations per 256 columns
// (QuantizedRowsK): the K-quants Q4_K, Q5_K, Q6_K.
bool IsKQuant(DType dtype);

// Rows of one dtype: fp32 values in `f32`, or whole blocks in `blocks`
// (rows * in_features / BlockElements(dtype) blocks, row after row; in Q4_0
// and Q4_1 rows each whole group of eight blocks is packed for the kernels,
// the same bytes rearranged: PackQ4Row in cpu_linear_kernels.h).
struct CpuWeightRows {
  DType dtype = DType::kF32;
  int64_t rows = 0;
  std::vector<float> f32;
  std::vector<uint8_t> blocks;
};

class CpuLinear {
 public:
  CpuLinear() = default;

  // W from fp32 values [rows, in_features] (w.size() must be rows * in).
  static absl::StatusOr<CpuLinear> FromF32(std::vector<float> w, int64_t rows, int64_t in_features,
                                           absl::string_view name);
  // W from GGUF blocks of `dtype`, row after row (Q4_0 and Q4_1 rows are
  // packed in place); in_features must be a multiple of the block's elements
  // and blocks.size() match. Errors name `name` and what is wrong.
  static absl::StatusOr<CpuLinear> FromBlocks(DType dtype, std::vector<uint8_t> blocks,
                                              int64_t rows, int64_t in_features,
                                              absl::string_view name);

  // Stacks other's rows below these (the same in_features), keeping each
  // run's dtype; an empty CpuLinear takes other's in_features.
  absl::Status Append(CpuLinear other, absl::string_view name);

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  bool empty() const { return out_features_ == 0; }
  const std::vector<CpuWeightRows>& runs() const { return runs_; }
  // Whether any run is a block type (the product quantizes x then).
  bool quantized() const;
  // Bytes the weights hold.
  int64_t bytes() const;
  // Row r in fp32, by the GGUF dequantizers (embedding lookups, references).
  void RowF32(int64_t r, float* out) const;

 private:
  int64_t in_features_ = 0;
  int64_t out_features_ = 0;
  std::vector<CpuWeightRows> runs_;
};

// x rows in 8 bits: per 32 columns a scale d and int8 codes, x ~ d * q.
struct QuantizedRows {
  int64_t rows = 0;
  int64_t cols = 0;            // a multiple of 32
  std::vector<int8_t> q;       // [rows, cols]
  std::vector<float> d;        // [rows, cols / 32]
  std::vector<int32_t> sum16;  // [rows, cols / 16]: the sum of q over each 16 columns
  std::vector<float> dsum;     // [rows, cols / 32]: d * (the sum of q over the 32 columns)
};

// Quantizes rows [0, rows) of x [rows, cols] (cols a multiple of 32) into
// out (resized): d = max|x| / 127 over the block (0 for an all-zero block),
// q = x * (1 / d) rounded to nearest even (0 when d is 0), and the sums. Every kernel uses
// this one function, so codes are identical everywhere.
void QuantizeRowsQ8(const float* x, int64_t rows, int64_t cols, QuantizedRows* out);

// x rows in 8 bits for the K-quant runs (llama.cpp's Q8_K): per 256 columns
// a scale d and int8 codes, x ~ d * q, and the codes' sums per 16 columns.
struct QuantizedRowsK {
  int64_t rows = 0;
  int64_t cols = 0;            // a multiple of 256
  std::vector<int8_t> q;       // [rows, cols]
  std::vector<float> d;        // [rows, cols / 256]
  std::vector<int16_t> sum16;  // [rows, cols / 16]: the sum of q over each 16 columns
};

// QuantizeRowsQ8's rule over blocks of 256 columns (cols a multiple of 256):
// d = max|x| / 127, q = x * (1 / d) rounded to nearest even, clamped to
// [-127, 127] (0 when d is 0), and the sums per 16 columns.
void QuantizeRowsQ8K(const float* x, int64_t rows, int64_t cols, QuantizedRowsK* out);
// The same, written as plain loops (cpu_linear_ref.cc): the spec the test
// holds QuantizeRowsQ8K to, bit for bit.
void QuantizeRowsQ8KRef(const float* x, int64_t rows, int64_t cols, QuantizedRowsK* out);

// The instruction sets the kernels come in, each including the ones before:
// kAvx512Bf16 adds AVX512_BF16 (Sapphire Rapids, Zen 4) for HostLinear's
// kernels (host_linear.h), kAmxBf16 the tile unit's AMX-TILE and AMX-BF16
// (Sapphire Rapids and later, with the kernel's permission for the tile
// state) for HostLinear's kernels; CpuLinear runs its kAvx512Vnni
// kernels on both.
enum class CpuIsa { kGeneric, kAvx2, kAvx512Vnni, kAvx512Bf16, kAmxBf16 };

// The best of them this processor runs (cpuid, once).
CpuIsa DetectCpuIsa();
// Whether this processor runs `isa`.
bool CpuSupports(CpuIsa isa);
// Every CpuIsa this processor runs, kGeneric first (the kernels' tests).
std::vector<CpuIsa> SupportedCpuIsas();
const char* CpuIsaName(CpuIsa isa);

// Reused between calls so that a step allocates nothing.
struct CpuLinearScratch {
  QuantizedRows xq;   // for the Q4_0, Q4_1, Q8_0 runs
  QuantizedRowsK xk;  // for the K-quant runs
};

struct CpuLinearArgs {
  const float* x = nullptr;     // [num_rows, in_features]
  const float* bias = nullptr;  // [out_features] or null
  float* y = nullptr;           // [num_rows, out_features]; must not alias x
  int64_t num_rows = 0;
};

// y = x W^T + b with the kernels of `isa` (which the processor must run).
void CpuLinearForward(ThreadPool& pool, const CpuLinear& w, const CpuLinearArgs& args,
                      CpuLinearScratch* scratch, CpuIsa isa = DetectCpuIsa());

// The reference: the same quantized activations (QuantizeRowsQ8 for the
// Q4_0, Q4_1, Q8_0 runs, QuantizeRowsQ8KRef for the K-quant runs), the
// weights dequantized, every dot product in double (fp32 runs: x itself, in
// double).
void CpuLinearRef(const CpuLinear& w, const CpuLinearArgs& args);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CPU_CPU_LINEAR_H_
