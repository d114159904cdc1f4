// Fp8DequantizeBf16: an FP8 E4M3 weight (fp8_weight.h, either scale kind) to
// BF16 [n, k], each value E4m3ToFloat(code) * scale in fp32, rounded to
// nearest even once: what cuBLAS multiplies on the steps Fp8Gemm does not
// take, and how block-scaled (kBlock128) weights, which Fp8Gemm refuses,
// are run. Reference: Fp8DequantizeBf16Ref (fp8_dequant_ref.cc). CUDA:
// fp8_dequant.cu (a thread 16 codes: one 16-byte load, the hardware's exact
// E4M3 -> half conversion, two 16-byte stores). Outputs are equal bit for
// bit (for codes that are not NaN, which Fp8Matrix::Validate refuses). Supported: n >= 1, k a
// positive multiple of 16; codes and out 16-byte aligned (CUDA). Tested by
// tests/gpu/fp8_gemm_test.cc (Fp8DequantTest) and, for the reference,
// tests/engine/kernels/fp8_dequant_ref_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_FP8_DEQUANT_H_
#define ONECARD_ENGINE_KERNELS_FP8_DEQUANT_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/kernels/fp8_weight.h"
#include "engine/kernels/stream.h"

namespace onecard::engine {

struct Fp8DequantParams {
  Fp8WeightView w;
  void* out = nullptr;  // BF16 [w.n, w.k]
};

// Checks shared by both implementations: Unimplemented naming what is
// supported for a shape outside it, InvalidArgument for a null pointer.
absl::Status CheckFp8DequantParams(const Fp8DequantParams& params, absl::string_view op);

absl::Status Fp8DequantizeBf16Ref(const Fp8DequantParams& params);
absl::Status Fp8DequantizeBf16(const Fp8DequantParams& params, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_FP8_DEQUANT_H_
