// Tests of GatherColumnsRef (engine/kernels/gather_columns_ref.cc): every
// output value is the input's at the mapped column (checked through the
// inverse map, not the same indexing), rows with a stride wider than k,
// and the errors naming the bad argument.
#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "engine/kernels/gather_columns.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

class GatherColumnsRefTest
    : public ::testing::TestWithParam<std::tuple<int32_t, int64_t, int64_t>> {};

TEST_P(GatherColumnsRefTest, EveryValueComesFromItsColumn) {
  const auto [rows, k, stride] = GetParam();
  std::mt19937 rng(rows * 7919 + k);
  std::vector<int32_t> columns(k);
  std::iota(columns.begin(), columns.end(), 0);
  std::shuffle(columns.begin(), columns.end(), rng);
  // x[r][c] encodes (r, c) so a value names where it came from.
  std::vector<uint16_t> x(rows * stride);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < stride; ++c) x[r * stride + c] = static_cast<uint16_t>(r * 4096 + c);
  }
  std::vector<uint16_t> y(rows * k, 0xFFFF);
  ASSERT_TRUE(GatherColumnsRef({.x = x.data(),
                                .x_row_stride = stride,
                                .columns = columns.data(),
                                .y = y.data(),
                                .rows = rows,
                                .k = k})
                  .ok());
  std::vector<int64_t> inverse(k);
  for (int64_t j = 0; j < k; ++j) inverse[columns[j]] = j;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      ASSERT_EQ(y[r * k + inverse[c]], static_cast<uint16_t>(r * 4096 + c)) << r << ", " << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GatherColumnsRefTest,
                         ::testing::Values(std::make_tuple(1, 64, 64), std::make_tuple(3, 96, 128),
                                           std::make_tuple(16, 1024, 1024),
                                           std::make_tuple(5, 4000, 4096)));

TEST(GatherColumnsRefTest, ErrorsNameTheArgument) {
  std::vector<uint16_t> x(8), y(8);
  std::vector<int32_t> columns = {0, 1, 2, 8};
  GatherColumnsParams p{.x = x.data(),
                        .x_row_stride = 8,
                        .columns = columns.data(),
                        .y = y.data(),
                        .rows = 1,
                        .k = 4};
  absl::Status s = GatherColumnsRef(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("columns[3] = 8 is outside [0, 8)"), std::string::npos) << s;
  columns[3] = -1;
  EXPECT_FALSE(GatherColumnsRef(p).ok());
  p.columns = nullptr;
  EXPECT_NE(GatherColumnsRef(p).message().find("columns and y must be set"), std::string::npos);
  p.columns = columns.data();
  p.k = 0;
  EXPECT_NE(GatherColumnsRef(p).message().find("bad sizes"), std::string::npos);
}

}  // namespace
}  // namespace onecard::engine
