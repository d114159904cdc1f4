// A packed 4-bit weight and Int4Gemm's workspace on the device, for the
// Int4Gemm tests (int4_gemm_test.cc, int4_gemm_fold_test.cc).
#ifndef ONECARD_TESTS_GPU_INT4_DEVICE_H_
#define ONECARD_TESTS_GPU_INT4_DEVICE_H_

#include <algorithm>
#include <cstdint>

#include "engine/kernels/int4_gemm.h"
#include "engine/kernels/int4_matrix.h"
#include "tests/gpu/gpu_test_util.h"

namespace onecard::testing {

// The current device's SMs (132 where it cannot tell).
inline int DeviceSms() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return 132;
  }
  return sms;
}

// `packed`'s codes, scales and offsets, and a zeroed workspace for weights
// of up to n rows on this device's SMs.
struct DeviceInt4 {
  DeviceInt4(const engine::Int4Packed& packed, int64_t n)
      : codes(packed.codes),
        scales(packed.scales),
        offsets(std::max<size_t>(packed.offsets.size(), 1)),
        has_offsets(!packed.offsets.empty()),
        sms(DeviceSms()),
        workspace_bytes(engine::Int4GemmWorkspaceBytes(n, sms)),
        workspace(workspace_bytes) {
    if (has_offsets) offsets.Upload(packed.offsets);
    cudaMemset(workspace.get(), 0, workspace_bytes);
  }

  // Points p's weight data and workspace here.
  void Into(engine::Int4GemmParams* p) const {
    p->w.codes = codes.get();
    p->w.scales = scales.get();
    p->w.offsets = has_offsets ? offsets.get() : nullptr;
    p->workspace = workspace.get();
    p->workspace_bytes = workspace_bytes;
  }

  DeviceBuf<uint8_t> codes;
  DeviceBuf<uint32_t> scales, offsets;
  bool has_offsets;
  int sms;
  int64_t workspace_bytes;
  DeviceBuf<uint8_t> workspace;
};

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_GPU_INT4_DEVICE_H_
