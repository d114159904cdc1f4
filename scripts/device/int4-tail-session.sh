#!/usr/bin/env bash
# GPU calls for the one-row tail of Int4Gemm's launches (issue 16; the int4
# page of bench/results, sessions 36-37), in parts of one warm machine
# (INT4_TAIL_PART="1", "2 3", ...: the parts named; "all", the default, runs
# every one; the decode arms take seconds a run, the tests minutes):
#   1  every gpu-labelled test (scripts/device/session.sh: skipped on a warm
#      machine where they passed for this bundle), then, compiled on the
#      machine (its nvcc):
#      bench/experiments/stream_imbalance.cu on kStream's grid and on one
#        block an SM: whether blocks that only stream end as unevenly as
#        Int4Gemm's ($OUT/stream_imbalance.txt);
#      bench/experiments/launch_chain.cu: a chain of streaming launches'
#        period with kStream's split-K finish, a cluster's or none, and as
#        phases of one persistent launch ($OUT/launch_chain.txt);
#      timeline-int4 as served ($OUT/results.jsonl) and with
#        --int4_cluster_split_k ($OUT/timeline_cluster.jsonl);
#   2  the RMSNorm-in-product arm (N), the cluster split (K) and RoPE with
#      the cache write inside decode attention after the 4-bit qkv too (R,
#      never measured with 4-bit weights) against the served path (S), order
#      S N K R R K N S, decode-70b-int4 and -8b-int4 at batch 1
#      (scripts/device/arms.sh flags; $OUT/arm_S.jsonl, ...);
#   3  kernels-int4 on the shapes the split takes (8B and 70B o and down), S
#      against K; and with .device/arms.tgz carried too, its
#      arms A and B (arms.sh run: two builds of the kernels; $OUT/arm_A.jsonl,
#      $OUT/arm_B.jsonl).
# Tables in $OUT/bench.log and $OUT/arms.log.
# Usage (a `run` call carrying [".device/bundle.txz"] from scripts/device/pack.sh
# with PACK_TARGETS holding gpu_kernels_test gpu_cuda_model_runner_test
# cuda_memory_plan_test onecard-bench-cuda, and for part 3 ".device/arms.tgz"):
#   export OUT; INT4_TAIL_PART=1 bash scripts/device/int4-tail-session.sh
set -uo pipefail
# shellcheck source=scripts/device/session.sh
source scripts/device/session.sh
part=${INT4_TAIL_PART:-all}
wants() { [[ $part == all || " $part " == *" $1 "* ]]; }  # wants N: part N is asked for
if wants 1; then
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
  bench 60 timeline-int4 --int4_cluster_split_k --results "$OUT/timeline_cluster.jsonl"
  cat "$OUT/stream_imbalance.txt" "$OUT/launch_chain.txt" 2>/dev/null
fi
if wants 2; then
  BENCH_TIMEOUT=120 bash scripts/device/arms.sh flags \
    "S= N=--int4_norm_in_gemm_max_rows=4 K=--int4_cluster_split_k R=--fused_rope=all" \
    "decode-70b-int4 --batches 1" "decode-8b-int4 --batches 1"
fi
if wants 3; then
  BENCH_TIMEOUT=90 bash scripts/device/arms.sh flags "S= K=--int4_cluster_split_k" \
    "kernels-int4 --shape llama3-8b_o" "kernels-int4 --shape llama3-8b_down" \
    "kernels-int4 --shape llama3-70b_o" "kernels-int4 --shape llama3-70b_down"
  # Two kernels' builds as arms (scripts/device/arms.sh pack with
  # ARMS_BESIDE_BUNDLE=B: arm B the bundle's binary, arm A another commit's),
  # when the call carries .device/arms.tgz too.
  if [[ -f .device/arms.tgz ]]; then
    BENCH_TIMEOUT=120 bash scripts/device/arms.sh run "A B" \
      "decode-70b-int4 --batches 1" "decode-8b-int4 --batches 1,16"
  fi
fi
