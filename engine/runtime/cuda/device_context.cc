// DeviceContext, DeviceArena, PinnedBuffer (see device_context.h).
// Tested through tests/gpu/cuda_model_runner_test.cc.
#include "engine/runtime/cuda/device_context.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/kernels/cuda_check.h"

namespace onecard::engine {

absl::StatusOr<std::unique_ptr<DeviceContext>> DeviceContext::Create(int device) {
  int count = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA device ", device, " does not exist (", count, " devices)"));
  }
  std::unique_ptr<DeviceContext> ctx(new DeviceContext());
  ctx->device_ = device;
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cudaDeviceProp prop;
  CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  ctx->num_sms_ = prop.multiProcessorCount;
  ctx->l2_bytes_ = prop.l2CacheSize;
  ctx->device_name_ = prop.name;
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  ctx->total_bytes_ = static_cast<int64_t>(total_bytes);
  ctx->free_bytes_at_start_ = static_cast<int64_t>(free_bytes);
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&ctx->stream_, cudaStreamNonBlocking));
  CUDA_RETURN_IF_ERROR(cublasCreate(&ctx->cublas_));
  CUDA_RETURN_IF_ERROR(cublasSetStream(ctx->cublas_, ctx->stream_));
  return ctx;
}

DeviceContext::~DeviceContext() {
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status DeviceContext::SetCublasWorkspace(void* workspace, int64_t bytes) {
  CUDA_RETURN_IF_ERROR(cublasSetWorkspace(cublas_, workspace, static_cast<size_t>(bytes)));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DeviceArena>> DeviceArena::Create(int64_t bytes, const char* what) {
  std::unique_ptr<DeviceArena> arena(new DeviceArena());
  arena->what_ = what;
  arena->size_ = bytes;
  if (bytes > 0) {
    const cudaError_t err = cudaMalloc(&arena->base_, static_cast<size_t>(bytes));
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free allocation error
      return absl::ResourceExhaustedError(absl::StrCat("cudaMalloc of ", bytes, " bytes for ", what,
                                                       " failed: ", cudaGetErrorString(err)));
    }
  }
  return arena;
}

std::unique_ptr<DeviceArena> DeviceArena::View(void* base, int64_t bytes, const char* what) {
  std::unique_ptr<DeviceArena> arena(new DeviceArena());
  arena->what_ = what;
  arena->size_ = bytes;
  arena->base_ = static_cast<char*>(base);
  arena->owned_ = false;
  return arena;
}

DeviceArena::~DeviceArena() {
  if (base_ != nullptr && owned_) cudaFree(base_);
}

absl::StatusOr<void*> DeviceArena::Take(int64_t bytes) {
  const int64_t aligned = (bytes + 255) / 256 * 256;
  if (used_ + aligned > size_) {
    return absl::InternalError(absl::StrCat("device arena '", what_, "' of ", size_,
                                            " bytes is exhausted (", used_, " used, ", aligned,
                                            " more asked)"));
  }
  void* p = base_ + used_;
  used_ += aligned;
  return p;
}

absl::StatusOr<std::unique_ptr<PinnedBuffer>> PinnedBuffer::Create(int64_t bytes) {
  std::unique_ptr<PinnedBuffer> buffer(new PinnedBuffer());
  buffer->size_ = bytes;
  void* p = nullptr;
  CUDA_RETURN_IF_ERROR(cudaMallocHost(&p, static_cast<size_t>(std::max<int64_t>(bytes, 16))));
  buffer->data_ = static_cast<char*>(p);
  return buffer;
}

absl::StatusOr<std::unique_ptr<PinnedBuffer>> PinnedBuffer::CreateLarge(int64_t bytes) {
  constexpr int64_t kHuge = 2LL << 20;
  const int64_t mapped = (std::max<int64_t>(bytes, 1) + kHuge - 1) / kHuge * kHuge;
  // Mapped with 2 MiB to spare, then trimmed to a 2 MiB-aligned run (mmap
  // aligns to pages only; huge pages need the alignment).
  void* raw = mmap(nullptr, static_cast<size_t>(mapped + kHuge), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("mapping ", mapped, " bytes of host memory failed: ", std::strerror(errno)));
  }
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHuge - 1) / kHuge * kHuge;
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + static_cast<uintptr_t>(mapped + kHuge);
  if (end > aligned + mapped)
    munmap(reinterpret_cast<void*>(aligned + mapped), end - aligned - mapped);
  void* p = reinterpret_cast<void*>(aligned);
  madvise(p, static_cast<size_t>(mapped), MADV_HUGEPAGE);
  const cudaError_t registered =
      cudaHostRegister(p, static_cast<size_t>(mapped), cudaHostRegisterDefault);
  if (registered != cudaSuccess) {
    cudaGetLastError();
    munmap(p, static_cast<size_t>(mapped));
    return absl::ResourceExhaustedError(absl::StrCat(
        "pinning ", mapped, " bytes of host memory failed: ", cudaGetErrorString(registered)));
  }
  std::unique_ptr<PinnedBuffer> buffer(new PinnedBuffer());
  buffer->data_ = static_cast<char*>(p);
  buffer->size_ = bytes;
  buffer->mapped_ = mapped;
  return buffer;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ == nullptr) return;
  if (mapped_ > 0) {
    cudaHostUnregister(data_);
    munmap(data_, static_cast<size_t>(mapped_));
  } else {
    cudaFreeHost(data_);
  }
}

}  // namespace onecard::engine
