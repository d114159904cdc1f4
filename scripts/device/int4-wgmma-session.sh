#!/usr/bin/env bash
# GPU calls for Int4Gemm's kWgmma kernel (issue 16's batch 16-128 targets;
# engine/kernels/int4_gemm_wgmma.cu; served from 17 rows in clusters of 1,
# dequantizing a stage while the wgmmas of the one before run, with two sets
# of sums up to 64 rows), in
# parts of one warm machine (INT4_WGMMA_PART="1", "2", ...; "all", the
# default, runs every one):
#   1  every gpu-labelled test (scripts/device/session.sh: the kWgmma and the
#      forced cluster-split MatchesReference cases among them; skipped on a
#      warm machine where they passed for this bundle), then kernels-int4 on
#      70B gate_up and down: kStream, kTiled (_t16.._t128) and kWgmma
#      (_w16c1.._w128c4) side by side at 16-256 rows ($OUT/results.jsonl,
#      tables in $OUT/bench.log);
#   2  the decode figures as served: decode-70b-int4 and decode-8b-int4 at
#      batches 1-128 (a step's ratio to batch 1 from one run), decode-123b-int4
#      at 1, 32 and 64 (128 does not fit an H100's KV plan);
#   3  arms S (served) and O (--int4_wgmma_double_sums=false) on
#      decode-70b-int4 and decode-8b-int4 --batches 16,32,64 (O changes 17-64
#      rows), order S O O S (scripts/device/arms.sh flags; $OUT/arm_S.jsonl,
#      $OUT/arm_O.jsonl);
#   o  kernels-int4 on 70B gate_up and down with --int4_wgmma_double_sums=false
#      (the _w16c1.._w64c1 variants with one set of sums; part 1 has them
#      with two), records in $OUT/one_sum.jsonl;
#   s  ConsumeScaled (--int4_wgmma_scaled_from_rows: the scale in the
#      fragments, in bf16; served from 128 rows): kernels-int4 on 70B gate_up
#      and down with it from 16 rows ($OUT/scaled.jsonl), then arms S
#      (served), E (=0: exact sums at every tile) and A (from 16) on
#      decode-70b-int4 --batches 32,64,128 and decode-8b-int4 --batches
#      64,128, order S E A A E S (scripts/device/arms.sh flags;
#      $OUT/arm_S.jsonl, $OUT/arm_E.jsonl, $OUT/arm_A.jsonl);
#   n  where kWgmma's time goes in a full round: ncu (clocks left alone) on
#      the gate_up launch of one layer of decode-70b-int4 at batch 128 (as
#      served: 128-row tiles, clusters of 1, the overlap): the details with
#      warp states, instruction statistics and the scheduler
#      ($OUT/ncu_gate_up.txt), and the source page, each SASS instruction
#      with its warp stall samples ($OUT/ncu_sass.csv);
#   l  the four kWgmma launches of one layer of decode-70b-int4 at batch 128
#      as served (qkv, o, gate_up, down: the 11th layer's), ncu's speed of
#      light, launch statistics and occupancy ($OUT/ncu_layer.txt): each
#      product's time and grid against the SMs;
#   q  (alone, for a call with little device time left) instead of part 1:
#      the kWgmma and cluster-split MatchesReference cases only (GTEST_FILTER,
#      gpu_kernels_test under 150 s); where every kWgmma case passed,
#      kernels-int4 on 70B gate_up, then decode-70b-int4 at batches 1, 64 and
#      128 as served.
#   k  what a K split costs kWgmma: kernels-int4 on the 70B and 8B shapes,
#      whose _w128c1s1.._w128c1s4 cases force 128-row tiles into 1-4 parts
#      (Int4GemmParams::wgmma_splits) at 64-256 rows ($OUT/splits.jsonl;
#      INT4_K_SHAPES, separated by spaces, takes other shapes);
#      the first measure for stream-K shares (qkv's 80 tiles, gate_up's last
#      round);
#   t  (alone, like q) kTiled's residual-add epilogue (25a22b5: y read eight
#      values at a time ahead of the stores): its MatchesReference cases
#      (`tiled*`, and every `*add*` case) only, then, where all passed,
#      kernels-int4 on the 70B and 8B o and down shapes (their _t16.._t128
#      variants against session 42's records of 3ea41c2, before it).
#   b  (alone) two builds side by side: the kWgmma MatchesReference cases and
#      the 4-bit runner's (GTEST_FILTER) on the bundle's build, then, where all
#      passed, arms A (an earlier build's onecard-bench-cuda, `arms.sh add A`)
#      and B (the bundle's) from `ARMS_XZ=1 ARMS_BESIDE_BUNDLE=B arms.sh pack`
#      (carry .device/arms.txz beside the bundle; INT4_ARMS="W B" for arms
#      named otherwise) on kernels-int4 70B gate_up, decode-70b-int4 at
#      batches 64 and 128 and decode-8b-int4 at 128, order A B B A
#      (scripts/device/arms.sh run; $OUT/arm_A.jsonl, $OUT/arm_B.jsonl);
#      INT4_ARMS_SHORT=1: kernels-int4 70B gate_up only.
#   f  (alone, or after b: "b f") the folded RMSNorm (--int4_fold_norm,
#      Int4NormFold): the tests take its kernel cases (Int4GemmFoldTest) and
#      the 4-bit runner's; where all passed, arms S (served), F
#      (--int4_fold_norm) and P (F and --prefetch_o_in_attention: the o
#      weights asked into L2 during decode attention) on decode-70b-int4 and
#      decode-8b-int4 at batches 1 and 16, order S F P P F S
#      (scripts/device/arms.sh flags; $OUT/arm_S.jsonl ...; with b, after
#      b's arms).
#   g  (alone, or with f: "g f") kWgmma's comparison arms: the tests take the
#      kWgmma cases (and f's); where all passed, the arms of $INT4_G_ARMS
#      (default: S, served, the last wave's tiles in parts; U,
#      --int4_wgmma_tail_split=false, every tile whole) on kernels-int4 70B
#      gate_up and decode-70b-int4 at batch 128, in order and reversed
#      ($OUT/arm_S.jsonl ...; before f's arms). Session 45 ran "S=
#      D=--int4_wgmma_staged_epilogue=false W=--int4_wgmma_scaled_wait_first"
#      on the decode alone.
#   m  the batches whose figures predate kWgmma: decode-72b-int4 at 1-128
#      and decode-123b-int4 at 8, 16 and 128 ($OUT/results.jsonl).
#   r  batch 16 on kWgmma's 16-row tiles: arms S (served), K
#      (--int4_wgmma_split_from_rows=9: kWgmma from 9 rows where its launch
#      splits K) and W (K where the grid takes at most 75 % of the SMs:
#      --int4_wgmma_split_max_grid_percent=75) on decode-8b-int4 and
#      decode-70b-int4 at batch 16, in order and reversed (INT4_R_ARMS and
#      INT4_R_SCENARIOS, scenarios separated by ';', take others).
#   d  (alone) kWgmma letting the next kernel launch before its
#      griddepcontrol.wait (--int4_wgmma_early_dependents): the tests take the
#      kWgmma cases (each checks the same bytes with it); where all passed,
#      arms S (served), E (it), K (--int4_wgmma_split_from_rows=9) and KE
#      (both) on decode-70b-int4 and decode-8b-int4 at batches 16 and 64, in
#      order and reversed (INT4_D_ARMS and INT4_D_SCENARIOS, scenarios
#      separated by ';', take others).
#   c  (alone) the 8B step's kernels at batch 16 one at a time under arms S
#      (served) and K (--int4_wgmma_split_from_rows=9): ncu (clocks and
#      caches left alone) times INT4_C_COUNT (default 48) consecutive launches
#      after the first INT4_C_SKIP (default 20000: inside the 256 decode steps)
#      of decode-8b-int4 --batches 16, each kernel's name and
#      gpu__time_duration ($OUT/ncu_chain_S.csv, $OUT/ncu_chain_K.csv): whether
#      K's gain is in the kernels' own times or in how the chain overlaps them.
#      No tests (the binaries' served paths, timed only).
#   x  (alone) where a cold kStream launch waits (the 16-row kStream launch
#      behind a kernel other than kStream took ~8 us more on the H100, session
#      49): ncu's WarpStateStats, SpeedOfLight and LaunchStats, clocks and
#      caches left alone, every pass a whole run (application replay: no pass
#      sees what an earlier one left in the caches), on the first
#      INT4_X_COUNT (default 8) kStream launches of decode-8b-int4 at batch
#      16, which fall in its first decode step (run eagerly, before any
#      graph): layer 0's qkv, o, gate_up and down, then layer 1's; the o
#      behind the attention kernels against the gate_up behind the kStream o
#      ($OUT/ncu_cold.csv, every metric of those sections per launch: the
#      warps' stall reasons among them). No tests.
#   p  FP8 as served (issue 18's batch-1 and batch-128 targets, beside the
#      4-bit figures of the same bundle): decode-70b-fp8 and decode-8b-fp8 at
#      batches 1 and 128 ($OUT/results.jsonl).
#   v  (alone) Int4Gemm's kGemv kernel (1-8 rows, codes straight into
#      registers) and the launches between the batch-1 products: the tests
#      take its cases, the one-row and three-row ones of the other kernels,
#      the 4-bit runner's and paged attention's; where every kGemv case
#      passed, kernels-int4 on INT4_V_SHAPES (default the 70B four and 8B o
#      and down: _stream against _gemv at 1-8 rows), then arms S (served:
#      kGemv up to 4 rows, normalizing the x it stages for qkv and gate_up;
#      RoPE and the cache write in the decode attention), K
#      (--int4_gemv_max_rows=0: kStream), N
#      (--int4_norm_in_gemm_max_rows=0: an RmsNorm launch before qkv and
#      gate_up) and R (--fused_rope=after_cublas: a RopeKvWrite launch after
#      the 4-bit qkv) on INT4_V_SCENARIOS (default decode-70b-int4 and
#      decode-8b-int4 at batch 1), in order and reversed (INT4_V_ARMS takes
#      others).
#   e  (alone, or with other parts after it, e.g. "e n") the experiment
#      bench/experiments/wgmma_stage_cost.cu, built here and carried as
#      .device/wsc (one binary, no bundle needed for e alone):
#      $OUT/wgmma_stage_cost.txt; with other parts, the tests are the kWgmma
#      cases only.
# Usage (a `run` call carrying [".device/bundle.txz"] from scripts/device/pack.sh
# with PACK_TARGETS holding gpu_kernels_test gpu_cuda_model_runner_test
# cuda_memory_plan_test onecard-bench-cuda):
#   export OUT; INT4_WGMMA_PART=1 bash scripts/device/int4-wgmma-session.sh
set -uo pipefail
part=${INT4_WGMMA_PART:-all}
if [[ " $part " == *" e "* ]]; then
  if [[ -x .device/wsc ]]; then
    timeout 120 .device/wsc | tee "$OUT/wgmma_stage_cost.txt"
  else
    echo "part e: no .device/wsc carried"
  fi
  [[ $part == e ]] && exit 0
  export GTEST_FILTER='*Int4GemmTest*wgmma*' SESSION_TESTS=always KERNELS_TEST_TIMEOUT=150
