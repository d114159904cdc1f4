#!/usr/bin/env bash
# A/B arms of onecard-bench-cuda in one device call, so that arms share one
# card, its clocks and its temperature (bench/results' *-ab.jsonl files).
# Here, once per arm, with the tree in the arm's state:
#   scripts/device/arms.sh add NAME     builds onecard-bench-cuda in build-device/
#                                       (incremental) and keeps it as .device/arms/bench_NAME
#   scripts/device/arms.sh pack         .device/arms.tgz: the arms and the libraries
#                                       they need (carry it alone: ~5 MiB an arm + ~10)
#   ARMS_BESIDE_BUNDLE=NAME scripts/device/arms.sh pack
#                                       the arms without libraries, for a call that also
#                                       carries .device/bundle.txz (scripts/device/pack.sh,
#                                       unpacked first, e.g. by session.sh): arm NAME is the
#                                       bundle's own onecard-bench-cuda (so pack.sh builds it
#                                       from the tree in that arm's state), the others run on
#                                       the bundle's libraries (~10 MiB an arm)
#   ARMS_XZ=1 scripts/device/arms.sh pack
#                                       the same into .device/arms.txz (xz: ~11 MiB for an arm
#                                       beside the bundle, where gzip's does not fit 64 MiB);
#                                       `run` takes whichever of the two was carried
# On the GPU machine:
#   scripts/device/arms.sh run "A B" SCENARIO...   runs the arms in the order given and
#                                       then reversed (A B B A: drift shows), each scenario
#                                       a quoted string with its flags; records in
#                                       $OUT/arm_NAME.jsonl (commit COMMIT-armNAME), logs in
#                                       $OUT/arms.log
# e.g. run(command='bash scripts/device/arms.sh run "A B" kernels-int4 "decode-70b-int4 --batches 1,16"',
#          carry=[".device/arms.tgz"])
# Arms that differ only in onecard-bench-cuda's comparison flags run the one
# binary of the bundle (scripts/device/pack.sh), after run.sh unpacked it:
#   scripts/device/arms.sh flags "A= B=--early_dependents" SCENARIO...
#                                       NAME=FLAGS (comma-separated flags), the same
#                                       order and reversal; records in $OUT/arm_NAME.jsonl
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
arms="$root/.device/arms"

