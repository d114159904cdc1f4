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
#   the RMSNorm-in-product arm against the served path, order A B B A
#     (scripts/device/arms.sh flags; $OUT/arm_A.jsonl, $OUT/arm_B.jsonl).
# Records of the served runs in $OUT/results.jsonl, tables in $OUT/bench.log
# and $OUT/arms.log.
# Usage (a `run` call carrying [".device/bundle.txz"] from scripts/device/pack.sh
# with PACK_TARGETS holding gpu_kernels_test gpu_cuda_model_runner_test
# cuda_memory_plan_test onecard-bench-cuda):
#   export OUT; bash scripts/device/int4-tail-session.sh
set -uo pipefail
# shellcheck source=scripts/device/session.sh
source scripts/device/session.sh
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
BENCH_TIMEOUT=120 bash scripts/device/arms.sh flags "A= B=--int4_norm_in_gemm_max_rows=4" \
  "decode-70b-int4 --batches 1" "decode-8b-int4 --batches 1"
cat "$OUT/stream_imbalance.txt" "$OUT/launch_chain.txt" 2>/dev/null