fi
if [[ $part == q ]]; then
  export GTEST_FILTER='*Int4GemmTest*wgmma*:*Int4GemmTest*cluster*:*Int4Dequant*'
  export SESSION_TESTS=always KERNELS_TEST_TIMEOUT=150
elif [[ $part == b || $part == f || $part == "b f" || $part == g || $part == "g f" ]]; then
  export GTEST_FILTER='*Int4GemmTest*wgmma*:*CudaModelRunnerInt4*:*Int4GemmFoldTest*'
  [[ $part == f ]] && export GTEST_FILTER='*Int4GemmFoldTest*:*CudaModelRunnerInt4*'
  export SESSION_TESTS=always KERNELS_TEST_TIMEOUT=150
elif [[ $part == d ]]; then
  export GTEST_FILTER='*Int4GemmTest*wgmma*' SESSION_TESTS=always KERNELS_TEST_TIMEOUT=150
elif [[ $part == c || $part == x ]]; then
  export GTEST_FILTER='NoTest.None' SESSION_TESTS=always
elif [[ $part == t ]]; then
  export GTEST_FILTER='*Int4GemmTest*tiled*:*Int4GemmTest*add*'
  export SESSION_TESTS=always KERNELS_TEST_TIMEOUT=150
elif [[ $part == v ]]; then
  export GTEST_FILTER='*Int4GemmTest*gemv*:*Int4GemmTest*_r1*:*Int4GemmTest*_r3*:*CudaModelRunnerInt4*:*PagedAttention*'
  export SESSION_TESTS=always KERNELS_TEST_TIMEOUT=240
