// The memory planner and the synthetic shapes (plain C++; label unit, built
// with the CUDA backend): llama3-8b BF16 fits a 24 GiB budget with the
// expected KV, is refused at 14 GiB with "needs X GiB, budget Y GiB", the
// weight bytes match the published parameter count, explicit block counts
// are honoured or refused, and the step layout never overlaps.
#include "engine/runtime/cuda/memory_plan.h"

#include <string>

#include "engine/runtime/cuda/synthetic_shapes.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

MemoryPlanInput Llama8b(int64_t budget) {
  MemoryPlanInput in;
  in.config = *SyntheticModelConfig("llama3-8b");
  in.budget_bytes = budget;
  return in;
}

TEST(SyntheticShapesTest, KnownShapesValidateAndUnknownIsNotFound) {
  for (const std::string& name : SyntheticModelNames()) {
    auto c = SyntheticModelConfig(name);
    ASSERT_TRUE(c.ok()) << name;
    EXPECT_TRUE(c->Validate().ok()) << name;
  }
  const auto missing = SyntheticModelConfig("llama3-9b");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("llama3-8b"), std::string::npos);
}

TEST(SyntheticShapesTest, ParameterCountsMatchThePublishedModels) {
  // Llama-3-8B: 8.03e9 parameters, of which the embedding is 0.525e9.
  const ModelConfig c = *SyntheticModelConfig("llama3-8b");
  const double params = static_cast<double>(MatmulParameters(c) + c.vocab_size * c.hidden_size);
  EXPECT_NEAR(params / 1e9, 8.03, 0.01);
  const ModelConfig big = *SyntheticModelConfig("mistral-large-123b");
  EXPECT_NEAR(static_cast<double>(MatmulParameters(big)) / 1e9, 122.6, 1.0);
}

TEST(MemoryPlanTest, Llama8bFits24GiB) {
  auto plan = PlanMemory(Llama8b(24 * kGiB));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_NEAR(static_cast<double>(plan->weight_bytes) / kGiB, 14.96, 0.01);
  EXPECT_EQ(plan->kv_bytes_per_token, 32 * 2 * 8 * 128 * 2);  // 128 KiB
  EXPECT_GE(plan->num_kv_blocks, plan->max_blocks_per_seq);
  EXPECT_LE(plan->total_bytes(), 24 * kGiB);
  EXPECT_NE(plan->ToString().find("KV cache"), std::string::npos);
}

TEST(MemoryPlanTest, Llama8bIsRefusedAt14GiB) {
  auto plan = PlanMemory(Llama8b(14 * kGiB));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(plan.status().message());
  EXPECT_NE(msg.find("llama3-8b needs "), std::string::npos) << msg;
  EXPECT_NE(msg.find(" GiB, budget 14.00 GiB"), std::string::npos) << msg;
}

TEST(MemoryPlanTest, ExplicitBlockCountsAreHonouredOrRefused) {
  MemoryPlanInput in = Llama8b(24 * kGiB);
  in.num_kv_blocks = 1000;
  auto plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->num_kv_blocks, 1000);
  in.num_kv_blocks = 10;  // fewer than one 8192-token sequence
  EXPECT_EQ(PlanMemory(in).status().code(), absl::StatusCode::kResourceExhausted);
  in.num_kv_blocks = 1 << 30;
  EXPECT_EQ(PlanMemory(in).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(MemoryPlanTest, BadInputIsInvalidArgument) {
  MemoryPlanInput in = Llama8b(24 * kGiB);
  in.max_batched_tokens = 4;  // fewer than max_num_seqs
  EXPECT_EQ(PlanMemory(in).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StepLayoutTest, RegionsAreOrderedAlignedAndDisjoint) {
  const StepLayout l = MakeStepLayout(33, 7, 7, 512, 1000);
  const int64_t offsets[] = {l.token_ids,     l.positions, l.slots,       l.logit_rows,
                             l.cu_query_lens, l.start_pos, l.sample_rows, l.cu_history,
                             l.block_tables,  l.history};
  const int64_t sizes[] = {33 * 4, 33 * 4, 33 * 4, 7 * 4,       8 * 4,
                           7 * 4,  7 * 32, 8 * 4,  7 * 512 * 4, 1000 * 4};
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(offsets[i] % 16, 0) << i;
    const int64_t end = offsets[i] + sizes[i];
    EXPECT_LE(end, i + 1 < 10 ? offsets[i + 1] : l.size_bytes) << i;
  }
  EXPECT_EQ(l.UsedBytes(10), l.history + 40);
}

}  // namespace
}  // namespace onecard::engine
