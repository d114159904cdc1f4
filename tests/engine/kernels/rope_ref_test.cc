// Tests of RopeInvFreq and RopeRef (engine/kernels/rope_ref.cc): the rotation
// against complex multiplication by e^{i * position * inv_freq} in double, on
// q and k viewed inside a packed qkv buffer (v must stay untouched); the
// frequency table against theta^(-2i/d) and the llama3 scaling written in its
// frequency form; BF16 against F32.
#include <cmath>
#include <complex>
#include <numbers>
#include <tuple>

#include "engine/kernels/rope.h"
#include "gtest/gtest.h"
#include "tests/engine/kernels/kernel_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using onecard::testing::Tolerance;
using testing::RandomFloats;
using testing::RandomInts;

struct Packed {  // [num_tokens, (num_heads + 2 * num_kv_heads) * head_dim]
  std::vector<float> qkv;
  int64_t stride;
};

// The rotation in complex form: z = x[i] + i x[i + d/2]; z *= e^{i a}.
std::vector<float> RotateComplex(const Packed& in, const std::vector<int32_t>& positions,
                                 const std::vector<float>& inv_freq, int heads_to_rotate,
                                 int head_dim) {
  std::vector<float> out = in.qkv;
  const int half = head_dim / 2;
  for (size_t t = 0; t < positions.size(); ++t) {
    for (int h = 0; h < heads_to_rotate; ++h) {
      float* x = out.data() + t * in.stride + h * head_dim;
      for (int i = 0; i < half; ++i) {
        const double angle = double(positions[t]) * double(inv_freq[i]);
        const std::complex<double> z =
            std::complex<double>(x[i], x[i + half]) * std::polar(1.0, angle);
        x[i] = static_cast<float>(z.real());
        x[i + half] = static_cast<float>(z.imag());
      }
    }
  }
  return out;
}

class RopeRefTest
    : public ::testing::TestWithParam<std::tuple<int32_t, int32_t, std::pair<int, int>>> {};

TEST_P(RopeRefTest, MatchesComplexRotation) {
  const auto [num_tokens, head_dim, heads] = GetParam();
  const auto [num_heads, num_kv_heads] = heads;
  const int64_t stride = int64_t(num_heads + 2 * num_kv_heads) * head_dim;
  const Packed in{RandomFloats(num_tokens * stride, 21), stride};
  const std::vector<int32_t> positions = RandomInts(num_tokens, 22, 0, 2048);
  const std::vector<float> inv_freq = RopeInvFreq(head_dim, 10000.0f, RopeScaling{});
  std::vector<float> qkv = in.qkv;
  float* k = qkv.data() + int64_t(num_heads) * head_dim;
  RopeParams p{DType::kF32,     qkv.data(), k,         stride,       stride,  positions.data(),
               inv_freq.data(), num_tokens, num_heads, num_kv_heads, head_dim};
  ASSERT_TRUE(RopeRef(p).ok());
  // q and k heads are adjacent in the packed row: rotate them all; v stays.
  const std::vector<float> want =
      RotateComplex(in, positions, inv_freq, num_heads + num_kv_heads, head_dim);
  // fp32 angles at positions < 2048 carry up to 2048 * 2^-24 rad of rounding.
  EXPECT_ALL_CLOSE(qkv, want, (Tolerance{3e-4, 1e-4, 1e-8}));
  for (int32_t t = 0; t < num_tokens; ++t) {
    for (int64_t i = int64_t(num_heads + num_kv_heads) * head_dim; i < stride; ++i) {
      ASSERT_EQ(qkv[t * stride + i], in.qkv[t * stride + i]) << "v changed at token " << t;
    }
  }
}