fi
# shellcheck source=scripts/device/session.sh
source scripts/device/session.sh
wants() { [[ $part == all || " $part " == *" $1 "* ]]; }  # wants N: part N is asked for
# Nsight Compute (parts c, l, n, x): on the PATH or under the CUDA installs.
ncu_bin=$(command -v ncu || find /opt/nvidia /usr/local/cuda -name ncu -type f 2>/dev/null | head -1)
# all_cases_passed WHAT PATTERN: the failures of the filtered run, then
# whether every case whose name matches PATTERN passed (and any ran).
all_cases_passed() {
  grep -E "^\[  (FAILED|PASSED) \]" "$OUT/tests_run.txt" | head -40
  grep -A12 -E "Failure" "$OUT/tests.log" | head -80
  local ran passed
  ran=$(grep -cE "^\[ RUN      \] .*$2" "$OUT/tests.log")
  passed=$(grep -cE "^\[       OK \] .*$2" "$OUT/tests.log")
  echo "$1 cases: $passed of $ran passed"
  ((ran > 0 && passed == ran))
}
if [[ $part == q ]] && all_cases_passed kWgmma /wgmma_; then
  bench 90 kernels-int4 --shape llama3-70b_gate_up
  bench 150 decode-70b-int4 --batches 1,64,128
  grep -E "tok/s" "$OUT/bench.log" | tail -8
