#!/usr/bin/env bash
# One GPU call for the FP8 KV cache (issue 18 item 3), from what
# scripts/device/pack.sh carried (PACK_TARGETS="gpu_kernels_test
# gpu_cuda_model_runner_test cuda_memory_plan_test onecard-bench-cuda"):
# every gpu-labelled test (scripts/device/run.sh tests), then, each scenario
# under its own timeout, in order of what matters: decode-long-context (BF16
# against FP8 KV at batch 32, 8k and 32k context), decode-8b-bf16 (the BF16
# path kept) and again over an FP8 cache at batch 1 and 32, and kernels-8b
# (the attention kernels over BF16 and FP8 caches).
# Records in $OUT/results.jsonl, tables in $OUT/bench.log, tests in
# $OUT/tests.log.
# Usage (on the GPU machine): bash scripts/device/kv-fp8-session.sh
set -uo pipefail
export TMPDIR=${TMPDIR:-/tmp}
bash scripts/device/run.sh tests >"$OUT/tests_run.txt" 2>&1
echo "tests: rc=$?"
dir=$TMPDIR/onecard-device
bin=$dir/bin/onecard-bench-cuda
export LD_LIBRARY_PATH=$dir/lib:/usr/local/cuda/lib64
ONECARD_COMMIT=$(cat "$dir/COMMIT")
export ONECARD_COMMIT
bench() {  # bench SECONDS ARGS...
  local limit=$1
  shift
  timeout "$limit" "$bin" --results "$OUT/results.jsonl" "$@" >>"$OUT/bench.log" 2>&1
  echo "$* rc=$?"
}
bench 240 decode-long-context
bench 90 decode-8b-bf16
bench 60 decode-8b-bf16 --batches 1,32 --kv_cache_dtype fp8 --results "$OUT/results_kv_fp8.jsonl"
bench 90 kernels-8b
