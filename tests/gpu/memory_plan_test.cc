// The memory planner, the weight formats and the synthetic shapes (plain C++;
// label unit, built with the CUDA backend): llama3-8b BF16 fits a 24 GiB
// budget with the expected KV, is refused at 14 GiB with "needs X GiB, budget
// Y GiB", the weight bytes match the published parameter count; 4-bit
// weights are counted by format (codes n k / 2, an fp16 scale a group) so
// llama3-70b fits 48 GiB, mistral-large-123b the card with 64k tokens of KV,
// and a budget too small names the formats; FP8 weights are counted at a
// byte a weight and a float a row (or a 128 x 128 block), so llama3-70b FP8
// fits the card with room for KV and mistral-large-123b FP8 fits it too;
// an FP8 KV cache holds twice the tokens in the same budget; explicit
// block counts are honoured or refused, and the step layout never overlaps.
#include "engine/runtime/cuda/memory_plan.h"

#include <string>

#include "engine/kernels/int4_gemm.h"
#include "engine/model/synthetic_shapes.h"
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

// An FP8 KV cache: a byte an element, so the same budget holds twice the
// tokens (less the scales' few KiB), and the plan printout says the format.
TEST(MemoryPlanTest, Fp8KvCacheHoldsTwiceTheTokens) {
  auto bf16 = PlanMemory(Llama8b(24 * kGiB));
  MemoryPlanInput in = Llama8b(24 * kGiB);
  in.kv_cache_dtype = KvCacheDtype::kFp8E4m3;
  auto fp8 = PlanMemory(in);
  ASSERT_TRUE(bf16.ok() && fp8.ok()) << bf16.status() << fp8.status();
  EXPECT_EQ(fp8->kv_bytes_per_token, 32 * 2 * 8 * 128);  // 64 KiB
  EXPECT_EQ(fp8->workspace.kv_scales, 66 * 8 * 4 + 256 - (66 * 8 * 4) % 256);
  EXPECT_EQ(bf16->workspace.kv_scales, 0);
  EXPECT_GE(fp8->num_kv_blocks, 2 * bf16->num_kv_blocks - 1);
  EXPECT_LE(fp8->num_kv_blocks, 2 * bf16->num_kv_blocks + 1);
  EXPECT_LE(fp8->total_bytes(), 24 * kGiB);
  EXPECT_NE(fp8->ToString().find("KV cache"), std::string::npos);
  EXPECT_NE(fp8->ToString().find("(fp8 e4m3; "), std::string::npos) << fp8->ToString();
  EXPECT_NE(bf16->ToString().find("(bf16; "), std::string::npos) << bf16->ToString();
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

MemoryPlanInput Int4(const char* model, int64_t budget) {
  MemoryPlanInput in;
  in.config = *SyntheticModelConfig(model);
  in.weights = ModelWeightsSpec::Uniform(
      in.config, {.format = WeightFormat::kInt4, .group = 128, .offsets = Int4Offsets::kSymmetric});
  in.budget_bytes = budget;
  return in;
}

TEST(MemoryPlanTest, Int4WeightsAreCountedByFormat) {
  auto plan = PlanMemory(Int4("llama3-70b", 48 * kGiB));
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Per layer 8192 x (10240 + 8192 + 57344 + 28672) weights: half a byte
  // each, plus 2 bytes a group of 128.
  const double weights = 80.0 * 8192 * (10240 + 8192 + 57344 + 28672);
  EXPECT_NEAR(static_cast<double>(plan->weights.by_format.at("int4 g128")),
              weights / 2 + weights / 128 * 2, 80 * 4 * 256.0);
  // Embeddings and LM head (not tied) and the norms stay BF16.
  EXPECT_NEAR(static_cast<double>(plan->weights.by_format.at("bf16")),
              2.0 * 128256 * 8192 * 2 + (2 * 80 + 1) * 8192 * 2, 400 * 256.0);
  EXPECT_EQ(plan->weight_bytes, plan->weights.total);
  EXPECT_GT(plan->workspace.dequant, 57344LL * 8192 * 2 - 1);  // the widest: gate_up
  EXPECT_GT(plan->workspace.int4_gemm, 0);
  // A folded RMSNorm's sums of squares: 16 rows of 8192 / 16 tiles.
  EXPECT_EQ(plan->workspace.int4_norm_fold, 16 * 512 * 4);
  const std::string text = plan->ToString();
  EXPECT_NE(text.find("int4 g128"), std::string::npos) << text;
  EXPECT_LE(plan->total_bytes(), 48 * kGiB);
}

TEST(MemoryPlanTest, Mistral123bInt4FitsTheCardWith64kTokensOfKv) {
  auto plan = PlanMemory(Int4("mistral-large-123b", static_cast<int64_t>(139.8 * kGiB)));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GE(plan->num_kv_blocks * plan->kv_block_size, 65536);
}

TEST(MemoryPlanTest, Int4BudgetTooSmallNamesTheFormats) {
  auto plan = PlanMemory(Int4("llama3-70b", 30 * kGiB));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(plan.status().message());
  EXPECT_NE(msg.find("llama3-70b needs "), std::string::npos) << msg;
  EXPECT_NE(msg.find("int4 g128"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bf16"), std::string::npos) << msg;
}

TEST(MemoryPlanTest, ActOrderWeightsCarryTheirColumnMapsAndAGatherBuffer) {
  MemoryPlanInput in = Int4("llama3-8b", 24 * kGiB);
  const auto plain = PlanMemory(in);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->workspace.int4_gather, 0);
  in.weights = ModelWeightsSpec::Uniform(in.config, *ParseProjectionSpec("int4-zero-act"));
  const auto act = PlanMemory(in);
  ASSERT_TRUE(act.ok()) << act.status();
  // An int32 a column for each of the four projections of the 32 layers:
  // k = 4096 (qkv, o, gate_up) and 14336 (down).
  const int64_t maps = 32LL * (3 * 4096 + 14336) * 4;
  MemoryPlanInput zin = in;  // the same codes, scales and zero points in column order
  zin.weights = ModelWeightsSpec::Uniform(in.config, *ParseProjectionSpec("int4-zero"));
  const auto zplan = PlanMemory(zin);
  ASSERT_TRUE(zplan.ok());
  EXPECT_EQ(act->weights.by_format.at("int4 g128 zero act-order"),
            zplan->weights.by_format.at("int4 g128 zero") + maps);
  // The widest input gathered: kInt4GemmMaxRows rows of down's 14336 columns.
  EXPECT_EQ(act->workspace.int4_gather, int64_t{kInt4GemmMaxRows} * 14336 * 2);
}

TEST(WeightSpecTest, ParsesFormatsAndRefusesShapesTheKernelsDoNotTake) {
  EXPECT_EQ(ParseProjectionSpec("bf16")->format, WeightFormat::kBf16);
  const ProjectionSpec g64 = *ParseProjectionSpec("int4-g64-zero");
  EXPECT_EQ(g64.format, WeightFormat::kInt4);
  EXPECT_EQ(g64.group, 64);
  EXPECT_EQ(g64.offsets, Int4Offsets::kZero);
  EXPECT_EQ(g64.Name(), "int4 g64 zero");
  EXPECT_EQ(ParseProjectionSpec("int4")->group, 128);
  const ProjectionSpec act = *ParseProjectionSpec("int4-zero-act");
  EXPECT_TRUE(act.act_order);
  EXPECT_EQ(act.Name(), "int4 g128 zero act-order");
  EXPECT_FALSE(ParseProjectionSpec("int4")->act_order);
  EXPECT_FALSE(ParseProjectionSpec("int4-g48").ok());
  EXPECT_FALSE(ParseProjectionSpec("fp4").ok());
  ModelConfig odd = *SyntheticModelConfig("llama3-8b");
  odd.intermediate_size = 14340;  // down's k is not a multiple of 64
  const absl::Status st = CheckInt4Shape(odd, Projection::kDown, 128);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("down"), std::string::npos) << st;
  EXPECT_TRUE(CheckInt4Shape(odd, Projection::kQkv, 128).ok());
  // A spec naming a shape 4-bit cannot be planned.
  MemoryPlanInput in = Llama8b(24 * kGiB);
  in.config = odd;
  in.weights = ModelWeightsSpec::Uniform(odd, *ParseProjectionSpec("int4"));
  EXPECT_EQ(PlanMemory(in).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(MemoryPlanTest, Fp8WeightsAreCountedAtAByteAWeight) {
  MemoryPlanInput in = Llama8b(static_cast<int64_t>(139.8 * kGiB));
  in.config = *SyntheticModelConfig("llama3-70b");
  in.weights = ModelWeightsSpec::Uniform(in.config, *ParseProjectionSpec("fp8"));
  const auto plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const double rows = 10240 + 8192 + 57344 + 8192;  // qkv, o, gate_up, down
  const double weights = 80.0 * 8192 * (10240 + 8192 + 57344 + 28672);
  EXPECT_NEAR(static_cast<double>(plan->weights.by_format.at("fp8")), weights + 80 * rows * 4,
              80 * 8 * 256.0);
  EXPECT_NE(plan->ToString().find("fp8"), std::string::npos);
  // ~66 GiB of weights leave the card most of its memory for KV: 320 KiB a
  // token (80 layers, 8 KV heads of 128, K and V in BF16).
  EXPECT_GE(plan->num_kv_blocks * plan->kv_block_size, 150000);
  in.weights = ModelWeightsSpec::Uniform(in.config, *ParseProjectionSpec("fp8-block128"));
  const auto block = PlanMemory(in);
  ASSERT_TRUE(block.ok()) << block.status();
  EXPECT_NEAR(static_cast<double>(block->weights.by_format.at("fp8 block128")), weights,
              weights / (128.0 * 128) * 4 + 80 * 8 * 256.0);
  in.config = *SyntheticModelConfig("mistral-large-123b");
  in.weights = ModelWeightsSpec::Uniform(in.config, *ParseProjectionSpec("fp8"));
  EXPECT_TRUE(PlanMemory(in).ok());
}

TEST(WeightSpecTest, ParsesFp8AndRefusesShapesItCannotTake) {
  const ProjectionSpec row = *ParseProjectionSpec("fp8");
  EXPECT_EQ(row.format, WeightFormat::kFp8);
  EXPECT_EQ(row.fp8_scales, Fp8Scales::kRow);
  EXPECT_EQ(row.Name(), "fp8");
  EXPECT_EQ(ParseProjectionSpec("fp8-block128")->Name(), "fp8 block128");
  EXPECT_FALSE(ParseProjectionSpec("fp8-block64").ok());
  EXPECT_EQ(ProjectionBytes(row, 300, 64), 19200 + 1280);  // codes; 300 floats, 256-aligned
  ModelConfig odd = *SyntheticModelConfig("llama3-8b");
  odd.intermediate_size = 14352;  // 16 | 14352, but not 128
  EXPECT_TRUE(CheckFp8Shape(odd, Projection::kDown, Fp8Scales::kRow).ok());
  EXPECT_TRUE(CheckFp8Shape(odd, Projection::kDown, Fp8Scales::kBlock128).ok());
  const absl::Status st = CheckFp8Shape(odd, Projection::kGateUp, Fp8Scales::kBlock128);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("gate_up"), std::string::npos) << st;
  odd.intermediate_size = 14344;  // not 16
  EXPECT_FALSE(CheckFp8Shape(odd, Projection::kDown, Fp8Scales::kRow).ok());
  MemoryPlanInput in = Llama8b(24 * kGiB);
  in.config = odd;
  in.weights = ModelWeightsSpec::Uniform(odd, *ParseProjectionSpec("fp8"));
  EXPECT_EQ(PlanMemory(in).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(MemoryPlanTest, KvCountsEachPoolsAlignment) {
  // head_dim 68 and one KV head: a block of 16 tokens is 2176 bytes a pool,
  // not a multiple of 256, so each layer's K and V pools (each starting
  // 256-byte aligned in the arena) may need padding the plan must hold.
  MemoryPlanInput in = Llama8b(24 * kGiB);
  in.config.num_kv_heads = 1;
  in.config.head_dim = 68;
  in.config.num_heads = 2;
  in.config.hidden_size = 136;
  in.config.intermediate_size = 32;
  in.max_context = 1024;
  in.num_kv_blocks = 1001;  // odd: 1001 x 2176 bytes is not a multiple of 256
  const auto plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int64_t pool = plan->num_kv_blocks * plan->kv_block_size * 68 * 2;
  EXPECT_NE(pool % 256, 0);
  EXPECT_GE(plan->kv_bytes(), 2 * in.config.num_layers * ((pool + 255) / 256 * 256));
  EXPECT_LE(plan->total_bytes(), 24 * kGiB);
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

// Offload (placement_plan.h): llama3-70b int4 (36.8 GiB) under 24 GiB is
// refused whole; DeviceBytesForWeights is the budget less the workspace, the
// reserve and one full-context sequence's KV (or the blocks asked), and a plan
// given that many bytes of weights on the card fits with exactly that KV and
// counts the rest as offloaded.
TEST(MemoryPlanTest, OffloadLeavesTheCardsWeightsBesideOneSequence) {
  MemoryPlanInput in;
  in.config = *SyntheticModelConfig("llama3-70b");
  in.weights = ModelWeightsSpec::Uniform(in.config, *ParseProjectionSpec("int4"));
  in.budget_bytes = 24 * kGiB;
  in.max_context = 4096;
  EXPECT_EQ(PlanMemory(in).status().code(), absl::StatusCode::kResourceExhausted);
  auto room = DeviceBytesForWeights(in);
  ASSERT_TRUE(room.ok()) << room.status();
  MemoryPlanInput on_card = in;
  on_card.device_weight_bytes = *room;
  on_card.offloaded_weight_bytes = 20 * kGiB;
  auto plan = PlanMemory(on_card);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->weight_bytes, *room);
  EXPECT_EQ(plan->num_kv_blocks, plan->max_blocks_per_seq);
  EXPECT_LE(plan->total_bytes(), 24 * kGiB);
  EXPECT_LT(24 * kGiB - plan->total_bytes(), plan->kv_block_bytes);
  EXPECT_EQ(plan->offloaded_bytes, 20 * kGiB);
  EXPECT_NE(plan->ToString().find("20.00 GiB of the model's 36."), std::string::npos)
      << plan->ToString();
  // Blocks asked for come out of the weights' share.
  MemoryPlanInput more_kv = in;
  more_kv.num_kv_blocks = plan->max_blocks_per_seq + 100;
  auto smaller = DeviceBytesForWeights(more_kv);
  ASSERT_TRUE(smaller.ok()) << smaller.status();
  EXPECT_EQ(*room - *smaller, 100 * plan->kv_block_bytes);
  in.budget_bytes = kGiB;
  auto none = DeviceBytesForWeights(in);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(none.status().message().find("--gpu-memory-budget"), std::string::npos)
      << none.status();
}

}  // namespace
}  // namespace onecard::engine