fi
if [[ $part == t ]] && all_cases_passed "kTiled and residual-add" /; then
  for shape in llama3-70b_o llama3-70b_down llama3-8b_o llama3-8b_down; do
    bench 60 kernels-int4 --shape "$shape"
  done
  grep -E "_t(64|128) compute" "$OUT/bench.log" | grep -E "_r(64|128|256)_" | head -24
fi
if [[ $part == b || $part == "b f" ]] && all_cases_passed "kWgmma and 4-bit runner" /; then
  if [[ -n ${INT4_ARMS_SHORT:-} ]]; then
    BENCH_TIMEOUT=60 bash scripts/device/arms.sh run "${INT4_ARMS:-A B}" \
      "kernels-int4 --shape llama3-70b_gate_up"
  else
    BENCH_TIMEOUT=200 bash scripts/device/arms.sh run "${INT4_ARMS:-A B}" \
      "kernels-int4 --shape llama3-70b_gate_up" "decode-70b-int4 --batches 64,128" \
      "decode-8b-int4 --batches 128"
  fi
fi
if wants k; then
  read -ra k_shapes <<<"${INT4_K_SHAPES:-llama3-70b_qkv llama3-70b_o llama3-70b_gate_up llama3-70b_down llama3-8b_qkv llama3-8b_o llama3-8b_down}"
  for shape in "${k_shapes[@]}"; do
    bench 90 kernels-int4 --shape "$shape" --results "$OUT/splits.jsonl"
  done
  grep -E "_r(64|128|256)(_w128c1s[1-4])? compute" "$OUT/bench.log" | head -90
fi
if wants 1; then
  grep -E "^\[  (FAILED|PASSED|  SKIPPED) \]|Int4GemmTest.*wgmma.*(OK|FAILED)" \
    "$OUT/tests_run.txt" 2>/dev/null | tail -40
  for shape in llama3-70b_gate_up llama3-70b_down; do
    bench 120 kernels-int4 --shape "$shape"
  done
