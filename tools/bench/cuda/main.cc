// onecard-bench-cuda: onecard-bench's CLI for the CUDA presets (registered
// from tools/bench/cuda/*.cc into the same registry, bench_registry.h):
//   onecard-bench-cuda list
//   onecard-bench-cuda ceilings|decode-8b-bf16|decode-8b-int4|decode-70b-int4|
//       decode-70b-int4-48g|decode-72b-int4|decode-123b-int4|prefill|budget-8b-bf16|
//       kernels-8b|kernels-int4|load [--model PATH]
//       [--results PATH] [--commit HASH] [--batches 1,32] [--shape NAME]
//       [--weights FORMAT]
//       [--tuning_cache FILE] [comparison arms]
// Differs from onecard-bench's main in RunInfo: the device is the GPU
// ("NVIDIA H200 (132 SMs, 139.8 GiB)") and the commit comes from --commit,
// else RunCommit ($ONECARD_COMMIT, the bundle's COMMIT, git); and in
// the comparison arms (the "Comparison arms" group of CommandLine below),
// which set the kernels' launch settings and the options of every runner a
// preset creates.
#include <cstdlib>
#include <initializer_list>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/launch_settings.h"
#include "engine/runtime/cuda/weight_spec.h"
#include "services/common/command_line.h"
#include "tools/bench/bench_registry.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/cuda/cuda_bench.h"

ABSL_FLAG(std::string, results, onecard::bench::kDefaultResultsPath,
          "JSON lines file to append to (git-ignored by default); empty = do not write");
ABSL_FLAG(std::string, commit, "",
          "commit to record; default $ONECARD_COMMIT, else the bundle's COMMIT, else git");
ABSL_FLAG(std::string, model, "", "checkpoint for the load scenario (default SmolLM2 Q4_1)");
ABSL_FLAG(std::string, batches, "",
          "decode presets: only these batch sizes, comma-separated (e.g. 1,32); default all");
ABSL_FLAG(std::string, shape, "", "kernels-int4: only this shape (e.g. 70b_down; for ncu)");
ABSL_FLAG(std::string, weights, "",
          "decode presets: the projections in this format instead of the preset's, of the same "
          "kind (int4[-g<group>][-zero|-min][-act] for the int4 presets, fp8 or fp8-block128 for "
          "the fp8 ones); its cases are named batchN-<format>");
ABSL_FLAG(std::string, tuning_cache, "",
          "decode presets: GEMM tuning cache file to load, and to write when it is missing");
// Comparison arms: the defaults are what serves.
ABSL_FLAG(bool, pdl, true, "launch kernels with programmatic dependent launch");
ABSL_FLAG(int32_t, gemv_blocks_per_sm, 2, "Gemv blocks resident an SM (1 or 2)");
ABSL_FLAG(bool, fp8_gemm_cublas_scales, true,
          "Fp8Gemm: scales and BF16 output inside cuBLASLt's product where it has the algorithm "
          "(false: fp32 sums, then Fp8Gemm's epilogue kernel)");
ABSL_FLAG(int32_t, fp8_gemm_scaled_min_rows, 64,
          "Fp8Gemm: the rows of x from which it takes cuBLASLt's scaled form");
ABSL_FLAG(int32_t, int4_norm_in_gemm_max_rows, 4,
          "4-bit q/k/v and gate/up products of up to this many rows (0-4) take the RMSNorm in "
          "Int4Gemm's prologue instead of an RmsNorm launch (0: always apart)");
ABSL_FLAG(bool, prefetch_o_in_attention, false,
          "decode attention asks the L2 cache for the o projection's weights while it runs");
ABSL_FLAG(int32_t, int4_stream_blocks_per_sm, 0,
          "Int4Gemm's kStream kernel: blocks an SM (1-4, at most what fits); 0 = as many as fit");
ABSL_FLAG(bool, early_dependents, true,
          "the decode step's norm, RoPE, attention and kStream Int4Gemm kernels let the next "
          "kernel launch before they wait for the previous one");
ABSL_FLAG(bool, gemv_early_dependents, false,
          "the BF16 and FP8 Gemv kernels let the next kernel launch before they wait for the "
          "previous one");
