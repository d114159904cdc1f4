#include "engine/kernels/launch_settings.h"

#include <initializer_list>
#include <string>

#include "engine/kernels/int4_gemm.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

TEST(LaunchSettingsTest, DefaultsAreWhatServes) {
  const LaunchSettings s = GetLaunchSettings();
  EXPECT_TRUE(s.programmatic_launch);
  EXPECT_EQ(s.gemv_blocks_per_sm, 2);
  EXPECT_TRUE(s.fp8_gemm_cublas_scales);
  EXPECT_EQ(s.fp8_gemm_scaled_min_rows, 64);
  EXPECT_EQ(s.int4_norm_in_gemm_max_rows, 4);
  EXPECT_FALSE(s.prefetch_o_in_attention);
  EXPECT_EQ(s.int4_stream_blocks_per_sm, 0);
  EXPECT_TRUE(s.early_dependents);
  EXPECT_FALSE(s.gemv_early_dependents);
  EXPECT_FALSE(s.int4_cluster_split_k);
  EXPECT_FALSE(s.int4_fold_norm);
  EXPECT_EQ(s.int4_wgmma_from_rows, 17);
  EXPECT_EQ(s.int4_wgmma_split_from_rows, 0);
  EXPECT_EQ(s.int4_wgmma_split_max_grid_percent, 100);
  EXPECT_EQ(s.int4_wgmma_cluster, 1);
  EXPECT_TRUE(s.int4_wgmma_overlap);
  EXPECT_TRUE(s.int4_wgmma_double_sums);
  EXPECT_EQ(s.int4_wgmma_scaled_from_rows, 128);
  EXPECT_EQ(s.int4_wgmma_min_split_stages, 48);
  EXPECT_TRUE(s.int4_wgmma_staged_epilogue);
  EXPECT_FALSE(s.int4_wgmma_scaled_wait_first);
  EXPECT_TRUE(s.int4_wgmma_tail_split);
  EXPECT_FALSE(s.int4_wgmma_early_dependents);
  EXPECT_EQ(s.int4_gemv_max_rows, 4);
}

TEST(LaunchSettingsTest, SetThenGetAndBack) {
  ASSERT_TRUE(SetLaunchSettings({.programmatic_launch = false,
                                 .gemv_blocks_per_sm = 1,
                                 .fp8_gemm_scaled_min_rows = 129,
                                 .int4_norm_in_gemm_max_rows = 0,
                                 .prefetch_o_in_attention = true,
                                 .int4_stream_blocks_per_sm = 1,
                                 .early_dependents = false,
                                 .gemv_early_dependents = true,
                                 .int4_cluster_split_k = true,
                                 .int4_fold_norm = true,
                                 .int4_wgmma_from_rows = 65,
                                 .int4_wgmma_split_from_rows = 9,
                                 .int4_wgmma_split_max_grid_percent = 75,
                                 .int4_wgmma_cluster = 4,
                                 .int4_wgmma_overlap = false,
                                 .int4_wgmma_double_sums = false,
                                 .int4_wgmma_scaled_from_rows = 65,
                                 .int4_wgmma_min_split_stages = 0,
                                 .int4_wgmma_staged_epilogue = false,
                                 .int4_wgmma_scaled_wait_first = true,
                                 .int4_wgmma_tail_split = false,
                                 .int4_wgmma_early_dependents = true,
                                 .int4_gemv_max_rows = 8})
                  .ok());
  EXPECT_EQ(GetLaunchSettings().int4_gemv_max_rows, 8);
  EXPECT_EQ(GetLaunchSettings().int4_wgmma_scaled_from_rows, 65);
  EXPECT_EQ(GetLaunchSettings().int4_wgmma_min_split_stages, 0);
  EXPECT_FALSE(GetLaunchSettings().int4_wgmma_staged_epilogue);
  EXPECT_TRUE(GetLaunchSettings().int4_wgmma_scaled_wait_first);
  EXPECT_FALSE(GetLaunchSettings().int4_wgmma_tail_split);
  EXPECT_TRUE(GetLaunchSettings().int4_wgmma_early_dependents);
  EXPECT_FALSE(GetLaunchSettings().int4_wgmma_double_sums);
  EXPECT_FALSE(GetLaunchSettings().int4_wgmma_overlap);
  EXPECT_EQ(GetLaunchSettings().int4_wgmma_from_rows, 65);
  EXPECT_EQ(GetLaunchSettings().int4_wgmma_split_from_rows, 9);
  EXPECT_EQ(GetLaunchSettings().int4_wgmma_split_max_grid_percent, 75);
  EXPECT_EQ(GetLaunchSettings().int4_wgmma_cluster, 4);
  EXPECT_TRUE(GetLaunchSettings().int4_cluster_split_k);
  EXPECT_TRUE(GetLaunchSettings().int4_fold_norm);
  EXPECT_EQ(GetLaunchSettings().int4_stream_blocks_per_sm, 1);
  EXPECT_FALSE(GetLaunchSettings().early_dependents);
  EXPECT_TRUE(GetLaunchSettings().gemv_early_dependents);
  EXPECT_EQ(GetLaunchSettings().int4_norm_in_gemm_max_rows, 0);
  EXPECT_TRUE(GetLaunchSettings().prefetch_o_in_attention);
  EXPECT_FALSE(GetLaunchSettings().programmatic_launch);
  EXPECT_EQ(GetLaunchSettings().gemv_blocks_per_sm, 1);
  EXPECT_EQ(GetLaunchSettings().fp8_gemm_scaled_min_rows, 129);
  ASSERT_TRUE(SetLaunchSettings({}).ok());
  EXPECT_EQ(GetLaunchSettings().int4_gemv_max_rows, 4);
  EXPECT_TRUE(GetLaunchSettings().programmatic_launch);
  EXPECT_EQ(GetLaunchSettings().gemv_blocks_per_sm, 2);
  EXPECT_EQ(GetLaunchSettings().fp8_gemm_scaled_min_rows, 64);
  EXPECT_EQ(GetLaunchSettings().int4_norm_in_gemm_max_rows, 4);
  EXPECT_FALSE(GetLaunchSettings().prefetch_o_in_attention);
  EXPECT_EQ(GetLaunchSettings().int4_stream_blocks_per_sm, 0);
  EXPECT_TRUE(GetLaunchSettings().early_dependents);
  EXPECT_FALSE(GetLaunchSettings().gemv_early_dependents);
  EXPECT_FALSE(GetLaunchSettings().int4_cluster_split_k);
  EXPECT_FALSE(GetLaunchSettings().int4_fold_norm);
  EXPECT_EQ(GetLaunchSettings().int4_wgmma_from_rows, 17);
  EXPECT_EQ(GetLaunchSettings().int4_wgmma_split_from_rows, 0);
  EXPECT_EQ(GetLaunchSettings().int4_wgmma_split_max_grid_percent, 100);
  EXPECT_EQ(GetLaunchSettings().int4_wgmma_cluster, 1);
  EXPECT_TRUE(GetLaunchSettings().int4_wgmma_overlap);
  EXPECT_TRUE(GetLaunchSettings().int4_wgmma_double_sums);
  EXPECT_EQ(GetLaunchSettings().int4_wgmma_scaled_from_rows, 128);
  EXPECT_EQ(GetLaunchSettings().int4_wgmma_min_split_stages, 48);
  EXPECT_TRUE(GetLaunchSettings().int4_wgmma_staged_epilogue);
  EXPECT_FALSE(GetLaunchSettings().int4_wgmma_scaled_wait_first);
  EXPECT_TRUE(GetLaunchSettings().int4_wgmma_tail_split);
  EXPECT_FALSE(GetLaunchSettings().int4_wgmma_early_dependents);
}

