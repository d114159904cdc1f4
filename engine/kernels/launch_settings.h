// How the CUDA kernels launch, process-wide: the settings that are measured
// against each other (onecard-bench-cuda's --pdl, --gemv_blocks_per_sm,
// --fp8_gemm_cublas_scales, --fp8_gemm_scaled_min_rows, --int4_norm_in_gemm_max_rows,
// --prefetch_o_in_attention, --int4_stream_blocks_per_sm, --early_dependents,
// --gemv_early_dependents, --int4_cluster_split_k, --int4_fold_norm, --int4_wgmma_from_rows,
// --int4_wgmma_split_from_rows, --int4_wgmma_split_max_grid_percent,
// --int4_wgmma_cluster, --int4_wgmma_overlap, --int4_wgmma_double_sums,
// --int4_wgmma_scaled_from_rows, --int4_wgmma_min_split_stages,
// --int4_wgmma_staged_epilogue, --int4_wgmma_scaled_wait_first,
// --int4_wgmma_tail_split, --int4_wgmma_early_dependents and --int4_gemv_max_rows
// flags) rather than chosen per call. The defaults are what serves; a runner never
// changes them. Set them before the first launch (a kernel launched meanwhile sees
// either the old or the new value).
#ifndef ONECARD_ENGINE_KERNELS_LAUNCH_SETTINGS_H_
#define ONECARD_ENGINE_KERNELS_LAUNCH_SETTINGS_H_

#include <cstdint>

#include "absl/status/status.h"