ABSL_FLAG(bool, int4_cluster_split_k, false,
          "Int4Gemm's kStream kernel (up to 16 rows) splits K inside thread block clusters where "
          "the weight's row groups fill the grid, summing the parts through distributed shared "
          "memory instead of stream-K's L2 slots");
ABSL_FLAG(bool, int4_fold_norm, false,
          "the CUDA runner folds a 4-bit layer's RMSNorms into its products up to 16 rows: o "
          "and down leave the next product's input and sums of squares, qkv and gate_up scale "
          "their rows in the epilogue (no RmsNorm launches)");
ABSL_FLAG(int32_t, int4_wgmma_from_rows, 17,
          "Int4Gemm runs its kWgmma kernel (Hopper's warpgroup MMA) from this many rows where the "
          "weight fits it; 0 = kStream and kTiled only");
ABSL_FLAG(int32_t, int4_wgmma_split_from_rows, 0,
          "below --int4_wgmma_from_rows, Int4Gemm runs kWgmma from this many rows where its "
          "launch splits K (output tiles at most half the SMs); 0 = off");
ABSL_FLAG(int32_t, int4_wgmma_split_max_grid_percent, 100,
          "with --int4_wgmma_split_from_rows, only launches whose grid (tiles x K's parts) takes "
          "at most this percent of the SMs take kWgmma (1 to 100)");
ABSL_FLAG(int32_t, int4_gemv_max_rows, 4,
          "Int4Gemm runs its kGemv kernel (codes straight into registers, a block a 16-row "
          "tile, no split-K) up to this many rows (0-8) where x fits its shared memory; 0 = "
          "kStream");
ABSL_FLAG(int32_t, int4_wgmma_cluster, 1,
          "Int4Gemm's kWgmma kernel: blocks a thread block cluster sharing x by TMA multicast "
          "(1, 2 or 4)");
ABSL_FLAG(bool, int4_wgmma_overlap, true,
          "Int4Gemm's kWgmma kernel (clusters of 1) keeps a stage's wgmmas in flight while it "
          "dequantizes the next");
ABSL_FLAG(bool, int4_wgmma_double_sums, true,
          "with --int4_wgmma_overlap, tiles of up to 64 x rows and groups of 128 columns: "
          "Int4Gemm's kWgmma kernel issues a stage's wgmmas into a second set of sums and scales "
          "the stage before's while they run");
ABSL_FLAG(int32_t, int4_wgmma_scaled_from_rows, 128,
          "with --int4_wgmma_overlap, Int4Gemm's kWgmma tiles of at least this many x rows take "
          "the group's scale into the dequantized weights (bf16) and sum every stage into the "
          "outputs; 0 = none");
ABSL_FLAG(bool, int4_wgmma_staged_epilogue, true,
          "Int4Gemm's kWgmma epilogue stages the tile's sums in shared memory and writes y in "
          "16-byte chunks; false: each thread stores its own sums");
ABSL_FLAG(bool, int4_wgmma_scaled_wait_first, false,
          "Int4Gemm's kWgmma tiles with the scale in the fragments wait for a stage's wgmmas "
          "before issuing the next stage's (ConsumeOverlap's order)");
ABSL_FLAG(bool, int4_wgmma_tail_split, true,
          "Int4Gemm's kWgmma kernel splits in K the tiles of a last wave that would leave SMs "
          "idle; false: every tile whole");
ABSL_FLAG(bool, int4_wgmma_early_dependents, false,
          "Int4Gemm's kWgmma kernel lets the next kernel launch before it waits for the "
          "previous one (as --early_dependents does for kStream)");
ABSL_FLAG(int32_t, int4_wgmma_min_split_stages, 48,
          "past 64 rows, Int4Gemm's kWgmma kernel takes 64-row tiles where 128-row ones would "
          "split K into parts of fewer than this many 128-column stages; 0 = 128-row tiles");
ABSL_FLAG(int32_t, gemm_splits, 0,
          "o / down products of the decode buckets: 0 = timed choice, 1 = whole, N = N partials");
ABSL_FLAG(std::string, fused_rope, "all",
          "RoPE and the cache write inside decode attention: after_cublas, all or off");
