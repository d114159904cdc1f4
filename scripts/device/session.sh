# Sourced by the one-call session scripts (fp8-session.sh, kv-fp8-session.sh)
# on the GPU machine: runs every gpu-labelled test (scripts/device/run.sh
# tests, log in $OUT/tests_run.txt), then sets up what run.sh unpacked and
# defines `bench SECONDS ARGS...`: onecard-bench-cuda ARGS under a timeout,
# records in $OUT/results.jsonl unless ARGS give their own --results, tables
# appended to $OUT/bench.log.
# The tests take minutes: on a machine still warm from an earlier call where
# they all passed for the same bundle (no GTEST_FILTER; its checksum, kept in
# $TMPDIR/onecard-tests-passed; run.sh left it unpacked then), they are
# skipped, unless SESSION_TESTS=always.
# shellcheck shell=bash
export TMPDIR=${TMPDIR:-/tmp}
session_tests=${SESSION_TESTS:-auto}
tests_passed_file=$TMPDIR/onecard-tests-passed
bundle_sum=$(cksum <.device/bundle.txz)
if [[ $session_tests != always && -d $TMPDIR/onecard-device/bin &&
      $(cat "$tests_passed_file" 2>/dev/null) == "$bundle_sum" ]]; then
  echo "tests: skipped (they passed on this machine for this bundle, of" \
       "$(cat "$TMPDIR/onecard-device/COMMIT"); SESSION_TESTS=always runs them)"
else
  bash scripts/device/run.sh tests >"$OUT/tests_run.txt" 2>&1
  tests_rc=$?
  echo "tests: rc=$tests_rc"
  # Only the whole suite marks the bundle as tested.
  ((tests_rc == 0)) && [[ ${GTEST_FILTER:-*} == "*" ]] && echo "$bundle_sum" >"$tests_passed_file"
fi
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