TEST_P(RopeRefTest, Bf16MatchesF32) {
  const auto [num_tokens, head_dim, heads] = GetParam();
  const auto [num_heads, num_kv_heads] = heads;
  const int64_t q_elems = int64_t(num_tokens) * num_heads * head_dim;
  const int64_t k_elems = int64_t(num_tokens) * num_kv_heads * head_dim;
  std::vector<float> q = testing::RoundToBf16(RandomFloats(q_elems, 23));
  std::vector<float> k = testing::RoundToBf16(RandomFloats(k_elems, 24));
  std::vector<uint16_t> q16 = testing::ToBf16(q), k16 = testing::ToBf16(k);
  const std::vector<int32_t> positions = RandomInts(num_tokens, 25, 0, 300);
  const std::vector<float> inv_freq = RopeInvFreq(head_dim, 500000.0f, RopeScaling{});
  RopeParams p{DType::kF32,
               q.data(),
               k.data(),
               int64_t(num_heads) * head_dim,
               int64_t(num_kv_heads) * head_dim,
               positions.data(),
               inv_freq.data(),
               num_tokens,
               num_heads,
               num_kv_heads,
               head_dim};
  ASSERT_TRUE(RopeRef(p).ok());
  p.dtype = DType::kBF16;
  p.q = q16.data();
  p.k = k16.data();
  ASSERT_TRUE(RopeRef(p).ok());
  EXPECT_ALL_CLOSE(testing::FromBf16(q16), q, Tolerance::For(DType::kBF16));
  EXPECT_ALL_CLOSE(testing::FromBf16(k16), k, Tolerance::For(DType::kBF16));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeRefTest,
                         ::testing::Combine(::testing::Values(1, 7, 33), ::testing::Values(64, 128),
                                            ::testing::Values(std::pair{9, 3}, std::pair{8, 8},
                                                              std::pair{4, 1})));

TEST(RopeInvFreqTest, UnscaledIsThetaPower) {
  for (int head_dim : {64, 128}) {
    const std::vector<float> inv_freq = RopeInvFreq(head_dim, 10000.0f, RopeScaling{});
    ASSERT_EQ(inv_freq.size(), size_t(head_dim / 2));
    for (int i = 0; i < head_dim / 2; ++i) {
      const double want = std::pow(10000.0, -2.0 * i / head_dim);
      EXPECT_NEAR(inv_freq[i], want, 1e-6 * want) << i;
    }
  }
}

// Llama-3.1's scaling (factor 8, low 1, high 4, original context 8192),
// written as a function of the frequency: f / (2 pi) cycles per token.
TEST(RopeInvFreqTest, Llama3Scaling) {
  RopeScaling s;
  s.enabled = true;
  s.factor = 8.0f;
  s.low_freq_factor = 1.0f;
  s.high_freq_factor = 4.0f;
  s.original_max_position_embeddings = 8192;
  const std::vector<float> inv_freq = RopeInvFreq(128, 500000.0f, s);
  int kept = 0, scaled = 0, mixed = 0;
  for (int i = 0; i < 64; ++i) {
    const double f = std::pow(500000.0, -2.0 * i / 128);
    const double periods_in_context = 8192.0 * f / (2 * std::numbers::pi);
    double want;
    if (periods_in_context > 4.0) {
      want = f, ++kept;
    } else if (periods_in_context < 1.0) {
      want = f / 8.0, ++scaled;
    } else {
      const double smooth = (periods_in_context - 1.0) / (4.0 - 1.0);
      want = (1 - smooth) * f / 8.0 + smooth * f, ++mixed;
    }
    EXPECT_NEAR(inv_freq[i], want, 2e-6 * want) << i;
  }
  // All three regimes are exercised.
  EXPECT_GT(kept, 0);
  EXPECT_GT(scaled, 0);
  EXPECT_GT(mixed, 0);
}

TEST(RopeRefErrorsTest, BadArguments) {
  std::vector<float> q(64), k(64);
  const std::vector<float> inv_freq = RopeInvFreq(64, 10000.0f, RopeScaling{});
  std::vector<int32_t> positions = {-3};
  RopeParams p{DType::kF32,     q.data(), k.data(), 64, 64, positions.data(),
               inv_freq.data(), 1,        1,        1,  64};
  const absl::Status status = RopeRef(p);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("positions[0]"), std::string::npos) << status;
  positions[0] = 3;
  p.head_dim = 63;
  EXPECT_EQ(RopeRef(p).code(), absl::StatusCode::kInvalidArgument);
  p.head_dim = 64;
  p.q_token_stride = 32;
  EXPECT_EQ(RopeRef(p).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace onecard::engine