fi
if wants 2; then
  bench 150 decode-70b-int4 --batches 1,16,32,64,128
  bench 120 decode-8b-int4 --batches 1,16,32,64,128
  bench 200 decode-123b-int4 --batches 1,32,64
  grep -E "tok/s" "$OUT/bench.log" | tail -13
fi
if wants 3; then
  BENCH_TIMEOUT=200 bash scripts/device/arms.sh flags "S= O=--int4_wgmma_double_sums=false" \
    "decode-70b-int4 --batches 16,32,64" "decode-8b-int4 --batches 16,32,64"
fi
if wants o; then
  for shape in llama3-70b_gate_up llama3-70b_down; do
    bench 120 kernels-int4 --shape "$shape" --int4_wgmma_double_sums=false \
      --results "$OUT/one_sum.jsonl"
  done
fi
if wants s; then
  for shape in llama3-70b_gate_up llama3-70b_down; do
    bench 120 kernels-int4 --shape "$shape" --int4_wgmma_scaled_from_rows=16 \
      --results "$OUT/scaled.jsonl"
  done
  BENCH_TIMEOUT=200 bash scripts/device/arms.sh flags \
    "S= E=--int4_wgmma_scaled_from_rows=0 A=--int4_wgmma_scaled_from_rows=16" \
    "decode-70b-int4 --batches 32,64,128" "decode-8b-int4 --batches 64,128"
fi
if wants l; then
  timeout 280 "$ncu_bin" --clock-control none --kernel-name-base mangled \
    --kernel-name "regex:Int4WgmmaKernelILi128E" --launch-skip 40 --launch-count 4 \
    --section SpeedOfLight --section LaunchStats --section Occupancy \
    "$session_bin" decode-70b-int4 --batches 128 --results "$OUT/ncu_layer_decode.jsonl" \
    >"$OUT/ncu_layer.txt" 2>&1
  echo "ncu rc=$?"
  grep -E "Int4WgmmaKernel|Duration|Grid Size|Compute \(SM\) Throughput" "$OUT/ncu_layer.txt" |
    head -20
fi
if wants n; then
  # A layer's 128-row kWgmma launches: qkv, gate_up, down (o takes 64-row
  # tiles at 128 rows); the 14th layer's second.
  timeout 280 "$ncu_bin" --clock-control none --kernel-name-base mangled \
    --kernel-name "regex:Int4WgmmaKernelILi128E" --launch-skip 40 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section InstructionStats \
    --section SchedulerStats --section SourceCounters --import-source no \
    -o "$TMPDIR/gate_up" "$session_bin" decode-70b-int4 --batches 128 \
    --results "$OUT/ncu_decode.jsonl" >"$OUT/ncu_run.txt" 2>&1
  echo "ncu rc=$?"
  "$ncu_bin" -i "$TMPDIR/gate_up.ncu-rep" --page details >"$OUT/ncu_gate_up.txt" 2>&1
  "$ncu_bin" -i "$TMPDIR/gate_up.ncu-rep" --page source --print-source sass --csv \
    >"$OUT/ncu_sass.csv" 2>&1
  grep -E "Duration|Issued Warp|No Eligible|Stall" "$OUT/ncu_gate_up.txt" | head -20
fi
if [[ $part == g || $part == "g f" ]] && all_cases_passed "kWgmma, folded RMSNorm, runner" /; then
  BENCH_TIMEOUT=150 bash scripts/device/arms.sh flags "${INT4_G_ARMS:-S= U=--int4_wgmma_tail_split=false}" \
    "kernels-int4 --shape llama3-70b_gate_up" "decode-70b-int4 --batches 128"
fi
if [[ $part == f || $part == "b f" || $part == "g f" ]] &&
  all_cases_passed "folded RMSNorm and 4-bit runner" /; then
  BENCH_TIMEOUT=150 bash scripts/device/arms.sh flags \
    "S= F=--int4_fold_norm P=--int4_fold_norm,--prefetch_o_in_attention" \
    "decode-70b-int4 --batches 1,16" "decode-8b-int4 --batches 1,16"
fi
if [[ " $part " == *" m "* ]]; then
  bench 240 decode-72b-int4 --batches 1,8,16,32,64,128
  bench 240 decode-123b-int4 --batches 8,16,128
  grep -E "tok/s" "$OUT/bench.log" | tail -9
