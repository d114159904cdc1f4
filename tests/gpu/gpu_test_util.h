// Helpers of the GPU tests: device buffers that start poisoned (every byte
// 0xFF: NaN for F32/BF16, -1 for int32, so unwritten outputs show), seeded
// random BF16/F32 inputs (never zeros), conversions, ASSERT_CUDA_OK, and a
// check that a kernel writes the same bytes on a second run.
// Tested by its users (tests/gpu/*_test.cc).
#ifndef ONECARD_TESTS_GPU_GPU_TEST_UTIL_H_
#define ONECARD_TESTS_GPU_GPU_TEST_UTIL_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "engine/kernels/bf16.h"
#include "gtest/gtest.h"

namespace onecard::testing {

#define ASSERT_CUDA_OK(expr) \
  ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

template <typename T>
class DeviceBuf {
 public:
  explicit DeviceBuf(size_t n) : n_(n) {
    if (cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess) p_ = nullptr;
    Poison();
  }
  explicit DeviceBuf(const std::vector<T>& host) : DeviceBuf(host.size()) { Upload(host); }
  ~DeviceBuf() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DeviceBuf(const DeviceBuf&) = delete;
  DeviceBuf& operator=(const DeviceBuf&) = delete;

  T* get() const { return p_; }
  size_t size() const { return n_; }
  void Poison() { cudaMemset(p_, 0xFF, std::max<size_t>(n_, 1) * sizeof(T)); }
  void Upload(const std::vector<T>& host) {
    cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> Download() const {
    std::vector<T> host(n_);
    cudaDeviceSynchronize();
    cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// Uniform in [lo, hi), redrawn when it rounds to zero.
inline std::vector<uint16_t> RandomBf16(size_t n, std::mt19937& rng, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<uint16_t> out(n);
  for (auto& v : out) {
    do {
      v = engine::FloatToBf16(dist(rng));
    } while (engine::Bf16ToFloat(v) == 0.0f);
  }
  return out;
}

inline std::vector<float> RandomF32(size_t n, std::mt19937& rng, float lo = -1.0f,
                                    float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (auto& v : out) {
    do {
      v = dist(rng);
    } while (v == 0.0f);
  }
  return out;
}

inline std::vector<float> ToFloats(std::span<const uint16_t> bf16) {
  std::vector<float> out(bf16.size());
  for (size_t i = 0; i < bf16.size(); ++i) out[i] = engine::Bf16ToFloat(bf16[i]);
  return out;
}

// A fresh seed per test run would make failures unreproducible; a fixed base
// plus the case index gives fresh inputs per case and a reproducible suite.
inline std::mt19937 SeededRng(uint32_t case_index, uint32_t salt) {
  return std::mt19937(0x6f6e6563u ^ (case_index * 7919u) ^ (salt * 104729u));
}

// Calls `run` twice (each time after `reset`, which restores y's inputs such
// as a residual) and EXPECTs the `bytes` at device address `y` the same after
// both: the kernel's output must not depend on the run (split-K order,
// workspace left over).
inline void ExpectSameBytesTwice(const std::function<void()>& reset,
                                 const std::function<absl::Status()>& run, const void* y,
                                 size_t bytes) {
  std::vector<std::vector<uint8_t>> runs;
  for (int i = 0; i < 2; ++i) {
    reset();
    const absl::Status st = run();
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_CUDA_OK(cudaDeviceSynchronize());
    std::vector<uint8_t> out(bytes);
    ASSERT_CUDA_OK(cudaMemcpy(out.data(), y, bytes, cudaMemcpyDeviceToHost));
    runs.push_back(std::move(out));
  }
  EXPECT_EQ(runs[0], runs[1]) << "two runs differ";
}

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_GPU_GPU_TEST_UTIL_H_