namespace onecard::engine {

struct LaunchSettings {
  // Programmatic dependent launch (cuda_common.cuh LaunchPdl): a kernel's
  // launch and constant-data prologue overlap the previous kernel.
  bool programmatic_launch = true;
  // Blocks of Gemv resident on an SM (1 or 2; gemv.cu).
  int32_t gemv_blocks_per_sm = 2;
  // Fp8Gemm (fp8_gemm.h) with the activations' and the weight's scales and
  // the BF16 output inside cuBLASLt's product (its outer-vector scale modes)
  // where cuBLASLt has such an algorithm for the shape; false: the product's
  // fp32 sums, then Fp8Gemm's own epilogue kernel.
  bool fp8_gemm_cublas_scales = true;
  // The rows of x from which Fp8Gemm takes that scaled form (at least 1).
  // Measured on the H200 with cuBLASLt 13.1 (bench/experiments/fp8_block_scales.cu,
  // bench/results/fp8.md): its outer-vector kernels beat the fp32 sums plus the
  // epilogue kernel on every 8B and 70B product from 128 rows (by 1.4-2x at
  // 2048) and lose to them on the MLP products at 8-32 rows.
  int32_t fp8_gemm_scaled_min_rows = 64;
  // The CUDA runner's 4-bit q/k/v and gate/up products of up to this many
  // rows (0 to kInt4GemmMaxNormRows) take the RMSNorm in Int4Gemm's prologue
  // instead of an RmsNorm launch before them: with int4_gemv_max_rows, kGemv
  // normalizes the rows of x it stages (one launch and one pass over the
  // residual fewer, measured faster at 1 row on 8B and 70B and at no batch
  // slower); 0: always apart (the comparison arm).
  int32_t int4_norm_in_gemm_max_rows = 4;
  // The CUDA runner's decode attention asks the L2 cache for the o
  // projection's weights while it runs (PagedAttentionSplitOptions::prefetch),
  // where they take at most three quarters of the L2 cache.
  bool prefetch_o_in_attention = false;
  // Blocks of Int4Gemm's kStream kernel an SM (1 to kInt4GemmMaxBlocksPerSm,
  // at most what fits); 0: as many as fit (two at 1-8 rows). Fewer leave an
  // SM room for the next launch's blocks; measured slower at one block (an
  // H100: 8B 4-bit decode at batch 1 -7 %; bench/results' int4 page).
  int32_t int4_stream_blocks_per_sm = 0;
  // The kernels between the decode step's projections (RMSNorm, RoPE and the
  // cache write, decode attention and its combine) and Int4Gemm's kStream
  // kernel let the next kernel launch before they wait for the previous one
  // (griddepcontrol.launch_dependents first, cuda::PdlEnter), so that the
  // kernel after a small one is launched, and a projection's producer is
  // copying its first stages of weights, while the kernels ahead still run
  // (an H100, batch 1: 8B 4-bit decode +3.6 %, 70B +2.7 %); false: after
  // the wait.
  bool early_dependents = true;
  // The BF16 and FP8 Gemv kernels (the projections of the BF16 and FP8
  // decode steps) let the next kernel launch before their wait too, as
  // early_dependents does for the kernels between them; false: after it.
  bool gemv_early_dependents = false;
  // Int4Gemm's kStream kernel, up to 16 rows, splits K inside thread block
  // clusters where the weight's row groups times a cluster size fill the
  // grid (Int4GemmClusterSize): each row tile's parts sent to the cluster's
  // block that finishes it, through distributed shared memory
  // (int4_gemm_finish.cuh), instead of stream-K's shares and their sums
  // through L2 (slots, counters); false: stream-K throughout.
  bool int4_cluster_split_k = false;
  // The CUDA runner folds the two RMSNorms of a 4-bit layer into its
  // products at up to kInt4GemmFoldMaxRows rows (Int4NormFold): o and down
  // leave the next product's input g . h and h's sums of squares, qkv and
  // gate_up scale their rows by r in the epilogue; no RmsNorm launch on the
  // step's chain but the first layer's and the final one. false: RmsNorm
  // launches (or int4_norm_in_gemm_max_rows's prologue), measured faster: the
  // fold cost 2 % at 70B and 4-7 % at 8B, batches 1 and 16, on the H200
  // (bench/results' int4 page).
  bool int4_fold_norm = false;
  // Int4Gemm's kAuto path from this many rows (1 to kInt4GemmMaxRows) runs
  // the kWgmma kernel (Hopper's warpgroup MMA) where the weight fits it
  // (Int4GemmWgmmaFits) and the build holds it; 0: kStream and kTiled only.
  // 17: with int4_wgmma_overlap kWgmma is ahead of kTiled from 32 rows (an
  // H100's 4-bit decode at batch 32: 70B +7 %, 8B +11 %, 123B +15 %;
  // bench/results' int4 page); at 16 rows kStream is far ahead.
  int32_t int4_wgmma_from_rows = 17;
  // Below int4_wgmma_from_rows, kAuto runs kWgmma from this many rows where
  // its launch splits K (Int4GemmAutoWgmma: the output tiles at most half
  // the SMs, e.g. llama3-70b's o and down, llama3-8b's qkv, o and down at
  // 9-16 rows); 0: off. At 16 rows such launches streamed 1-22 % more than
  // kStream's on the H200 and the others up to 18 % less (kernels-int4,
  // bench/results' int4 page). In the decode step (an H100, the setting 9)
  // it gains the 8B 8 % at batch 10-16 and costs the 70B 0.6-0.8 % at 16,
  // so it is off.
  int32_t int4_wgmma_split_from_rows = 0;
  // With int4_wgmma_split_from_rows, only launches whose grid (tiles x K's
  // parts) takes at most this percent of the SMs (1 to 100) take kWgmma. At
  // 16 rows on 132 SMs llama3-8b's qkv runs 96 blocks (48 tiles x 2), its o
  // and down and llama3-70b's o and down 128. The 8B's gain above needs all
  // three: with its o and down alone (qkv on kStream) it lost 0.8 %, with
  // its qkv alone (75) 0.7 % (an H100, batch 16), so 100.
  int32_t int4_wgmma_split_max_grid_percent = 100;
  // Blocks of a kWgmma thread block cluster (1, 2 or 4): a cluster's blocks
  // take consecutive row groups of W against the same x rows, and each copies
  // its part of x's rows into every block's stage (TMA multicast), so x
  // crosses from L2 once a cluster instead of once a block. 1: measured
  // faster (clusters of 2 cost 70B 4-bit decode a quarter at batch 64-128).
  int32_t int4_wgmma_cluster = 1;
  // Int4Gemm's kWgmma kernel in clusters of 1 dequantizes a stage while its
  // wgmmas of the stage before run (two stages' A fragments in registers)
  // instead of after waiting for them; the same sums bit for bit (an H100's
  // 70B 4-bit decode: batch 64 +12 %, 128 +8 %).
  bool int4_wgmma_overlap = true;
  // With int4_wgmma_overlap, tiles of up to 64 x rows and groups of 128
  // columns: a warpgroup issues stage s's wgmmas into a second set of sums
  // as soon as stage s - 1's finish and scales those while they run (the
  // same sums bit for bit; an H100's 70B 4-bit decode: batch 32 +24 %, 64
  // +15 %).
  bool int4_wgmma_double_sums = true;
  // With int4_wgmma_overlap, kWgmma tiles of at least this many x rows (0:
  // none) take the group's scale into the A fragments, s (q - z) in bf16
  // (within 2^-8 of the exact weight, as a BF16 Marlin-style kernel rounds
  // it), and their wgmmas sum into the outputs straight across stages and
  // groups, so a warpgroup's tensor work stops at a stage only for the wait
  // (two sets of sums do not fit 128 rows). 128: the 128-row tiles (an
  // H100's 70B 4-bit decode at batch 128 +13 %, 8B +5 %); from 16 it loses
  // to two sets of sums at 32 and 64 rows.
  int32_t int4_wgmma_scaled_from_rows = 128;
  // Past 64 rows, kWgmma takes 64-row tiles instead of 128-row ones where
  // the 128-row tiles would leave SMs idle enough to split K into parts of
  // fewer than this many stages (of 128 columns; 0: 128-row tiles always):
  // a split's fixed cost (the pipeline's fill, the partial sums' round trip)
  // then outweighs the 128-row tiles' better rate. 48 by kernels-int4 on an
  // H100 at 128 and 256 rows (Int4GemmWgmmaRows: every llama3-8b and -70b
  // projection took the faster of the two tilings).
  int32_t int4_wgmma_min_split_stages = 48;
  // kWgmma's epilogue stages the tile's sums in shared memory and writes y
  // in 16-byte chunks (int4_gemm_wgmma_epilogue.cuh); false: each thread
  // stores its own sums from the accumulator layout, as before (the
  // comparison arm).
  bool int4_wgmma_staged_epilogue = true;
  // kWgmma's tiles that take the scale into the fragments
  // (int4_wgmma_scaled_from_rows) wait for a stage's wgmmas before issuing
  // the next stage's, ConsumeOverlap's order; false: they issue stage s
  // behind stage s - 1's and then wait for s - 1 (the comparison arm's
  // other side: bench/experiments/wgmma_stage_cost.cu timed the first
  // order's stage 15 % cheaper alone, but 70B 4-bit decode at batch 128 ran
  // 0.8 % slower with it on the H200).
  bool int4_wgmma_scaled_wait_first = false;
  // kWgmma splits the tiles of a last wave that would leave SMs idle in K
  // (Int4GemmWgmmaTail: llama3-70b's gate_up at 128 rows runs 448 tiles on
  // 132 SMs, the fourth wave 52 of them); false: every tile whole (the
  // comparison arm: 4-bit decode of the 70B-123B models at batches 32 and
  // 64 ran 0.8-3.0 % faster with the split on the H100 and 70B's batch 32
  // 3.8 % on the H200; batch 128 and the 8B model within 0.2 %).
  bool int4_wgmma_tail_split = true;
  // kWgmma's producer lets the next kernel launch before its
  // griddepcontrol.wait (after asking for its first stages of weights), as
  // early_dependents does for kStream; false: after the wait. Measured no
  // faster (an H100's 4-bit decode at batches 16 and 64: within 0.3 %; with
  // int4_wgmma_split_from_rows 9, 8B at batch 16 -1.7 %), so false.
  bool int4_wgmma_early_dependents = false;
  // Int4Gemm's kAuto path runs the kGemv kernel (int4_gemm_gemv.cu: the FP8
  // Gemv's form, every lane's codes straight into registers a chunk ahead,
  // no split-K) up to this many rows (0 to kInt4GemmGemvMaxRows) where it
  // fits (Int4GemmGemvFits); 0: kStream. 4: on an H100, 8B 4-bit decode at
  // batch 1 +13 % and batch 4 +2 %, 70B at batch 1 unchanged (its launches
  // alone are 15 % faster, but kStream's tails overlap the next launch in
  // the step); at 8 rows (8B qkv, o and gate_up) -1 % (bench/results' int4
  // page).
  int32_t int4_gemv_max_rows = 4;
};

// InvalidArgument naming the field for a value out of range; nothing changes then.
absl::Status SetLaunchSettings(const LaunchSettings& settings);
LaunchSettings GetLaunchSettings();

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_LAUNCH_SETTINGS_H_
