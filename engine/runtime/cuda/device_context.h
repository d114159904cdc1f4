// DeviceContext: one GPU as the CUDA backend uses it: the device, its
// properties, the compute stream and the cuBLAS handle (bound to the stream,
// with a caller-given workspace so that GEMMs can be captured in graphs).
// DeviceArena: one cudaMalloc carved into 256-byte aligned pieces (weights,
// workspace, KV), freed at once, or a view of memory owned elsewhere. PinnedBuffer: page-locked
// host memory. Tested through tests/gpu/cuda_model_runner_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CUDA_DEVICE_CONTEXT_H_
#define ONECARD_ENGINE_RUNTIME_CUDA_DEVICE_CONTEXT_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace onecard::engine {

class DeviceContext {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceContext>> Create(int device);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  int num_sms() const { return num_sms_; }
  int64_t l2_bytes() const { return l2_bytes_; }  // the L2 cache
  const std::string& device_name() const { return device_name_; }
  int64_t total_bytes() const { return total_bytes_; }
  int64_t free_bytes_at_start() const { return free_bytes_at_start_; }
  // Gives cuBLAS its workspace (device memory owned by the caller).
  absl::Status SetCublasWorkspace(void* workspace, int64_t bytes);

 private:
  DeviceContext() = default;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  int num_sms_ = 0;
  int64_t l2_bytes_ = 0;
  std::string device_name_;
  int64_t total_bytes_ = 0;
  int64_t free_bytes_at_start_ = 0;
};

class DeviceArena {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceArena>> Create(int64_t bytes, const char* what);
  // An arena over `bytes` of memory the caller owns (256-byte aligned), not
  // freed with it: a streamed layer's ring slot (weight_stream.h).
  static std::unique_ptr<DeviceArena> View(void* base, int64_t bytes, const char* what);
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  // The next `bytes` (256-byte aligned); Internal error past the end.
  absl::StatusOr<void*> Take(int64_t bytes);
  int64_t used_bytes() const { return used_; }
  // Everything taken is given back (the memory stays allocated; pointers
  // taken before are not to be used after).
  void Reset() { used_ = 0; }
  int64_t size_bytes() const { return size_; }

 private:
  DeviceArena() = default;
  char* base_ = nullptr;
  bool owned_ = true;
  int64_t size_ = 0;
  int64_t used_ = 0;
  std::string what_;
};

class PinnedBuffer {
 public:
  static absl::StatusOr<std::unique_ptr<PinnedBuffer>> Create(int64_t bytes);
  // Page-locked memory for a large buffer the CPU streams through as well
  // as the copy engine (offloaded weights): anonymous memory in 2 MiB
  // aligned runs, advised into transparent huge pages (fewer TLB misses and
  // page-bounded prefetch streams for the CPU's kernels), then registered
  // with CUDA. ResourceExhausted when the host refuses either step.
  static absl::StatusOr<std::unique_ptr<PinnedBuffer>> CreateLarge(int64_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  char* data() const { return data_; }
  int64_t size_bytes() const { return size_; }

 private:
  PinnedBuffer() = default;
  char* data_ = nullptr;
  int64_t size_ = 0;
  int64_t mapped_ = 0;  // CreateLarge: bytes mapped (registered, not cudaMallocHost)
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_DEVICE_CONTEXT_H_
