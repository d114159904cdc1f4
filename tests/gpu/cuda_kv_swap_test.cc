// KV swap on the CUDA runner (engine/runtime/cuda/kv_swap.h): a sequence
// prefilled, its blocks swapped out to pinned host memory, the device blocks
// overwritten by another sequence, then swapped into other blocks, decodes
// with the logits of the same sequence run uninterrupted on a runner of the
// same weights, bit for bit, through the eager first decode step and the
// captured graph of the next ones. Cases: a BF16 KV cache, and an FP8 one
// with layer 0 kept in BF16 (parts of different block bytes), each with the
// blocks moved by the copy engines and by the SMs (CopyKvBlocks). Also: a step
// that swaps one sequence out of blocks and another into the same blocks
// (the outs complete before the ins write), the swap space's size, and its
// refusals (more than the host has, ids out of range, no swap space).
#include <algorithm>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "engine/common/host_info.h"
#include "engine/runtime/cuda/cuda_model_runner.h"
#include "engine/runtime/kv_scales.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/gpu/runner_test_util.h"

namespace onecard::engine {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kBlock = 16;
constexpr int32_t kPrompt = 40;  // three blocks
constexpr int32_t kDecodes = 6;  // the third block fills up to 46 tokens

ModelConfig Config() { return SmallLlamaConfig("kv-swap-4l", 4); }

CudaRunnerOptions Options(bool fp8, KvSwapCopy copy = KvSwapCopy::kAuto) {
  CudaRunnerOptions o = TestOptions();
  o.kv_swap_copy = copy;
  o.tune_gemms = false;  // the same cuBLAS algorithms in both runners
  o.max_context = 256;
  o.kv_block_size = kBlock;
  o.num_kv_blocks = 32;
  if (fp8) {
    const ModelConfig c = Config();
    KvScales scales = KvScales::Ones(c.num_layers, c.num_kv_heads, "test");
    std::fill(scales.k.begin(), scales.k.end(), 0.02f);
    std::fill(scales.v.begin(), scales.v.end(), 0.01f);
    scales.bf16_layers.assign(c.num_layers, 0);
    scales.bf16_layers[0] = 1;
    o.kv_cache_dtype = KvCacheDtype::kFp8E4m3;
    o.kv_scales = scales;
  }
  return o;
}

std::unique_ptr<CudaModelRunner> MakeRunner(bool fp8, KvSwapCopy copy = KvSwapCopy::kAuto) {
  auto runner = CreateRandomCudaModelRunner(Config(), Options(fp8, copy));
  EXPECT_TRUE(runner.ok()) << runner.status();
  return runner.ok() ? std::move(runner).value() : nullptr;
}

std::vector<int32_t> Ids(int32_t n, int32_t salt) {
  std::vector<int32_t> ids(n);
  for (int32_t i = 0; i < n; ++i) ids[i] = (i * 37 + salt * 101 + 5) % 1000;
  return ids;
}

// One chunk of sequence `seq` (its last token's logits).
std::vector<float> Step(ModelRunner& runner, int64_t seq, std::span<const int32_t> tokens,
                        int32_t start, const std::vector<int32_t>& table) {
  BatchInput batch;
  batch.chunks.push_back({seq, tokens, start, table});
  std::vector<float> logits;
  const absl::Status s = runner.Forward(batch, &logits);
  EXPECT_TRUE(s.ok()) << s;
  return logits;
}

// kDecodes greedy decode steps of a sequence whose kPrompt tokens are in
// the pool; returns every step's logits.
std::vector<std::vector<float>> Decode(ModelRunner& runner, int64_t seq,
                                       std::vector<int32_t> tokens,
                                       const std::vector<int32_t>& table, std::vector<float> last) {
  std::vector<std::vector<float>> steps;
  for (int32_t i = 0; i < kDecodes; ++i) {
    tokens.push_back(
        static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin()));
    const int32_t pos = static_cast<int32_t>(tokens.size()) - 1;
    last = Step(runner, seq, std::span<const int32_t>(tokens).subspan(pos, 1), pos, table);
    steps.push_back(last);
  }
  return steps;
}

void ExpectBitwiseEqual(const std::vector<std::vector<float>>& a,
                        const std::vector<std::vector<float>>& b, const std::string& label) {
  ASSERT_EQ(a.size(), b.size()) << label;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << label << " step " << i;
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)), 0)
        << label << ": decode step " << i << " differs";
  }
}

// Two runners of the same weights and KV cache (the parameter: FP8 with a
// BF16 layer, else BF16; and what moves the blocks, the copy engines or the
// SMs): `whole_` runs sequences uninterrupted, `runner_` swaps them.
class CudaKvSwapTest : public ::testing::TestWithParam<std::tuple<bool, KvSwapCopy>> {
 protected:
  void SetUp() override {
    whole_ = MakeRunner(std::get<0>(GetParam()));
    runner_ = MakeRunner(std::get<0>(GetParam()), std::get<1>(GetParam()));
    ASSERT_NE(whole_, nullptr);
    ASSERT_NE(runner_, nullptr);
  }
  std::unique_ptr<CudaModelRunner> whole_, runner_;
};

