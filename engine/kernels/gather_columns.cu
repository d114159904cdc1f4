// GatherColumns on CUDA (see gather_columns.h): a grid-stride loop over
// [rows, k], the column map read once a (row, column) through the read-only
// cache (it is the same for every row). Launched with programmatic dependent
// launch (waits before reading x). Tested by tests/gpu/elementwise_test.cc
// against GatherColumnsRef.
#include <algorithm>

#include "engine/common/status_macros.h"
#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/gather_columns.h"

namespace onecard::engine {
namespace {

__global__ void GatherColumnsKernel(const uint16_t* __restrict__ x, int64_t x_row_stride,
                                    const int32_t* __restrict__ columns, uint16_t* __restrict__ y,
                                    int64_t k, int64_t total) {
  cuda::GridDependencyWait();  // x comes from the previous kernel
  cuda::LaunchDependents();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / k, j = i - r * k;
    y[i] = x[r * x_row_stride + __ldg(columns + j)];
  }
}

}  // namespace

absl::Status GatherColumns(const GatherColumnsParams& p, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckGatherColumnsParams(p, "GatherColumns"));
  if (p.rows == 0) return absl::OkStatus();
  const int64_t total = p.rows * p.k;
  const int grid = static_cast<int>(std::min<int64_t>(cuda::CeilDiv(total, 256), 132 * 8));
  CUDA_RETURN_IF_ERROR(cuda::LaunchPdl(GatherColumnsKernel, dim3(grid), dim3(256), 0, stream,
                                       static_cast<const uint16_t*>(p.x), p.x_row_stride, p.columns,
                                       static_cast<uint16_t*>(p.y), p.k, total));
  return absl::OkStatus();
}

}  // namespace onecard::engine
