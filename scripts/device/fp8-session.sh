#!/usr/bin/env bash
# One GPU call for the FP8 work (issue 18), from what scripts/device/pack.sh
# carried (PACK_TARGETS="gpu_kernels_test gpu_cuda_model_runner_test
# cuda_memory_plan_test onecard-bench-cuda"): the FP8 and memory-plan GPU
# tests (scripts/device/run.sh tests; GTEST_FILTER overrides the filter),
# then, each scenario under its own timeout so a slow one cannot take the
# rest, in order of what matters:
#   Fp8Gemm's scaled forms against the fp32 sums and epilogue kernel
#   (A = serving, B = --fp8_gemm_cublas_scales=false; order A B B A,
#   scripts/device/arms.sh flags: $OUT/arm_A.jsonl, arm_B.jsonl, arms.log) on
#   kernels-fp8, decode-8b-fp8 at batch 8, 32 and 128, decode-70b-fp8 at 8
#   and 128;
#   prefill (its FP8 cases against the E4M3 rate), decode-70b-fp8 and
#   decode-8b-fp8 at batch 1, decode-8b-bf16 (the BF16 figure kept).
# Records in $OUT/results.jsonl, tables in $OUT/bench.log, tests in
# $OUT/tests.log.
# Usage (on the GPU machine): bash scripts/device/fp8-session.sh
set -uo pipefail
export GTEST_FILTER=${GTEST_FILTER:-'*Fp8*:*Memory*:*LaunchSettings*'}
# shellcheck source=scripts/device/session.sh
source scripts/device/session.sh
BENCH_TIMEOUT=120 bash scripts/device/arms.sh flags "A= B=--fp8_gemm_cublas_scales=false" \
  kernels-fp8 "decode-8b-fp8 --batches 8,32,128" "decode-70b-fp8 --batches 8,128"
bench 150 prefill
for model in 70b 8b; do
  bench 60 "decode-$model-fp8" --batches 1
done
bench 60 decode-8b-bf16 --batches 1
