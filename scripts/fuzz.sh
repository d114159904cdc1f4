#!/usr/bin/env bash
# Builds the fuzz targets of tests/fuzz with clang, libFuzzer, ASan and UBSan
# (a build folder of their own, build-fuzz/) and runs each for a given time
# from its seeds (tests/fuzz/corpus/<target>, read only) plus a working
# corpus (build-fuzz/corpus/<target>). Prints one Markdown row a target:
# executions, edges covered, features, corpus size, crashes. A crash input
# goes to build-fuzz/crashes/<target>/ and the script exits 1; once fixed,
# copy it into tests/fuzz/corpus/<target>/ as crash-<what> (ctest
# fuzz_replay_<target> replays it from then on).
#
#   scripts/fuzz.sh [--seconds N] [--smoke] [--table FILE] [TARGET ...]
#
# --smoke: 10 s a target (what scripts/test.sh runs). Default 60 s a target.
# Needs models/ (scripts/fetch-model.sh): the tokenizer, request and openai targets
# use SmolLM2's tokenizer. ONECARD_JOBS bounds the build's parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."

ALL=(gguf safetensors hf_config hf_tokenizer chat_template tokenizer request service_config openai)
SECONDS_EACH=60
TABLE=""
TARGETS=()
while (($#)); do
  case "$1" in
    --seconds) SECONDS_EACH=$2; shift ;;
    --smoke) SECONDS_EACH=10 ;;
    --table) TABLE=$2; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) TARGETS+=("$1") ;;
  esac
  shift
done
((${#TARGETS[@]})) || TARGETS=("${ALL[@]}")

BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${ONECARD_JOBS:-$(nproc)}
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DONECARD_CUDA=OFF -DONECARD_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]/%/_fuzz}"

mkdir -p "$BUILD/logs"
rows="| target | seconds | executions | exec/s | edges (cov) | features (ft) | corpus | crashes |
|---|---:|---:|---:|---:|---:|---:|---:|"
failed=0
for t in "${TARGETS[@]}"; do
  mkdir -p "$BUILD/corpus/$t" "$BUILD/crashes/$t"
  log="$BUILD/logs/$t.log"
  crashes=0
  # -rss_limit_mb and -timeout make a blow-up or a hang a finding too.
  if ! "$BUILD/tests/fuzz/${t}_fuzz" -max_total_time="$SECONDS_EACH" -print_final_stats=1 \
      -rss_limit_mb=2048 -timeout=30 -artifact_prefix="$BUILD/crashes/$t/" \
      "$BUILD/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    crashes=1
    failed=1
    echo "fuzz: $t found a crash (log $log, input under $BUILD/crashes/$t/)" >&2
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$last")
  row="| $t | $SECONDS_EACH | ${execs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | $crashes |"
  echo "$row"
  rows+=$'\n'"$row"
done
[[ -z $TABLE ]] || printf '%s\n' "$rows" >"$TABLE"
exit $failed
