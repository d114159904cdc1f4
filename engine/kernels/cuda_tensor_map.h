// EncodeBf16TensorMap: a TMA tensor map (CUtensorMap, for
// cp.async.bulk.tensor copies; cuda_pipeline.cuh's TensorCopy2d) of a
// row-major bf16 matrix [rows, cols], rows `stride` elements apart, copied in
// boxes of box_cols x box_rows with the 128-byte swizzle that wgmma's
// shared-memory descriptors read (cuda_wgmma.cuh's SmemDescriptor128B);
// rows past the matrix's end arrive as zeros. The driver's
// cuTensorMapEncodeTiled is looked up once, through the runtime, so nothing
// links against libcuda. Included only by CUDA code; tested through
// tests/gpu/int4_gemm_test.cc (Int4Gemm's kWgmma kernel).
#ifndef ONECARD_ENGINE_KERNELS_CUDA_TENSOR_MAP_H_
#define ONECARD_ENGINE_KERNELS_CUDA_TENSOR_MAP_H_

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/kernels/cuda_check.h"

namespace onecard::engine::cuda {

// cuTensorMapEncodeTiled from the driver, found once.
inline absl::StatusOr<PFN_cuTensorMapEncodeTiled_v12000> TensorMapEncoder() {
  static const absl::StatusOr<PFN_cuTensorMapEncodeTiled_v12000> fn =
      []() -> absl::StatusOr<PFN_cuTensorMapEncodeTiled_v12000> {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    CUDA_RETURN_IF_ERROR(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000,
                                                          cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || f == nullptr) {
      return absl::UnavailableError("the CUDA driver has no cuTensorMapEncodeTiled");
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// `what` names the matrix in an error ("Int4Gemm's x").
inline absl::Status EncodeBf16TensorMap(CUtensorMap* map, const void* base, int64_t rows,
                                        int64_t cols, int64_t stride, uint32_t box_cols,
                                        uint32_t box_rows, const char* what) {
  auto encode = TensorMapEncoder();
  if (!encode.ok()) {
    return absl::Status(encode.status().code(),
                        absl::StrCat(what, ": ", encode.status().message()));
  }
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(stride) * 2};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r =
      (*encode)(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides,
                box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    return absl::InternalError(absl::StrCat(what, ": cuTensorMapEncodeTiled for ", rows, " rows x ",
                                            cols, " (stride ", stride, ") failed: CUresult ",
                                            static_cast<int>(r)));
  }
  return absl::OkStatus();
}

}  // namespace onecard::engine::cuda

#endif  // ONECARD_ENGINE_KERNELS_CUDA_TENSOR_MAP_H_
