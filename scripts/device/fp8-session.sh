#!/usr/bin/env bash
# One GPU call for the FP8 work (issue 18), from what scripts/device/pack.sh
# carried (PACK_TARGETS="gpu_kernels_test gpu_cuda_model_runner_test
# cuda_memory_plan_test onecard-bench-cuda"): every gpu-labelled test
# (scripts/device/run.sh tests), then, each scenario under its own timeout so
# a slow one cannot take the rest, in order of what matters:
#   decode-70b-fp8 and decode-8b-fp8 at batch 1, 8 and 128;
#   prefill (its FP8 cases against the E4M3 rate), decode-8b-bf16 (the BF16
#   figure kept), and kernels-fp8.
# Records in $OUT/results.jsonl, tables in
# $OUT/bench.log, tests in $OUT/tests.log.
# Usage (on the GPU machine): bash scripts/device/fp8-session.sh
set -uo pipefail
export TMPDIR=${TMPDIR:-/tmp}
bash scripts/device/run.sh tests >"$OUT/tests_run.txt" 2>&1
echo "tests: rc=$?"
dir=$TMPDIR/onecard-device
bin=$dir/bin/onecard-bench-cuda
export LD_LIBRARY_PATH=$dir/lib:/usr/local/cuda/lib64
ONECARD_COMMIT=$(cat "$dir/COMMIT")
export ONECARD_COMMIT
bench() {  # bench SECONDS RESULTS ARGS...
  local limit=$1 results=$2
  shift 2
  timeout "$limit" "$bin" "$@" --results "$results" >>"$OUT/bench.log" 2>&1
  echo "$* rc=$?"
}
for model in 70b 8b; do
  bench 120 "$OUT/results.jsonl" "decode-$model-fp8" --batches 1,8,128
done
bench 150 "$OUT/results.jsonl" prefill
bench 60 "$OUT/results.jsonl" decode-8b-bf16
bench 100 "$OUT/results.jsonl" kernels-fp8
