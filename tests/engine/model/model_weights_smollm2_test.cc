// LoadWeightsF32 on the real SmolLM2-135M-Instruct Q4_1 GGUF against
// transformers' own GGUF loading (dequantized by the gguf package, Q/K
// permutation undone): slices of embedding, q/k/v/o, gate/up/down and norms
// of the first and last layers, plus whole-tensor sums that see every row
// (tests/golden/model/smollm2_weight_slices.json).
#include <cmath>

#include "engine/model/model_weights.h"
#include "gtest/gtest.h"
#include "tests/engine/model/model_test_util.h"
#include "tests/engine/model/tiny_model.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using ::onecard::testing::SourcePath;

TEST(ModelWeightsSmolLm2Test, MatchesTransformers) {
  nlohmann::json golden =
      ::onecard::testing::LoadTestJson(SourcePath("tests/golden/model/smollm2_weight_slices.json"));
  auto ckpt = OpenCheckpoint(SourcePath(golden["model"].get<std::string>()));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto weights = LoadWeightsF32(*ckpt);
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_EQ(weights->lm_head.empty(), golden["tie_word_embeddings"].get<bool>());
  // Same dequantized fp32 values: only the rounding of a fused multiply-add
  // could differ.
  const ::onecard::testing::Tolerance tol{1e-6, 1e-6, 1e-12};
  for (const auto& slice : golden["slices"]) {
    std::string name = slice["name"];
    SCOPED_TRACE(name);
    const std::vector<float>* w = ::onecard::testing::LoadedTensor(*weights, name);
    ASSERT_NE(w, nullptr);
    std::vector<int64_t> shape = slice["shape"];
    int64_t rows = shape[0], cols = shape.size() > 1 ? shape[1] : 1;
    ASSERT_EQ(static_cast<int64_t>(w->size()), rows * cols);
    std::vector<int64_t> picked_cols = slice["cols"];
    std::vector<float> got, want;
    if (slice.contains("rows")) {
      for (size_t r = 0; r < slice["rows"].size(); ++r) {
        int64_t row = slice["rows"][r];
        for (int64_t c : picked_cols) got.push_back((*w)[row * cols + c]);
        for (float v : slice["values"][r].get<std::vector<float>>()) want.push_back(v);
      }
    } else {
      for (int64_t c : picked_cols) got.push_back((*w)[c]);
      want = slice["values"].get<std::vector<float>>();
    }
    EXPECT_ALL_CLOSE(got, want, tol);
    double sum = 0, row_weighted = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        sum += (*w)[r * cols + c];
        row_weighted += (*w)[r * cols + c] * static_cast<double>(r + 1);
      }
    }
    double want_sum = slice["sum"], want_weighted = slice["row_weighted_sum"];
    EXPECT_NEAR(sum, want_sum, 1e-6 * (1 + std::fabs(want_sum)));
    EXPECT_NEAR(row_weighted, want_weighted, 1e-6 * (1 + std::fabs(want_weighted)));
  }
}

}  // namespace
}  // namespace onecard::engine
