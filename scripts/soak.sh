#!/usr/bin/env bash
# Soak (issue 22; a script, not CI): the local cluster of the fault suite
# (metrics service, two CPU workers on SmolLM2, a router) under mixed load
# for 30 minutes (short, long and multi-turn requests, plus clients that
# hang up mid-stream), sampling each service's RSS, open descriptors and
# threads every 10 s; prints their drift from the end of the warm-up (a
# fifth of the run, at most 2 minutes) to the end as a Markdown table.
#
#   scripts/soak.sh [--duration 30m] [--out FILE] [--samples FILE.csv]
#
# BUILD_DIR (default build) must hold the services (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build}
DURATION=30m
OUT="$BUILD/soak-results.md"
SAMPLES="$BUILD/soak-samples.csv"
while (($#)); do
  case "$1" in
    --duration) DURATION=$2; shift ;;
    --out) OUT=$2; shift ;;
    --samples) SAMPLES=$2; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
bash scripts/fetch-model.sh >/dev/null
cmake --build "$BUILD" --target onecard-fault -j "${ONECARD_JOBS:-$(nproc)}"
echo "soak: $DURATION, commit $(git rev-parse --short HEAD), $(nproc) cores" >&2
"$BUILD/tools/fault/onecard-fault" --soak="$DURATION" --work_dir="/tmp/onecard-soak-$$" \
  --out="$OUT" --samples="$SAMPLES"
