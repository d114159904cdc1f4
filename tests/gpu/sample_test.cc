// MatchesReference for Sample (GPU sampling) against SampleRef: greedy
// (exact), temperature alone, top-k, top-p, min-p, their combination, and
// the penalties with repeated history tokens; vocabularies of 1003, 49152 and
// 128256; 1 / 7 / 33 rows with fresh draws. Greedy must match exactly. A
// sampled token may differ only where the GPU's float sums put the draw on
// the other side of a boundary; that needs the draw within rounding of it,
// so at most 1 row in 64 may differ.
#include "engine/kernels/sample.h"

#include <string>

#include "tests/gpu/gpu_test_util.h"

namespace onecard::testing {
namespace {

using engine::SampleRowParams;

struct SampleCase {
  std::string name;
  int32_t rows;
  int32_t vocab;
  SampleRowParams params;  // uniform is drawn per row
  int32_t history;         // ids per row (with repeats)
};

std::vector<SampleCase> Cases() {
  SampleRowParams greedy;
  SampleRowParams temp{.temperature = 0.7f};
  SampleRowParams topk{.temperature = 1.0f, .top_k = 40};
  SampleRowParams topp{.temperature = 0.9f, .top_p = 0.8f};
  SampleRowParams minp{.temperature = 1.2f, .min_p = 0.05f};
  SampleRowParams all{.temperature = 0.8f, .top_k = 100, .top_p = 0.9f, .min_p = 0.02f};
  SampleRowParams pen{.temperature = 0.0f,
                      .repetition_penalty = 1.3f,
                      .presence_penalty = 0.5f,
                      .frequency_penalty = 0.4f};
  SampleRowParams pen_sample{
      .temperature = 1.0f, .top_p = 0.95f, .repetition_penalty = 1.1f, .frequency_penalty = 0.2f};
  return {{"greedy_r33_v128256", 33, 128256, greedy, 0},
          {"greedy_r1_v1003", 1, 1003, greedy, 0},
          {"greedy_r7_v1003_unaligned_rows", 7, 1003, greedy, 0},
          {"greedy_neutral_history_r7_v1003", 7, 1003, greedy, 300},
          {"temp_r33_v49152", 33, 49152, temp, 0},
          {"topk_r7_v128256", 7, 128256, topk, 0},
          {"topp_r33_v128256", 33, 128256, topp, 0},
          {"minp_r7_v49152", 7, 49152, minp, 0},
          {"all_r33_v128256", 33, 128256, all, 0},
          {"penalties_greedy_r7_v1003", 7, 1003, pen, 300},
          {"penalties_sample_r33_v49152", 33, 49152, pen_sample, 500}};
}

class SampleTest : public ::testing::TestWithParam<SampleCase> {};

TEST_P(SampleTest, MatchesReference) {
  const SampleCase& c = GetParam();
  std::mt19937 rng = SeededRng(std::hash<std::string>()(c.name) & 0xffff, 41);
  // Logits with a realistic spread (a few strong candidates over a flat tail).
  std::vector<float> logits = RandomF32(int64_t{c.rows} * c.vocab, rng, -4.0f, 4.0f);
  for (int32_t r = 0; r < c.rows; ++r) {
    for (int i = 0; i < 8; ++i) logits[int64_t{r} * c.vocab + rng() % c.vocab] += 6.0f;
  }
  std::vector<SampleRowParams> rows(c.rows, c.params);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (auto& row : rows) row.uniform = std::min(u(rng), 0.99999f);
  std::vector<int32_t> history, cu{0};
  for (int32_t r = 0; r < c.rows; ++r) {
    for (int32_t j = 0; j < c.history; ++j) history.push_back(static_cast<int32_t>(rng() % 200));
    cu.push_back(static_cast<int32_t>(history.size()));
  }
  const bool with_history = c.history > 0;
  std::vector<int32_t> want(c.rows, -1);
  engine::SampleParams p{.logits = logits.data(),
                         .rows = rows.data(),
                         .history = with_history ? history.data() : nullptr,
                         .cu_history = with_history ? cu.data() : nullptr,
                         .out_tokens = want.data(),
                         .num_rows = c.rows,
                         .vocab_size = c.vocab};
  ASSERT_TRUE(engine::SampleRef(p).ok());
  DeviceBuf<float> dlogits(logits);
  DeviceBuf<SampleRowParams> drows(rows);
  DeviceBuf<int32_t> dhist(history), dcu(cu), dout(c.rows);
  DeviceBuf<uint8_t> ws(engine::SampleWorkspaceBytes(c.rows, c.vocab));
  ASSERT_CUDA_OK(cudaMemset(ws.get(), 0, ws.size()));
  p.logits = dlogits.get();
  p.rows = drows.get();
  p.history = with_history ? dhist.get() : nullptr;
  p.cu_history = with_history ? dcu.get() : nullptr;
  p.out_tokens = dout.get();
  p.workspace = ws.get();
  for (int run = 0; run < 2; ++run) {  // the counters must be left zero: a rerun agrees
    dout.Poison();
    ASSERT_TRUE(engine::Sample(p, nullptr).ok());
    const std::vector<int32_t> got = dout.Download();
    int32_t differing = 0;
    for (int32_t r = 0; r < c.rows; ++r) {
      ASSERT_GE(got[r], 0) << "row " << r << " not written";
      ASSERT_LT(got[r], c.vocab);
      if (got[r] != want[r]) ++differing;
    }
    if (c.params.temperature == 0.0f) {
      EXPECT_EQ(got, want) << c.name;
    } else {
      EXPECT_LE(differing * 64, c.rows + 63) << differing << " rows differ in " << c.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, SampleTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace onecard::testing
