// Fp8DequantizeBf16Ref against DequantizeFp8 (fp8_weight.h: Fp8Matrix::Value,
// which reads the matrix, not the view the reference reads): every output is
// the BF16 rounding of that value, for row and 128 x 128 block scales, with
// blocks cut short at both edges (n and k not multiples of 128).
#include <vector>

#include "engine/kernels/bf16.h"
#include "engine/kernels/fp8_dequant.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fp8_testing.h"

namespace onecard::engine {
namespace {

using onecard::testing::RandomFp8Matrix;

Fp8WeightView View(const Fp8Matrix& m) {
  return {.codes = m.codes.data(),
          .scales = m.scales.data(),
          .n = m.n,
          .k = m.k,
          .scales_kind = m.scales_kind};
}

TEST(Fp8DequantRefTest, EachValueIsTheWeightsValueRoundedOnce) {
  for (const Fp8Scales kind : {Fp8Scales::kRow, Fp8Scales::kBlock128}) {
    const Fp8Matrix m = RandomFp8Matrix(260, 304, kind, 7);
    ASSERT_TRUE(m.Validate("w").ok());
    std::vector<uint16_t> out(m.n * m.k, 0xffff);
    ASSERT_TRUE(Fp8DequantizeBf16Ref({.w = View(m), .out = out.data()}).ok());
    const std::vector<float> want = DequantizeFp8(m);
    for (int64_t i = 0; i < m.n * m.k; ++i) {
      ASSERT_EQ(out[i], FloatToBf16(want[i])) << Fp8ScalesName(kind) << " " << i;
    }
  }
}

TEST(Fp8DequantRefTest, RefusesWhatTheKernelDoesNotTake) {
  const Fp8Matrix m = RandomFp8Matrix(4, 32, Fp8Scales::kRow, 1);
  std::vector<uint16_t> out(4 * 32);
  Fp8DequantParams p{.w = View(m), .out = out.data()};
  p.w.k = 24;  // not a multiple of 16
  const absl::Status st = Fp8DequantizeBf16Ref(p);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("k=24"));
  p.w.k = 32;
  p.out = nullptr;
  EXPECT_EQ(Fp8DequantizeBf16Ref(p).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace onecard::engine