fi
if [[ " $part " == *" p "* ]]; then
  bench 200 decode-70b-fp8 --batches 1,128
  bench 120 decode-8b-fp8 --batches 1,128
  grep -E "tok/s" "$OUT/bench.log" | tail -4
fi
# flag_arms ARMS SCENARIOS: arms.sh's flag arms ARMS ("NAME=FLAGS ...") on
# SCENARIOS (separated by ';'), in order and reversed (parts d and r).
flag_arms() {
  local scenarios
  IFS=';' read -ra scenarios <<<"$2"
  BENCH_TIMEOUT=150 bash scripts/device/arms.sh flags "$1" "${scenarios[@]}"
}
if [[ $part == d ]] && all_cases_passed kWgmma /wgmma_; then
  flag_arms "${INT4_D_ARMS:-S= E=--int4_wgmma_early_dependents K=--int4_wgmma_split_from_rows=9 KE=--int4_wgmma_split_from_rows=9,--int4_wgmma_early_dependents}" \
    "${INT4_D_SCENARIOS:-decode-70b-int4 --batches 16,64;decode-8b-int4 --batches 16,64}"
fi
# ncu_chain ARM FLAGS...: part c's ncu of the 8B batch-16 step under FLAGS
# ($OUT/ncu_chain_ARM.csv).
ncu_chain() {
  local arm=$1
  shift
  timeout 240 "$ncu_bin" --clock-control none --cache-control none \
    --launch-skip "${INT4_C_SKIP:-20000}" --launch-count "${INT4_C_COUNT:-48}" \
    --metrics gpu__time_duration.sum --csv --page raw \
    "$session_bin" decode-8b-int4 --batches 16 "$@" \
    --results "$OUT/ncu_chain_decode.jsonl" >"$OUT/ncu_chain_$arm.csv" 2>"$OUT/ncu_chain_$arm.log"
  echo "ncu $arm rc=$? lines=$(grep -c "^\"" "$OUT/ncu_chain_$arm.csv")"
}
if [[ $part == c ]]; then
  ncu_chain S
  ncu_chain K --int4_wgmma_split_from_rows=9
fi
if [[ $part == x ]]; then
  timeout 400 "$ncu_bin" --clock-control none --cache-control none --replay-mode application \
    --kernel-name regex:Int4GemmKernel --launch-count "${INT4_X_COUNT:-8}" \
    --section WarpStateStats --section SpeedOfLight --section LaunchStats --csv --page raw \
    "$session_bin" decode-8b-int4 --batches 16 --results "$OUT/ncu_cold_decode.jsonl" \
    >"$OUT/ncu_cold.csv" 2>"$OUT/ncu_cold.log"
  echo "ncu rc=$? lines=$(grep -c "^\"" "$OUT/ncu_cold.csv")"
fi
if [[ $part == v ]] && all_cases_passed kGemv /gemv_; then
  read -ra v_shapes <<<"${INT4_V_SHAPES:-llama3-70b_qkv llama3-70b_o llama3-70b_gate_up llama3-70b_down llama3-8b_o llama3-8b_down}"
  for shape in "${v_shapes[@]}"; do
    bench 90 kernels-int4 --shape "$shape" --results "$OUT/gemv.jsonl"
  done
  grep -E "_r[1-8](_stream|_gemv)? bandwidth" "$OUT/bench.log" | head -80
  flag_arms "${INT4_V_ARMS:-S= K=--int4_gemv_max_rows=0 N=--int4_norm_in_gemm_max_rows=0 R=--fused_rope=after_cublas}" \
    "${INT4_V_SCENARIOS:-decode-70b-int4 --batches 1;decode-8b-int4 --batches 1}"
fi
if [[ " $part " == *" r "* ]]; then
  flag_arms "${INT4_R_ARMS:-S= K=--int4_wgmma_split_from_rows=9 W=--int4_wgmma_split_from_rows=9,--int4_wgmma_split_max_grid_percent=75}" \
    "${INT4_R_SCENARIOS:-decode-8b-int4 --batches 16;decode-70b-int4 --batches 16}"
fi
