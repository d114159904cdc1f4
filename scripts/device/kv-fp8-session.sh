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
# shellcheck source=scripts/device/session.sh
source scripts/device/session.sh
bench 240 decode-long-context
bench 90 decode-8b-bf16
bench 60 decode-8b-bf16 --batches 1,32 --kv_cache_dtype fp8
bench 90 kernels-8b
