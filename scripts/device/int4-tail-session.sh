#!/usr/bin/env bash
# One GPU call for the one-row tail of Int4Gemm's launches (issue 16; the
# int4 page of bench/results, session 36): every gpu-labelled test
# (scripts/device/session.sh: skipped on a warm machine where they passed for
# this bundle), then
#   bench/experiments/stream_imbalance.cu, compiled on the machine (its nvcc),
#     on kStream's grid and on one block an SM: whether blocks that only
#     stream end as unevenly as Int4Gemm's ($OUT/stream_imbalance.txt);
#   bench/experiments/launch_chain.cu, the same way: a chain of streaming
#     launches' period with kStream's split-K finish, a cluster's (distributed
#     shared memory) or none ($OUT/launch_chain.txt);
#   timeline-int4 (late_block_repeat, late_block_segments: whether the late
#     blocks are those with a split-K finish mid-share);
#   the RMSNorm-in-product arm (N) against the served path (S), order S N N S
#     (scripts/device/arms.sh flags; $OUT/arm_S.jsonl, $OUT/arm_N.jsonl);
#   with .device/arms.tgz carried too, its arms A and B (arms.sh run: two
#     builds of the kernels; $OUT/arm_A.jsonl, $OUT/arm_B.jsonl).
# Records of the served runs in $OUT/results.jsonl, tables in $OUT/bench.log
# and $OUT/arms.log.
# Usage (a `run` call carrying [".device/bundle.txz"] from scripts/device/pack.sh
# with PACK_TARGETS holding gpu_kernels_test gpu_cuda_model_runner_test
# cuda_memory_plan_test onecard-bench-cuda, and optionally ".device/arms.tgz"):
#   export OUT; bash scripts/device/int4-tail-session.sh
# or in two calls of one warm machine (each well under 10 minutes; the second
# skips the tests that passed in the first): INT4_TAIL_PART=1 (the tests, the
# experiments and the timeline), then INT4_TAIL_PART=2 (the arms).
set -uo pipefail
# shellcheck source=scripts/device/session.sh
source scripts/device/session.sh
part=${INT4_TAIL_PART:-all}
if [[ $part == all || $part == 1 ]]; then
  si=$TMPDIR/stream_imbalance
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  if "$nvcc" -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I. \
    bench/experiments/stream_imbalance.cu -o "$si"; then
    { timeout 120 "$si" && timeout 120 "$si" --one; } >"$OUT/stream_imbalance.txt" 2>&1
    echo "stream_imbalance rc=$?"
  else
    echo "stream_imbalance: did not build"
  fi
  lc=$TMPDIR/launch_chain
  if "$nvcc" -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I. \
    bench/experiments/launch_chain.cu -o "$lc"; then
    for forms in global cluster persist; do
      timeout 60 "$lc" "$forms" >>"$OUT/launch_chain.txt" 2>&1
      echo "launch_chain $forms rc=$?"
    done
  else
    echo "launch_chain: did not build"
  fi
  bench 60 timeline-int4
  cat "$OUT/stream_imbalance.txt" "$OUT/launch_chain.txt" 2>/dev/null
fi
if [[ $part == all || $part == 2 ]]; then
  BENCH_TIMEOUT=120 bash scripts/device/arms.sh flags "S= N=--int4_norm_in_gemm_max_rows=4" \
    "decode-70b-int4 --batches 1" "decode-8b-int4 --batches 1"
  # Two kernels' builds as arms (scripts/device/arms.sh pack with
  # ARMS_BESIDE_BUNDLE=B: arm B the bundle's binary, arm A another commit's),
  # when the call carries .device/arms.tgz too.
  if [[ -f .device/arms.tgz ]]; then
    BENCH_TIMEOUT=120 bash scripts/device/arms.sh run "A B" \
      "decode-70b-int4 --batches 1" "decode-8b-int4 --batches 1,16"
  fi
fi