ABSL_FLAG(bool, tuner_search, true, "search around cuBLASLt's heuristic when tuning");
ABSL_FLAG(int64_t, tuner_at_cap, 0,
          "rank tuned shapes of at least this many rows at the power cap; 0 = none");
ABSL_FLAG(int32_t, offload_cpu_layers, -1,
          "offload presets: this many offloaded layers on the CPU; -1 = the cost model's count");
ABSL_FLAG(int32_t, offload_cpu_threads, 0,
          "offload presets: the CPU's threads; 0 = every core but one, -1 = stream every layer");
ABSL_FLAG(int32_t, offload_ring_layers, 2, "offload presets: device slots of the ring");
ABSL_FLAG(std::string, kv_swap_copy, "auto",
          "kv-swap: what moves the blocks: auto (by the runs' lengths), engines or sms");
ABSL_FLAG(int32_t, kv_swap_sm_blocks, 0,
          "kv-swap: blocks of the SMs' copy kernel; 0 = its default (32)");
ABSL_FLAG(std::string, kv_cache_dtype, "auto",
          "the decode presets' KV cache: auto (BF16), bf16 or fp8 (E4M3, calibrated scales)");

namespace {

onecard::services::CommandLineSpec CommandLine() {
  onecard::services::CommandLineSpec spec = {
      .program = "onecard-bench-cuda",
      .usage = {"SCENARIO [flags]", "list"},
      .description =
          "Runs a CUDA benchmark preset on the GPU, prints its table and appends one JSON\n"
          "line a case to --results (docs/cuda.md, bench/README.md).",
      .subcommands = {{"list", "list the scenarios"}},
      .groups = {{"Run", {"model", "batches", "shape", "weights", "tuning_cache"}},
                 {"Results", {"results", "commit"}},
                 {"Comparison arms (the defaults are what serves)",
                  {"pdl",
                   "gemv_blocks_per_sm",
                   "fp8_gemm_cublas_scales",
                   "fp8_gemm_scaled_min_rows",
                   "int4_norm_in_gemm_max_rows",
                   "prefetch_o_in_attention",
                   "int4_stream_blocks_per_sm",
                   "early_dependents",
                   "gemv_early_dependents",
                   "int4_cluster_split_k",
                   "int4_fold_norm",
                   "int4_wgmma_from_rows",
                   "int4_wgmma_split_from_rows",
                   "int4_wgmma_split_max_grid_percent",
                   "int4_wgmma_cluster",
                   "int4_wgmma_overlap",
                   "int4_wgmma_double_sums",
                   "int4_wgmma_scaled_from_rows",
                   "int4_wgmma_min_split_stages",
                   "int4_wgmma_staged_epilogue",
                   "int4_wgmma_scaled_wait_first",
                   "int4_wgmma_tail_split",
                   "int4_wgmma_early_dependents",
                   "int4_gemv_max_rows",
                   "gemm_splits",
                   "fused_rope",
                   "tuner_search",
                   "tuner_at_cap",
                   "offload_cpu_layers",
                   "offload_cpu_threads",
                   "offload_ring_layers",
                   "kv_swap_copy",
                   "kv_swap_sm_blocks"}}},
      .epilog =
          "The commit defaults to $ONECARD_COMMIT (scripts/device/run.sh sets it), else the "
          "COMMIT file of the bundle holding the binary, else git."};
  for (const onecard::bench::Scenario* s : onecard::bench::AllScenarios()) {
    spec.subcommands.push_back({s->name, s->description});
  }
  return spec;
}

// --batches, --shape and --weights into CurrentBenchSelection, --tuning_cache into the
// runner options; an error names the flag.
absl::Status ApplySelection() {
  onecard::bench::BenchSelection& selection = onecard::bench::CurrentBenchSelection();
  for (absl::string_view piece :
       absl::StrSplit(absl::GetFlag(FLAGS_batches), ',', absl::SkipEmpty())) {
    int32_t batch = 0;
    if (!absl::SimpleAtoi(piece, &batch) || batch < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--batches: \"", piece, "\" is not a batch size"));
    }
    selection.batches.push_back(batch);
  }
  selection.shape = absl::GetFlag(FLAGS_shape);
  selection.weights = absl::GetFlag(FLAGS_weights);
  if (!selection.weights.empty()) {
    if (absl::Status s = onecard::engine::ParseProjectionSpec(selection.weights).status();
        !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--weights: ", s.message()));
    }
  }
  onecard::bench::BenchRunnerOptions().tuning_cache = absl::GetFlag(FLAGS_tuning_cache);
  return absl::OkStatus();
}

