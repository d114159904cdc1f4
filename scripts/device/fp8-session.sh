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
# shellcheck source=scripts/device/session.sh
source scripts/device/session.sh
for model in 70b 8b; do
  bench 120 "decode-$model-fp8" --batches 1,8,128
done
bench 150 prefill
bench 60 decode-8b-bf16
bench 100 kernels-fp8
