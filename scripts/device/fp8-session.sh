#!/usr/bin/env bash
# One GPU call for the FP8 work (issue 18), from what scripts/device/pack.sh
# carried (PACK_TARGETS="gpu_kernels_test gpu_cuda_model_runner_test
# cuda_memory_plan_test onecard-bench-cuda"): every gpu-labelled test
# (scripts/device/run.sh tests), then, each scenario under its own timeout so
# a slow one cannot take the rest:
#   decode-70b-fp8 and decode-8b-fp8 at batch 1 and 8, prefill (its FP8
#   cases against the E4M3 rate), as served;
#   Fp8Gemm's scaled form from 64 rows (S, the default), from 129 (L) and
#   off (E) on decode-8b-fp8 and decode-70b-fp8 at batch 128, order S L E E L S
#   (scripts/device/arms.sh flags; FP8_ARMS replaces the arms).
# Records in $OUT/results.jsonl and $OUT/arm_NAME.jsonl, tables in
# $OUT/bench.log and $OUT/arms.log, tests in $OUT/tests_run.txt.
# Usage (on the GPU machine): bash scripts/device/fp8-session.sh
set -uo pipefail
# shellcheck source=scripts/device/session.sh
source scripts/device/session.sh
for model in 70b 8b; do
  bench 100 "decode-$model-fp8" --batches 1,8
done
bench 150 prefill
BENCH_TIMEOUT=100 bash scripts/device/arms.sh flags \
  "${FP8_ARMS:-S=--fp8_gemm_scaled_min_rows=64 L=--fp8_gemm_scaled_min_rows=129 E=--fp8_gemm_cublas_scales=false}" \
  "decode-8b-fp8 --batches 128" "decode-70b-fp8 --batches 128"