// Flag `flag`'s `value` as one of `choices` (its spelling, its value); an
// error names the flag and the spellings.
template <typename T>
absl::StatusOr<T> ParseChoice(absl::string_view flag, absl::string_view value,
                              std::initializer_list<std::pair<absl::string_view, T>> choices) {
  std::vector<absl::string_view> names;
  for (const auto& [name, choice] : choices) {
    if (name == value) return choice;
    names.push_back(name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, ": must be one of ", absl::StrJoin(names, ", ")));
}

// The flags' arms into the kernels' launch settings and the presets' runner
// options; an error names the flag.
absl::Status ApplyComparisonArms() {
  using onecard::engine::FusedRope;
  using onecard::engine::KvSwapCopy;
  RETURN_IF_ERROR(onecard::engine::SetLaunchSettings(
      {.programmatic_launch = absl::GetFlag(FLAGS_pdl),
       .gemv_blocks_per_sm = absl::GetFlag(FLAGS_gemv_blocks_per_sm),
       .fp8_gemm_cublas_scales = absl::GetFlag(FLAGS_fp8_gemm_cublas_scales),
       .fp8_gemm_scaled_min_rows = absl::GetFlag(FLAGS_fp8_gemm_scaled_min_rows),
       .int4_norm_in_gemm_max_rows = absl::GetFlag(FLAGS_int4_norm_in_gemm_max_rows),
       .prefetch_o_in_attention = absl::GetFlag(FLAGS_prefetch_o_in_attention),
       .int4_stream_blocks_per_sm = absl::GetFlag(FLAGS_int4_stream_blocks_per_sm),
       .early_dependents = absl::GetFlag(FLAGS_early_dependents),
       .gemv_early_dependents = absl::GetFlag(FLAGS_gemv_early_dependents),
       .int4_cluster_split_k = absl::GetFlag(FLAGS_int4_cluster_split_k),
       .int4_fold_norm = absl::GetFlag(FLAGS_int4_fold_norm),
       .int4_wgmma_from_rows = absl::GetFlag(FLAGS_int4_wgmma_from_rows),
       .int4_wgmma_split_from_rows = absl::GetFlag(FLAGS_int4_wgmma_split_from_rows),
       .int4_wgmma_split_max_grid_percent = absl::GetFlag(FLAGS_int4_wgmma_split_max_grid_percent),
       .int4_wgmma_cluster = absl::GetFlag(FLAGS_int4_wgmma_cluster),
       .int4_wgmma_overlap = absl::GetFlag(FLAGS_int4_wgmma_overlap),
       .int4_wgmma_double_sums = absl::GetFlag(FLAGS_int4_wgmma_double_sums),
       .int4_wgmma_scaled_from_rows = absl::GetFlag(FLAGS_int4_wgmma_scaled_from_rows),
       .int4_wgmma_min_split_stages = absl::GetFlag(FLAGS_int4_wgmma_min_split_stages),
       .int4_wgmma_staged_epilogue = absl::GetFlag(FLAGS_int4_wgmma_staged_epilogue),
       .int4_wgmma_scaled_wait_first = absl::GetFlag(FLAGS_int4_wgmma_scaled_wait_first),
       .int4_wgmma_tail_split = absl::GetFlag(FLAGS_int4_wgmma_tail_split),
       .int4_wgmma_early_dependents = absl::GetFlag(FLAGS_int4_wgmma_early_dependents),
       .int4_gemv_max_rows = absl::GetFlag(FLAGS_int4_gemv_max_rows)}));
  onecard::engine::CudaRunnerOptions& o = onecard::bench::BenchRunnerOptions();
  o.gemm_splits = absl::GetFlag(FLAGS_gemm_splits);
  ASSIGN_OR_RETURN(o.fused_rope,
                   ParseChoice<FusedRope>("fused_rope", absl::GetFlag(FLAGS_fused_rope),
                                          {{"after_cublas", FusedRope::kAfterCublas},
                                           {"all", FusedRope::kAll},
                                           {"off", FusedRope::kOff}}));
  ASSIGN_OR_RETURN(o.kv_cache_dtype, onecard::engine::ParseKvCacheDtype(
                                         absl::GetFlag(FLAGS_kv_cache_dtype), "--kv_cache_dtype"));
  o.offload_cpu_layers = absl::GetFlag(FLAGS_offload_cpu_layers);
  o.offload_cpu_threads = absl::GetFlag(FLAGS_offload_cpu_threads);
  o.offload_ring_layers = absl::GetFlag(FLAGS_offload_ring_layers);
  ASSIGN_OR_RETURN(o.kv_swap_copy,
                   ParseChoice<KvSwapCopy>("kv_swap_copy", absl::GetFlag(FLAGS_kv_swap_copy),
                                           {{"auto", KvSwapCopy::kAuto},
                                            {"engines", KvSwapCopy::kCopyEngines},
                                            {"sms", KvSwapCopy::kSms}}));
  o.kv_swap_sm_blocks = absl::GetFlag(FLAGS_kv_swap_sm_blocks);
  o.tuner.search = absl::GetFlag(FLAGS_tuner_search);
  o.tuner.at_cap_rows = absl::GetFlag(FLAGS_tuner_at_cap);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  const onecard::services::CommandLine cli =
      onecard::services::ParseCommandLine(CommandLine(), argc, argv);
  if (cli.exit_code) return *cli.exit_code;
  const std::vector<std::string>& args = cli.args;
  const std::string name = args.size() >= 2 ? args[1] : "";
  if (name == "list") {
    for (const onecard::bench::Scenario* s : onecard::bench::AllScenarios()) {
      std::cout << "  " << s->name << ": " << s->description << "\n";
    }
    return 0;
  }
  const onecard::bench::Scenario* scenario = onecard::bench::FindScenario(name);
  if (scenario == nullptr) {
    std::cerr << "usage: onecard-bench-cuda SCENARIO [flags] (onecard-bench-cuda list)\n";
    return 2;
  }
  // budget-8b-bf16 loads every kernel at CUDA initialization, so that device
  // memory measured between requests does not move with lazy module loads.
  // The others keep CUDA's default (lazy), as the worker does: eager loading
  // of this binary's kernels costs 1.7 GiB of host memory and 2.3 s
  // (bench/results/2026-12-01-h200-int4.md, "load").
  if (name == "budget-8b-bf16") setenv("CUDA_MODULE_LOADING", "EAGER", /*overwrite=*/0);
  if (absl::Status s = ApplySelection(); !s.ok()) {
    std::cerr << "onecard-bench-cuda: " << s.message() << "\n";
    return 2;
  }
  if (absl::Status s = ApplyComparisonArms(); !s.ok()) {
    std::cerr << "onecard-bench-cuda: " << s.message() << "\n";
    return 2;
  }
  onecard::bench::RunInfo info = onecard::bench::CurrentRunInfo();
  info.device = onecard::bench::CudaDeviceDescription();
  if (!absl::GetFlag(FLAGS_commit).empty()) info.commit = absl::GetFlag(FLAGS_commit);
  onecard::bench::BenchReporter reporter(info);
  onecard::bench::BenchOptions options;
  options.model_path = absl::GetFlag(FLAGS_model);
  if (absl::Status s = scenario->run(options, reporter); !s.ok()) {
    reporter.PrintTable(std::cout);
    std::cerr << "onecard-bench-cuda " << name << ": " << s << "\n";
    return 1;
  }
  reporter.PrintTable(std::cout);
  const std::string results = absl::GetFlag(FLAGS_results);
  if (!results.empty()) {
    if (absl::Status s = reporter.AppendJsonLines(results); !s.ok()) {
      std::cerr << "onecard-bench-cuda: " << s << "\n";
      return 1;
    }
    std::cout << "appended " << reporter.records().size() << " records to " << results << "\n";
  }
  return 0;
}
