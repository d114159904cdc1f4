// Tests of RopeKvWriteRef (engine/kernels/rope_kv_write_ref.cc) on the host,
// F32 and BF16, with and without bias, into pools of the dtype and into FP8
// pools (per-kv-head scales with outliers, OutlierKvScales):
// - qkv afterwards against the bias add and the rotation computed here in
//   double (complex multiplication, as rope_ref_test), rounded to the dtype;
// - the dtype pools hold the rotated k and the v exactly as qkv does, the FP8
//   pools E4m3CodeOf(x, scale[kv_head]) of those same values, the rest of
//   each pool its poison; FP8 pools change nothing in qkv;
// - bad fp8 scales are InvalidArgument naming the field, before qkv changes.
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <tuple>

#include "engine/common/fp8.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/rope.h"
#include "engine/kernels/rope_kv_write.h"
#include "gtest/gtest.h"
#include "tests/engine/kernels/kernel_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using onecard::testing::Tolerance;
using testing::RandomFloats;
using testing::RandomInts;

// Floats as stored in `dtype` (F32 or BF16), and back.
std::vector<uint8_t> Store(const std::vector<float>& x, DType dtype) {
  if (dtype == DType::kF32) {
    std::vector<uint8_t> bytes(x.size() * 4);
    std::memcpy(bytes.data(), x.data(), bytes.size());
    return bytes;
  }
  const std::vector<uint16_t> bits = testing::ToBf16(x);
  std::vector<uint8_t> bytes(bits.size() * 2);
  std::memcpy(bytes.data(), bits.data(), bytes.size());
  return bytes;
}

std::vector<float> Load(const std::vector<uint8_t>& bytes, DType dtype) {
  if (dtype == DType::kF32) {
    std::vector<float> x(bytes.size() / 4);
    std::memcpy(x.data(), bytes.data(), bytes.size());
    return x;
  }
  std::vector<uint16_t> bits(bytes.size() / 2);
  std::memcpy(bits.data(), bytes.data(), bytes.size());
  return testing::FromBf16(bits);
}

std::vector<float> RoundTo(const std::vector<float>& x, DType dtype) {
  return Load(Store(x, dtype), dtype);
}

struct Case {
  int32_t num_tokens, head_dim, num_heads, num_kv_heads;
  bool bias;
};