# Runs each scenario of "$@" (a scenario and its flags) for every arm of
# `order` and then in reverse (A B B A: drift shows), an arm's binary, flags
# and commit from `arm_setup ARM`; records in $OUT/arm_NAME.jsonl, tables in
# $OUT/arms.log; exits 1 when a run failed.
run_arms() {
  OUT=${OUT:-/tmp/onecard-out}
  mkdir -p "$OUT"
  local reversed=() status=0 arm s i
  for ((i = ${#order[@]} - 1; i >= 0; --i)); do reversed+=("${order[i]}"); done
  for arm in "${order[@]}" "${reversed[@]}"; do
    arm_setup "$arm"
    export ONECARD_COMMIT
    for s in "$@"; do
      echo "== $arm_name${arm_flags:+ ($arm_flags)} $s" >>"$OUT/arms.log"
      # shellcheck disable=SC2086  # a scenario and its flags
      timeout "${BENCH_TIMEOUT:-150}" "$arm_bin" $s $arm_flags --results "$OUT/arm_$arm_name.jsonl" \
        >>"$OUT/arms.log" 2>&1 || { status=1; echo "FAILED: $arm_name $s"; }
    done
  done
  grep -E '^== |tok/s|GB/s' "$OUT/arms.log" | cut -c1-110
  exit $status
}
case ${1:-} in
  add)
    name=${2:?arms.sh add NAME}
    build=${BUILD_DIR:-$root/build-device}
    cmake -S "$root" -B "$build" -G Ninja -DONECARD_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j "${ONECARD_JOBS:-2}" --target onecard-bench-cuda
    mkdir -p "$arms"
    cp "$build/tools/bench/cuda/onecard-bench-cuda" "$arms/bench_$name"
    strip --strip-unneeded "$arms/bench_$name"
    commit=$(git -C "$root" rev-parse --short HEAD)
    git -C "$root" diff --quiet HEAD -- engine tools/bench/cuda || commit="$commit-dirty"
    echo "$commit" >"$arms/COMMIT_$name"
    echo "arms: bench_$name from $commit"
    ;;
  pack)
    compgen -G "$arms/bench_*" >/dev/null || { echo "arms: none yet (arms.sh add NAME)" >&2; exit 1; }
    rm -rf "${arms:?}/lib"
    beside=${ARMS_BESIDE_BUNDLE:-}
    # pack_to DIR: DIR's files into .device/arms.tgz, or .device/arms.txz
    # with ARMS_XZ (the other one removed, so `run` finds what was packed).
    pack_to() {
      rm -f "$root/.device/arms.tgz" "$root/.device/arms.txz"
      if [[ -n ${ARMS_XZ:-} ]]; then
        packed=$root/.device/arms.txz
        tar -C "$1" -cf - . | xz -6 -T2 >"$packed"
      else
        packed=$root/.device/arms.tgz
        tar -C "$1" -czf "$packed" .
      fi
    }
    if [[ -n $beside ]]; then
      # Arm $beside: named in BUNDLE_ARM; `run` links it to the unpacked bundle.
      [[ -f $root/.device/COMMIT ]] || { echo "arms: no bundle (scripts/device/pack.sh)" >&2; exit 1; }
      stage=$(mktemp -d)
      trap 'rm -rf "$stage"' EXIT
      for f in "$arms"/bench_* "$arms"/COMMIT_*; do
        case ${f##*/} in bench_"$beside" | COMMIT_"$beside") ;; *) cp "$f" "$stage/" ;; esac
      done
      echo "$beside" >"$stage/BUNDLE_ARM"
      cp "$root/.device/COMMIT" "$stage/COMMIT_$beside"
      pack_to "$stage"
    else
      # shellcheck source=scripts/device/libs.sh
      source "$root/scripts/device/libs.sh"
      copy_device_libs "$arms/lib" "$arms"/bench_*
      stage=$arms
      pack_to "$arms"
    fi
    echo "arms: $packed $(du -sm "$packed" | cut -f1) MiB:" \
      "$(cd "$stage" && echo bench_*)${beside:+, and bench_$beside from the bundle}"
    ;;
  run)
    read -r -a order <<<"${2:?arms.sh run \"A B\" SCENARIO...}"
    shift 2
    dir=${TMPDIR:-/tmp}/onecard-arms
    rm -rf "$dir" && mkdir -p "$dir"
    if [[ -f $root/.device/arms.txz ]]; then
      xz -dc "$root/.device/arms.txz" | tar -C "$dir" -x
    else
      tar -C "$dir" -xzf "$root/.device/arms.tgz"
    fi
    # Packed with ARMS_BESIDE_BUNDLE: one arm is the unpacked bundle's binary,
    # and the others run on its libraries.
    bundle=${TMPDIR:-/tmp}/onecard-device
    if [[ -f $dir/BUNDLE_ARM ]]; then
      [[ -x $bundle/bin/onecard-bench-cuda ]] ||
        { echo "arms: no unpacked bundle in $bundle (run.sh or session.sh first)" >&2; exit 1; }
      ln -s "$bundle/bin/onecard-bench-cuda" "$dir/bench_$(cat "$dir/BUNDLE_ARM")"
    fi
    export LD_LIBRARY_PATH="$dir/lib:$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
    arm_setup() {  # ARM: its own binary
      arm_name=$1 arm_bin=$dir/bench_$1 arm_flags=""
      ONECARD_COMMIT="$(cat "$dir/COMMIT_$1")-arm$1"
    }
    run_arms "$@"
    ;;
  flags)
    read -r -a order <<<"${2:?arms.sh flags \"A=FLAGS B=FLAGS\" SCENARIO...}"
    shift 2
    bin=${TMPDIR:-/tmp}/onecard-device/bin
    [[ -x $bin/onecard-bench-cuda ]] || bin=$root/.device/bin
    commit=$(cat "$bin/../COMMIT" 2>/dev/null || echo unknown)
    # shellcheck source=scripts/device/libs.sh
    source "$root/scripts/device/libs.sh"
    export LD_LIBRARY_PATH="${DEVICE_LIB:-$bin/../lib}:$(cuda_lib_dir):${LD_LIBRARY_PATH:-}"
    arm_setup() {  # NAME=FLAGS: the bundle's binary with those flags
      arm_name=${1%%=*} arm_bin=$bin/onecard-bench-cuda arm_flags=${1#*=}
      arm_flags=${arm_flags//,/ }
      ONECARD_COMMIT=$commit
    }
    run_arms "$@"
    ;;
  *)
    echo "usage: arms.sh add NAME | pack | run \"A B ...\" SCENARIO... | flags \"A=F B=F\" SCENARIO..." >&2
    exit 2
    ;;
esac
