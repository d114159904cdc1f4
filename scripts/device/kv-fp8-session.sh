#!/usr/bin/env bash
# One GPU call for the FP8 KV cache (issue 18 item 3), from what
# scripts/device/pack.sh carried (PACK_TARGETS="gpu_kernels_test
# gpu_cuda_model_runner_test cuda_memory_plan_test onecard-bench-cuda"):
# every gpu-labelled test (scripts/device/run.sh tests), then, each scenario
# under its own timeout, in order of what matters: decode-long-context (BF16
# against FP8 KV at batch 32, 8k and 32k context), decode-8b-bf16 at batch 1
# and 32 (the BF16 attention kept), and kernels-8b (the attention kernels).
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
  timeout "$limit" "$bin" "$@" --results "$OUT/results.jsonl" >>"$OUT/bench.log" 2>&1
  echo "$* rc=$?"
}
bench 240 decode-long-context
bench 90 decode-8b-bf16 --batches 1,32
bench 90 kernels-8b
