#!/usr/bin/env bash
# One GPU call for the decode acceptance figures of issues 16 (4-bit) and 18
# (FP8), from what scripts/device/pack.sh carried (PACK_TARGETS with
# gpu_kernels_test gpu_cuda_model_runner_test cuda_memory_plan_test
# onecard-bench-cuda): every gpu-labelled test (scripts/device/session.sh:
# skipped on a warm machine where they passed for this bundle), then each
# scenario as served, under its own timeout so a slow one cannot take the rest.
#   DECODE_PART=int4 (default): decode-70b-int4 at every preset batch,
#     decode-8b-int4 at 1, 16, 64 and 128, decode-8b-bf16 at 1, 8, 32 and 128
#     (the BF16 figure issue 16 keeps), timeline-int4;
#   DECODE_PART=fp8: decode-70b-fp8 at 1 and 8, decode-8b-fp8 at 1, 8 and 128,
#     then arms S (served: RoPE and the cache write in the decode attention
#     after every projection) and R (--fused_rope=after_cublas: RopeKvWrite
#     after the FP8 Gemv) on both at batch 1, in order and reversed
#     (scripts/device/arms.sh flags; $OUT/arm_S.jsonl, $OUT/arm_R.jsonl);
#   DECODE_PART=wide: decode-72b-int4 and decode-123b-int4 at 1 and 16;
#   DECODE_PART=kgemv: decode-70b-int4 at 1 and 16, decode-8b-int4 at 1 and
#     kernels-int4 (kGemv's and kStream's GB/s a projection, `_gemv` /
#     `_stream`): a short call that checks the one-row kernels;
#   DECODE_PART=formats: decode-70b-int4 at 1 and 16 and decode-8b-int4 at 1
#     in the 4-bit forms users' files load as (--weights): zero points in
#     groups of 128 (GPTQ, AWQ), a float min in groups of 32 (GGUF Q4_1 /
#     Q4_K), symmetric in groups of 32 (GGUF Q4_0) and of 64, after the
#     preset's own (int4: symmetric, groups of 128) in the same run;
# Records in $OUT/results.jsonl, tables in $OUT/bench.log, tests in
# $OUT/tests_run.txt.
# Usage (a `run` call carrying [".device/bundle.txz"]):
#   export OUT; DECODE_PART=int4 bash scripts/device/decode-session.sh
# (GTEST_FILTER=NoTest.None SESSION_TESTS=always runs no test: the figures
# alone on a fresh machine, whose whole gpu suite takes most of a call).
set -uo pipefail
# shellcheck source=scripts/device/session.sh
source scripts/device/session.sh
case ${DECODE_PART:-int4} in
  int4)
    bench 150 decode-70b-int4
    bench 90 decode-8b-int4 --batches 1,16,64,128
    bench 90 decode-8b-bf16 --batches 1,8,32,128
    bench 60 timeline-int4
    ;;
  fp8)
    bench 120 decode-70b-fp8 --batches 1,8
    bench 90 decode-8b-fp8 --batches 1,8,128
    BENCH_TIMEOUT=120 bash scripts/device/arms.sh flags "S= R=--fused_rope=after_cublas" \
      "decode-70b-fp8 --batches 1" "decode-8b-fp8 --batches 1"
    ;;
  wide)
    bench 120 decode-72b-int4 --batches 1,16
    bench 150 decode-123b-int4 --batches 1,16
    ;;
  kgemv)
    bench 120 decode-70b-int4 --batches 1,16
    bench 60 decode-8b-int4 --batches 1
    bench 90 kernels-int4
    ;;
  formats)
    for w in int4 int4-zero int4-g32-min int4-g32 int4-g64; do
      bench 120 decode-70b-int4 --batches 1,16 --weights "$w"
      bench 60 decode-8b-int4 --batches 1 --weights "$w"
    done
    ;;
  *)
    echo "DECODE_PART: int4, fp8, wide, kgemv or formats" >&2
    exit 2
    ;;
esac
grep -E 'tok/s|_r1(_gemv|_stream)? .*GB/s|FAILED|error' "$OUT/bench.log" | cut -c1-110
