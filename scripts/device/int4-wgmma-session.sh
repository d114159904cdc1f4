#!/usr/bin/env bash
# GPU calls for Int4Gemm's kWgmma kernel (issue 16's batch 16-128 targets;
# engine/kernels/int4_gemm_wgmma.cu), in parts of one warm machine
# (INT4_WGMMA_PART="1", "2", ...; "all", the default, runs every one):
#   1  every gpu-labelled test (scripts/device/session.sh: the kWgmma
#      MatchesReference cases among them; skipped on a warm machine where
#      they passed for this bundle), then kernels-int4 on the 70B and 8B
#      shapes: kStream, kTiled (_t16.._t128) and kWgmma (_w64, _w128) side by
#      side at 16-256 rows ($OUT/results.jsonl, tables in $OUT/bench.log);
#   2  decode-70b-int4 at batches 16-128 as served (S) and with kWgmma from
#      17 rows in clusters of 2 (W: --int4_wgmma_from_rows=17, the cluster
#      setting's default) and of 1 (W1: no multicast), order S W W1 W1 W S
#      (scripts/device/arms.sh flags; $OUT/arm_S.jsonl, $OUT/arm_W.jsonl, ...);
#   3  S and W for decode-8b-int4 and decode-123b-int4;
#   q  (alone, for a call with little device time left) instead of part 1:
#      the kWgmma and cluster-split MatchesReference cases only (GTEST_FILTER,
#      gpu_kernels_test under 150 s); where every kWgmma case passed,
#      kernels-int4 on 70B gate_up and down and 8B gate_up, then
#      decode-70b-int4 at batches 64 and 128 with kWgmma from 17 rows
#      ($OUT/wgmma.jsonl) and as served.
# Usage (a `run` call carrying [".device/bundle.txz"] from scripts/device/pack.sh
# with PACK_TARGETS holding gpu_kernels_test gpu_cuda_model_runner_test
# cuda_memory_plan_test onecard-bench-cuda):
#   export OUT; INT4_WGMMA_PART=1 bash scripts/device/int4-wgmma-session.sh
set -uo pipefail
part=${INT4_WGMMA_PART:-all}
if [[ $part == q ]]; then
  export GTEST_FILTER='*Int4GemmTest*wgmma*:*Int4GemmTest*cluster*:*Int4Dequant*'
  export SESSION_TESTS=always KERNELS_TEST_TIMEOUT=150
fi
# shellcheck source=scripts/device/session.sh
source scripts/device/session.sh
wants() { [[ $part == all || " $part " == *" $1 "* ]]; }  # wants N: part N is asked for
if [[ $part == q ]]; then
  grep -E "^\[  (FAILED|PASSED) \]" "$OUT/tests_run.txt" | head -40
  grep -A12 -E "Failure" "$OUT/tests.log" | head -80
  ran=$(grep -cE "^\[ RUN      \] .*/wgmma_" "$OUT/tests.log")
  passed=$(grep -cE "^\[       OK \] .*/wgmma_" "$OUT/tests.log")
  echo "kWgmma cases: $passed of $ran passed"
  if ((ran > 0 && passed == ran)); then
    for shape in llama3-70b_gate_up llama3-70b_down llama3-8b_gate_up; do
      bench 90 kernels-int4 --shape "$shape"
    done
    bench 150 decode-70b-int4 --batches 64,128 --int4_wgmma_from_rows=17 \
      --results "$OUT/wgmma.jsonl"
    bench 150 decode-70b-int4 --batches 64,128
    grep -E "tok/s" "$OUT/bench.log" | tail -8
  fi
fi
if wants 1; then
  grep -E "^\[  (FAILED|PASSED|  SKIPPED) \]|Int4GemmTest.*wgmma.*(OK|FAILED)" \
    "$OUT/tests_run.txt" 2>/dev/null | tail -40
  for shape in llama3-70b_qkv llama3-70b_o llama3-70b_gate_up llama3-70b_down \
    llama3-8b_gate_up llama3-8b_down; do
    bench 120 kernels-int4 --shape "$shape"
  done
fi
if wants 2; then
  BENCH_TIMEOUT=240 bash scripts/device/arms.sh flags \
    "S= W=--int4_wgmma_from_rows=17 W1=--int4_wgmma_from_rows=17,--int4_wgmma_cluster=1" \
    "decode-70b-int4 --batches 16,32,64,128"
fi
if wants 3; then
  BENCH_TIMEOUT=200 bash scripts/device/arms.sh flags "S= W=--int4_wgmma_from_rows=17" \
    "decode-8b-int4 --batches 32,64,128" "decode-123b-int4 --batches 64,128"
fi
