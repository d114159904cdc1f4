// Fixtures of the HostLinearForward tests (host_linear_test.cc,
// host_linear_amx_test.cc): BF16 activations, packed 4-bit weights with the
// logical matrix they came from, BF16 weights, and the error bound against
// the double reference.
#ifndef ONECARD_TESTS_ENGINE_RUNTIME_CPU_HOST_LINEAR_TESTING_H_
#define ONECARD_TESTS_ENGINE_RUNTIME_CPU_HOST_LINEAR_TESTING_H_

#include <cstdint>
#include <vector>

#include "engine/kernels/int4_matrix.h"
#include "engine/runtime/cpu/host_linear.h"

namespace onecard::engine::testing {

// BF16 values (as the GPU's activations are) in [-2, 2), a few 50x larger.
std::vector<float> Activations(int64_t n, uint32_t seed);

// A packed 4-bit weight and the logical matrix it came from.
struct Int4Fixture {
  Int4Matrix m;
  Int4Packed packed;
  HostWeight w;
};
Int4Fixture MakeInt4(int64_t n, int64_t k, int32_t group, Int4Offsets offsets, bool act_order,
                     uint32_t seed);

// A BF16 weight of values in [-0.1, 0.1), and them as fp32.
struct Bf16Fixture {
  std::vector<uint16_t> bits;
  HostWeight w;
};
Bf16Fixture MakeBf16(int64_t n, int64_t k, uint32_t seed);
std::vector<float> Dense(const Bf16Fixture& f);

// The error bound of an fp32 sum against the double reference: relative
// 1e-5 of sum |w x| (dense: W [n, k] in fp32 in x's column order).
std::vector<float> Bounds(const std::vector<float>& dense, const HostWeight& w,
                          const std::vector<float>& x, int64_t rows);

}  // namespace onecard::engine::testing

#endif  // ONECARD_TESTS_ENGINE_RUNTIME_CPU_HOST_LINEAR_TESTING_H_
