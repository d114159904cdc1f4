# Sourced by the one-call session scripts (fp8-session.sh, kv-fp8-session.sh)
# on the GPU machine: runs every gpu-labelled test (scripts/device/run.sh
# tests, log in $OUT/tests_run.txt), then sets up what run.sh unpacked and
# defines `bench SECONDS ARGS...`: onecard-bench-cuda ARGS under a timeout,
# records in $OUT/results.jsonl unless ARGS give their own --results, tables
# appended to $OUT/bench.log.
# shellcheck shell=bash
export TMPDIR=${TMPDIR:-/tmp}
bash scripts/device/run.sh tests >"$OUT/tests_run.txt" 2>&1
echo "tests: rc=$?"
session_dir=$TMPDIR/onecard-device
session_bin=$session_dir/bin/onecard-bench-cuda
export LD_LIBRARY_PATH=$session_dir/lib:/usr/local/cuda/lib64
ONECARD_COMMIT=$(cat "$session_dir/COMMIT")
export ONECARD_COMMIT
bench() {  # bench SECONDS ARGS...
  local limit=$1
  shift
  timeout "$limit" "$session_bin" --results "$OUT/results.jsonl" "$@" >>"$OUT/bench.log" 2>&1
  echo "$* rc=$?"
}
