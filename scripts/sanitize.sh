#!/usr/bin/env bash
# Sanitizer runs of the CPU tests (issue 22), each in a build folder of its
# own, with clang:
#   asan   ASan + UBSan (-fno-sanitize-recover): every ctest test but gpu
#          (build-asan/, with gcc: clang 14 has no _Float16 on x86, which
#          dequantize_test's fp16 reference uses); a crash, leak or undefined
#          behaviour fails the test
#   tsan   TSan: the tests of the services and the router (build-tsan/),
#          with tests/sanitize/tsan_absl_mutex.cc preloaded: it tells TSan
#          what absl::Mutex orders (Debian's Abseil is not instrumented, so
#          without it every access under an absl::Mutex is reported)
#
#   scripts/sanitize.sh [--ci] [asan] [tsan]     (default: both, in full)
#
# --ci: the subset scripts/test.sh runs within CI's time:
#   asan: the parsers' unit tests (UTF-8, detokenizer, chat template, HF
#         tokenizer, bad GGUF, safetensors, HF config, service config and
#         its bounds, request conversion and preparation, router config,
#         rate limits) and the checkpoint loaders' (GGUF and HF tensors, 4-bit
#         readers and packers, the safetensors writer, the GPTQ quantizer, the
#         4-bit and gather references), built in build-fuzz/ beside the fuzzers (the same
#         ASan + UBSan objects, plus libFuzzer's coverage counters);
#   tsan: the router's concurrent core (rate limiter, queue, dispatcher,
#         worker pool).
# build-asan/ and build-tsan/ compile their tests with a time scale (below:
# cmake -DONECARD_TEST_TIME_SCALE): the tests' deadlines, time windows and
# ctest timeouts are multiplied by it (tests/testing/time_scale.h); a normal
# build's tests are unchanged.
# ONECARD_JOBS bounds build parallelism; extra ctest arguments go after --.
set -euo pipefail
cd "$(dirname "$0")/.."

CI=0
MODES=()
CTEST_ARGS=()
while (($#)); do
  case "$1" in
    --ci) CI=1 ;;
    asan|tsan) MODES+=("$1") ;;
    --) shift; CTEST_ARGS=("$@"); break ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "sanitize.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
((${#MODES[@]})) || MODES=(asan tsan)
JOBS=${ONECARD_JOBS:-$(nproc)}
# How much slower the sanitized tests run (a CPU worker's decoding, chiefly).
ASAN_TIME_SCALE=4
TSAN_TIME_SCALE=10

ASAN_CI_TESTS=(
  tokenizer_utf8_test tokenizer_incremental_detokenizer_test tokenizer_chat_template_test
  tokenizer_hf_json_loader_test gguf_bad_input_test safetensors_test hf_config_test
  services_config_test services_config_bounds_test services_request_convert_test
  router_request_prep_test router_config_test router_token_bucket_test
  layer_tensors_test hf_int4_test hf_int4_words_test safetensors_writer_test int4_matrix_test
  int4_words_test int4_gemm_ref_test gather_columns_ref_test gptq_quantizer_test)
TSAN_CI_TESTS=(router_token_bucket_test router_request_queue_test router_dispatcher_test
  router_worker_pool_test)

configure() {  # folder, cmake options... (CC / CXX: default clang, on the first run)
  local dir=$1
  shift
  if [[ ! -f $dir/CMakeCache.txt ]]; then
    CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B "$dir" -G Ninja -DONECARD_CUDA=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  else
    cmake -S . -B "$dir" "$@" >/dev/null  # the options of this script's version
  fi
}

run() {  # folder, test names (none: every test but gpu); $PRELOAD: LD_PRELOAD for ctest
  local dir=$1
  shift
  if (($#)); then
    cmake --build "$dir" -j "$JOBS" --target "$@" || return 1  # (no errexit under ||)
    local regex
    regex="^($(IFS='|'; echo "$*"))\$"
    (cd "$dir" && LD_PRELOAD=${PRELOAD:-} ctest -R "$regex" -LE gpu --output-on-failure -j 2 \
      "${CTEST_ARGS[@]}")
  else
    cmake --build "$dir" -j "$JOBS" || return 1
    (cd "$dir" && LD_PRELOAD=${PRELOAD:-} ctest -LE gpu --output-on-failure -j 2 "${CTEST_ARGS[@]}")
  fi
}

# LSan fails a test on a leak, except in Debian's uninstrumented libraries
# (scripts/lsan.supp); TSan skips races inside them (scripts/tsan.supp).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp}

status=0
for mode in "${MODES[@]}"; do
  echo "sanitize: $mode$( ((CI)) && echo ' (CI subset)')" >&2
  case $mode in
    asan)
      PRELOAD=
      if ((CI)); then
        configure "${FUZZ_BUILD_DIR:-build-fuzz}" -DONECARD_FUZZ=ON
        run "${FUZZ_BUILD_DIR:-build-fuzz}" "${ASAN_CI_TESTS[@]}" || status=1
      else
        CC=gcc CXX=g++ configure build-asan -DONECARD_SANITIZE=address,undefined \
          -DONECARD_TEST_TIME_SCALE=$ASAN_TIME_SCALE
        run build-asan || status=1
      fi ;;
    tsan)
      configure build-tsan -DONECARD_SANITIZE=thread -DONECARD_TEST_TIME_SCALE=$TSAN_TIME_SCALE
      clang++ -std=c++20 -O1 -fPIC -shared tests/sanitize/tsan_absl_mutex.cc \
        -o build-tsan/libtsan_absl_mutex.so -ldl
      PRELOAD=$PWD/build-tsan/libtsan_absl_mutex.so
      if ((CI)); then
        run build-tsan "${TSAN_CI_TESTS[@]}" || status=1
      else
        # Every test of the services and the router (names from ctest; only
        # their targets are built).
        run build-tsan $(cd build-tsan && ctest -N -LE gpu |
          sed -n 's/^ *Test *#[0-9]*: \(\(services\|metrics\|router\|ops\|service_auth\|fault\)[a-z_]*\)$/\1/p') ||
          status=1
      fi ;;
  esac
done
exit $status
