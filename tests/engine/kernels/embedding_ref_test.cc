// Tests of EmbeddingRef (engine/kernels/embedding_ref.cc): the gathered rows
// against direct indexing of the table, over awkward batch sizes and widths,
// in F32 and BF16; out-of-range ids and unsupported dtypes are errors.
#include <cstring>
#include <tuple>

#include "engine/kernels/embedding.h"
#include "gtest/gtest.h"
#include "tests/engine/kernels/kernel_test_util.h"

namespace onecard::engine {
namespace {

using testing::Poisoned;
using testing::RandomFloats;
using testing::RandomInts;

class EmbeddingRefTest : public ::testing::TestWithParam<std::tuple<int32_t, int64_t>> {};

TEST_P(EmbeddingRefTest, MatchesReference) {
  const auto [num_tokens, hidden] = GetParam();
  const int64_t vocab = 97;
  const std::vector<float> table = RandomFloats(vocab * hidden, 1);
  const std::vector<int32_t> ids = RandomInts(num_tokens, 2, 0, vocab);
  std::vector<float> out = Poisoned(num_tokens * hidden);
  EmbeddingParams p{DType::kF32, ids.data(), table.data(), out.data(), num_tokens, vocab, hidden};
  ASSERT_TRUE(EmbeddingRef(p).ok());
  for (int32_t t = 0; t < num_tokens; ++t) {
    for (int64_t i = 0; i < hidden; ++i) {
      ASSERT_EQ(out[t * hidden + i], table[ids[t] * hidden + i]) << "token " << t << " i " << i;
    }
  }
}

TEST_P(EmbeddingRefTest, Bf16CopiesBits) {
  const auto [num_tokens, hidden] = GetParam();
  const int64_t vocab = 50;
  const std::vector<uint16_t> table = testing::ToBf16(RandomFloats(vocab * hidden, 3));
  const std::vector<int32_t> ids = RandomInts(num_tokens, 4, 0, vocab);
  std::vector<uint16_t> out(num_tokens * hidden, 0xffff);
  EmbeddingParams p{DType::kBF16, ids.data(), table.data(), out.data(), num_tokens, vocab, hidden};
  ASSERT_TRUE(EmbeddingRef(p).ok());
  for (int32_t t = 0; t < num_tokens; ++t) {
    EXPECT_EQ(std::memcmp(&out[t * hidden], &table[ids[t] * hidden], hidden * 2), 0) << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, EmbeddingRefTest,
                         ::testing::Combine(::testing::Values(1, 7, 33),
                                            ::testing::Values(64, 111, 576)));

TEST(EmbeddingRefErrorsTest, TokenIdOutOfRangeNamesTheIndex) {
  const std::vector<float> table = RandomFloats(10 * 4, 5);
  std::vector<float> out(3 * 4);
  for (int32_t bad : {10, -1}) {
    const std::vector<int32_t> ids = {1, 2, bad};
    EmbeddingParams p{DType::kF32, ids.data(), table.data(), out.data(), 3, 10, 4};
    const absl::Status status = EmbeddingRef(p);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("token_ids[2]"), std::string::npos) << status;
  }
}

TEST(EmbeddingRefErrorsTest, UnsupportedDTypeNamesTheSupportedSet) {
  const std::vector<float> table(8);
  std::vector<float> out(4);
  const std::vector<int32_t> ids = {1};
  EmbeddingParams p{DType::kF16, ids.data(), table.data(), out.data(), 1, 2, 4};
  const absl::Status status = EmbeddingRef(p);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(status.message().find("F32, BF16"), std::string::npos) << status;
}

}  // namespace
}  // namespace onecard::engine