// SetLaunchSettings with `field` at each of `bad` (and programmatic_launch
// off): refused naming `name`, nothing changed (the field still `kept`).
void ExpectRefused(int32_t LaunchSettings::*field, std::initializer_list<int32_t> bad, int32_t kept,
                   const char* name) {
  for (int32_t value : bad) {
    LaunchSettings settings{.programmatic_launch = false};
    settings.*field = value;
    const absl::Status st = SetLaunchSettings(settings);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << name << " = " << value;
    EXPECT_NE(std::string(st.message()).find(name), std::string::npos) << st;
    EXPECT_TRUE(GetLaunchSettings().programmatic_launch);
    EXPECT_EQ(GetLaunchSettings().*field, kept) << name;
  }
}

TEST(LaunchSettingsTest, OutOfRangeIsRefusedNamingTheFieldAndChangesNothing) {
  ExpectRefused(&LaunchSettings::gemv_blocks_per_sm, {0, 3, -1}, 2, "gemv_blocks_per_sm");
  ExpectRefused(&LaunchSettings::fp8_gemm_scaled_min_rows, {0, -64}, 64,
                "fp8_gemm_scaled_min_rows");
  ExpectRefused(&LaunchSettings::int4_norm_in_gemm_max_rows, {-1, kInt4GemmMaxNormRows + 1}, 4,
                "int4_norm_in_gemm_max_rows");
  ExpectRefused(&LaunchSettings::int4_stream_blocks_per_sm, {-1, kInt4GemmMaxBlocksPerSm + 1}, 0,
                "int4_stream_blocks_per_sm");
  ExpectRefused(&LaunchSettings::int4_wgmma_scaled_from_rows, {-1, kInt4GemmMaxRows + 1}, 128,
                "int4_wgmma_scaled_from_rows");
  ExpectRefused(&LaunchSettings::int4_wgmma_min_split_stages,
                {-1, static_cast<int32_t>(kInt4MaxK / 128 + 1)}, 48, "int4_wgmma_min_split_stages");
  ExpectRefused(&LaunchSettings::int4_wgmma_from_rows, {-1, kInt4GemmMaxRows + 1}, 17,
                "int4_wgmma_from_rows");
  ExpectRefused(&LaunchSettings::int4_wgmma_split_from_rows, {-1, kInt4GemmMaxRows + 1}, 0,
                "int4_wgmma_split_from_rows");
  ExpectRefused(&LaunchSettings::int4_wgmma_split_max_grid_percent, {0, 101, -1}, 100,
                "int4_wgmma_split_max_grid_percent");
  ExpectRefused(&LaunchSettings::int4_wgmma_cluster, {0, 3, 8}, 1, "int4_wgmma_cluster");
  ExpectRefused(&LaunchSettings::int4_gemv_max_rows, {-1, kInt4GemmGemvMaxRows + 1}, 4,
                "int4_gemv_max_rows");
}

}  // namespace
}  // namespace onecard::engine
