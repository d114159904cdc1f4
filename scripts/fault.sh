#!/usr/bin/env bash
# The fault suite (issue 22): every scenario of tools/fault (worker SIGKILL
# and SIGSTOP, metrics service and router restarts, 1,000 clients hanging up
# mid-stream, slow readers, a worker draining on SIGTERM) against real
# processes on loopback (metrics service, two CPU workers on SmolLM2, a
# router), each accounting for every request. Writes the Markdown table to
# --out (default build/fault-results.md) and exits 1 when a scenario fails.
# ctest runs a subset (fault_suite_test).
#
#   scripts/fault.sh [--scenarios a,b] [--clients N] [--out FILE]
#
# BUILD_DIR (default build) must hold the services and onecard-fault
# (scripts/build.sh, or: cmake --build build --target onecard-fault).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build}
OUT="$BUILD/fault-results.md"
ARGS=()
while (($#)); do
  case "$1" in
    --out) OUT=$2; shift ;;
    --scenarios|--clients) ARGS+=("$1=$2"); shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "fault.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
bash scripts/fetch-model.sh >/dev/null
cmake --build "$BUILD" --target onecard-fault -j "${ONECARD_JOBS:-$(nproc)}"
echo "fault: commit $(git rev-parse --short HEAD), $(nproc) cores, $(uname -m)" >&2
"$BUILD/tools/fault/onecard-fault" --work_dir="/tmp/onecard-fault-$$" --out="$OUT" "${ARGS[@]}"