TEST_P(CudaKvSwapTest, AResumedSequenceDecodesWithTheUninterruptedLogits) {
  const bool fp8 = std::get<0>(GetParam());
  ModelRunner& whole = *whole_;
  ModelRunner& runner = *runner_;
  const std::vector<int32_t> prompt = Ids(kPrompt, 1);
  const std::vector<int32_t> table = {5, 9, 10};
  const auto expected = Decode(whole, 1, prompt, table, Step(whole, 1, prompt, 0, table));

  absl::StatusOr<KvSwapSpace> space = runner.AllocateSwapSpace(int64_t{4} << 20);
  ASSERT_TRUE(space.ok()) << space.status();
  // Layer 0 BF16 (2 bytes an element), the others FP8 (1) in the fp8 case.
  const int64_t elements = int64_t{kBlock} * Config().num_kv_heads * Config().head_dim;
  const int64_t layers = Config().num_layers;
  EXPECT_EQ(space->block_bytes,
            fp8 ? 2 * elements * (2 + (layers - 1)) : 2 * elements * 2 * layers);
  EXPECT_EQ(space->num_blocks, (int64_t{4} << 20) / space->block_bytes);

  const std::vector<float> last = Step(runner, 1, prompt, 0, table);
  ASSERT_TRUE(runner.SwapOut(std::vector<KvBlockCopy>{{5, 0}, {9, 1}, {10, 2}}).ok());
  Step(runner, 2, Ids(3 * kBlock, 2), 0, table);  // another sequence overwrites the blocks
  const std::vector<int32_t> resumed = {20, 3, 4};
  ASSERT_TRUE(runner.SwapIn(std::vector<KvBlockCopy>{{20, 0}, {3, 1}, {4, 2}}).ok());
  ExpectBitwiseEqual(Decode(runner, 1, prompt, resumed, last), expected,
                     fp8 ? "fp8 cache" : "bf16 cache");
}

// One step's SwapOut of X from blocks {1, 2} and SwapIn of Y into the same
// blocks: X's copies must have read the blocks before Y's write them.
TEST_P(CudaKvSwapTest, OutsCompleteBeforeInsOfTheSameStep) {
  ModelRunner& whole = *whole_;
  ModelRunner& runner = *runner_;
  const std::vector<int32_t> x = Ids(kPrompt, 3), y = Ids(kPrompt, 4);
  const std::vector<int32_t> x_table = {1, 2, 11}, y_table = {3, 4, 12};
  const auto x_expected = Decode(whole, 1, x, x_table, Step(whole, 1, x, 0, x_table));
  const auto y_expected = Decode(whole, 2, y, y_table, Step(whole, 2, y, 0, y_table));

  ASSERT_TRUE(runner.AllocateSwapSpace(int64_t{4} << 20).ok());
  const std::vector<float> x_last = Step(runner, 1, x, 0, x_table);
  const std::vector<float> y_last = Step(runner, 2, y, 0, y_table);
  ASSERT_TRUE(runner.SwapOut(std::vector<KvBlockCopy>{{3, 3}, {4, 4}, {12, 5}}).ok());
  // The step: X out of {1, 2, 11}, Y into {1, 2, 11}.
  ASSERT_TRUE(runner.SwapOut(std::vector<KvBlockCopy>{{1, 0}, {2, 1}, {11, 2}}).ok());
  ASSERT_TRUE(runner.SwapIn(std::vector<KvBlockCopy>{{1, 3}, {2, 4}, {11, 5}}).ok());
  ExpectBitwiseEqual(Decode(runner, 2, y, x_table, y_last), y_expected, "y in x's blocks");
  ASSERT_TRUE(runner.SwapIn(std::vector<KvBlockCopy>{{7, 0}, {8, 1}, {13, 2}}).ok());
  ExpectBitwiseEqual(Decode(runner, 1, x, {7, 8, 13}, x_last), x_expected, "x resumed");
}

INSTANTIATE_TEST_SUITE_P(KvCache, CudaKvSwapTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Values(KvSwapCopy::kCopyEngines,
                                                              KvSwapCopy::kSms)),
                         [](const ::testing::TestParamInfo<std::tuple<bool, KvSwapCopy>>& info) {
                           return std::string(std::get<0>(info.param) ? "Fp8" : "Bf16") +
                                  (std::get<1>(info.param) == KvSwapCopy::kSms ? "Sms"
                                                                               : "CopyEngines");
                         });

TEST(CudaKvSwapErrorsTest, RefusesWhatItCannotHold) {
  auto runner = MakeRunner(false);
  ASSERT_NE(runner, nullptr);
  EXPECT_EQ(runner->SwapOut(std::vector<KvBlockCopy>{{0, 0}}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(runner->AllocateSwapSpace(100).status().code(), absl::StatusCode::kInvalidArgument);
  const int64_t available = HostAvailableMemoryBytes();
  if (available > 0) {
    const absl::StatusOr<KvSwapSpace> huge = runner->AllocateSwapSpace(available + (1 << 30));
    EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(huge.status().message()), HasSubstr("available memory"));
  }
  absl::StatusOr<KvSwapSpace> space = runner->AllocateSwapSpace(int64_t{1} << 20);
  ASSERT_TRUE(space.ok()) << space.status();
  EXPECT_EQ(runner->SwapIn(std::vector<KvBlockCopy>{{32, 0}}).code(),
            absl::StatusCode::kInvalidArgument);  // device block 32 of 32
  EXPECT_EQ(runner->SwapOut(std::vector<KvBlockCopy>{{0, space->num_blocks}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runner->AllocateSwapSpace(int64_t{1} << 20).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace onecard::engine