class RopeKvWriteRefTest : public ::testing::TestWithParam<std::tuple<Case, DType>> {
 protected:
  void SetUp() override {
    const auto [c, dtype] = GetParam();
    layout = {c.num_tokens / 16 + 4, 16, c.num_kv_heads, c.head_dim};
    stride = int64_t(c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
    qkv = RoundTo(RandomFloats(c.num_tokens * stride, 81, -3.0f, 3.0f), dtype);
    bias = RoundTo(RandomFloats(stride, 82, -0.5f, 0.5f), dtype);
    positions = RandomInts(c.num_tokens, 83, 0, 4096);
    slots = testing::Shuffled(layout.num_blocks * 16, 84);
    slots.resize(c.num_tokens);
    slots[c.num_tokens / 2] = -1;  // padding: skipped
    inv_freq = RopeInvFreq(c.head_dim, 1000000.0f, RopeScaling{});
    k_scales = testing::OutlierKvScales(c.num_kv_heads);
    v_scales.assign(k_scales.rbegin(), k_scales.rend());
  }

  // Params over qkv_bytes and the two pools, without fp8.
  RopeKvWriteParams Params(std::vector<uint8_t>& qkv_bytes, std::vector<uint8_t>& bias_bytes,
                           void* k_cache, void* v_cache) const {
    const auto [c, dtype] = GetParam();
    return {.dtype = dtype,
            .qkv = qkv_bytes.data(),
            .bias = c.bias ? bias_bytes.data() : nullptr,
            .k_cache = k_cache,
            .v_cache = v_cache,
            .layout = layout,
            .num_heads = c.num_heads,
            .positions = positions.data(),
            .slot_mapping = slots.data(),
            .inv_freq = inv_freq.data(),
            .num_tokens = c.num_tokens};
  }

  // qkv + bias rounded to the dtype, q and k heads rotated in double, rounded.
  std::vector<float> Expected() const {
    const auto [c, dtype] = GetParam();
    std::vector<float> x = qkv;
    if (c.bias) {
      for (size_t i = 0; i < x.size(); ++i) x[i] += bias[i % stride];
      x = RoundTo(x, dtype);
    }
    const int half = c.head_dim / 2;
    for (int32_t t = 0; t < c.num_tokens; ++t) {
      for (int h = 0; h < c.num_heads + c.num_kv_heads; ++h) {
        float* head = x.data() + t * stride + h * c.head_dim;
        for (int i = 0; i < half; ++i) {
          const std::complex<double> z = std::complex<double>(head[i], head[i + half]) *
                                         std::polar(1.0, double(positions[t]) * inv_freq[i]);
          head[i] = static_cast<float>(z.real());
          head[i + half] = static_cast<float>(z.imag());
        }
      }
    }
    return RoundTo(x, dtype);
  }

  KvLayout layout;
  int64_t stride = 0;
  std::vector<float> qkv, bias, inv_freq, k_scales, v_scales;
  std::vector<int32_t> positions, slots;
};

TEST_P(RopeKvWriteRefTest, Fp8PoolsHoldTheRotatedValuesThroughTheirScales) {
  const auto [c, dtype] = GetParam();
  const int64_t pool = layout.PoolElements();
  const int64_t q_elems = int64_t(c.num_heads) * c.head_dim;
  const int64_t kv_elems = int64_t(c.num_kv_heads) * c.head_dim;
  std::vector<uint8_t> bias_bytes = Store(bias, dtype);
  // Pools of the dtype, poisoned with NaN.
  std::vector<uint8_t> qkv_a = Store(qkv, dtype);
  std::vector<uint8_t> k_a = Store(testing::Poisoned(pool), dtype);
  std::vector<uint8_t> v_a = Store(testing::Poisoned(pool), dtype);
  ASSERT_TRUE(RopeKvWriteRef(Params(qkv_a, bias_bytes, k_a.data(), v_a.data())).ok());
  // FP8 pools, poisoned with E4M3's NaN code.
  std::vector<uint8_t> qkv_b = Store(qkv, dtype);
  std::vector<uint8_t> k_b(pool, 0x7f), v_b(pool, 0x7f);
  RopeKvWriteParams p = Params(qkv_b, bias_bytes, k_b.data(), v_b.data());
  p.fp8 = {k_scales.data(), v_scales.data()};
  ASSERT_TRUE(RopeKvWriteRef(p).ok());

  EXPECT_EQ(qkv_a, qkv_b);  // FP8 pools change nothing in qkv
  const std::vector<float> got = Load(qkv_a, dtype);
  // fp32 angles at positions < 4096 carry up to 4096 * 2^-24 rad of rounding.
  const Tolerance tol = dtype == DType::kF32 ? Tolerance{1e-3, 1e-4, 1e-8} : Tolerance::For(dtype);
  EXPECT_ALL_CLOSE(got, Expected(), tol);
  const std::vector<float> k_pool = Load(k_a, dtype), v_pool = Load(v_a, dtype);
  std::vector<bool> written(pool, false);
  for (int32_t t = 0; t < c.num_tokens; ++t) {
    if (slots[t] < 0) continue;
    const float* k = got.data() + t * stride + q_elems;
    const float* v = k + kv_elems;
    for (int64_t i = 0; i < kv_elems; ++i) {
      const int64_t at = slots[t] * kv_elems + i;
      const int32_t h = static_cast<int32_t>(i / c.head_dim);
      ASSERT_EQ(k_pool[at], k[i]) << t << " " << i;
      ASSERT_EQ(v_pool[at], v[i]) << t << " " << i;
      ASSERT_EQ(k_b[at], E4m3CodeOf(k[i], k_scales[h])) << t << " " << i;
      ASSERT_EQ(v_b[at], E4m3CodeOf(v[i], v_scales[h])) << t << " " << i;
      ASSERT_FALSE(std::isnan(E4m3ToFloat(k_b[at]))) << t << " " << i;
      ASSERT_FALSE(std::isnan(E4m3ToFloat(v_b[at]))) << t << " " << i;
      written[at] = true;
    }
  }
  for (int64_t i = 0; i < pool; ++i) {
    if (written[i]) continue;
    ASSERT_TRUE(std::isnan(k_pool[i]) && std::isnan(v_pool[i])) << i;
    ASSERT_TRUE(k_b[i] == 0x7f && v_b[i] == 0x7f) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RopeKvWriteRefTest,
    ::testing::Combine(::testing::Values(Case{1, 64, 9, 3, true}, Case{7, 128, 8, 2, false},
                                         Case{33, 64, 4, 4, true}, Case{19, 128, 12, 2, true}),
                       ::testing::Values(DType::kF32, DType::kBF16)));

// A half-set pair or a bad scale is refused naming the field, and qkv is
// left as it was (the check comes before the bias add and the rotation).
TEST(RopeKvWriteRefErrorsTest, BadFp8ScalesNameTheFieldAndLeaveQkv) {
  const KvLayout layout{2, 16, 2, 8};
  const int64_t stride = (4 + 2 * 2) * 8;
  const std::vector<float> in = RandomFloats(3 * stride, 85);
  std::vector<float> qkv = in;
  const std::vector<float> bias = RandomFloats(stride, 86);
  std::vector<uint8_t> k_cache(layout.PoolElements()), v_cache(layout.PoolElements());
  const std::vector<int32_t> positions = {0, 1, 2}, slots = {0, 1, 2};
  const std::vector<float> inv_freq = RopeInvFreq(8, 10000.0f, RopeScaling{});
  std::vector<float> k_scales = {1.0f, 1.0f}, v_scales = {1.0f, 1.0f};
  RopeKvWriteParams p{.dtype = DType::kF32,
                      .qkv = qkv.data(),
                      .bias = bias.data(),
                      .k_cache = k_cache.data(),
                      .v_cache = v_cache.data(),
                      .layout = layout,
                      .num_heads = 4,
                      .positions = positions.data(),
                      .slot_mapping = slots.data(),
                      .inv_freq = inv_freq.data(),
                      .num_tokens = 3,
                      .fp8 = {k_scales.data(), nullptr}};
  const auto expect_error = [&](const std::string& field) {
    const absl::Status status = RopeKvWriteRef(p);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_NE(status.message().find(field), std::string::npos) << status;
    EXPECT_EQ(qkv, in) << field;
  };
  expect_error("fp8.v is null");
  p.fp8 = {nullptr, v_scales.data()};
  expect_error("fp8.k is null");
  p.fp8 = {k_scales.data(), v_scales.data()};
  k_scales[0] = std::numeric_limits<float>::quiet_NaN();
  expect_error("fp8.k[0] = nan");
  k_scales[0] = 1.0f;
  v_scales[1] = -0.5f;
  expect_error("fp8.v[1] = -0.5");
}

}  // namespace
}  // namespace onecard::engine
