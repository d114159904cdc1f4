#!/usr/bin/env bash
# One GPU call for issue 18's accuracy report on SmolLM2, from the binaries
# scripts/device/stage.sh unpacked (PACK_TARGETS="gpu_cuda_model_runner_test
# onecard") and models/SmolLM2-135M-Instruct.Q4_1.gguf (stage.sh brings it in
# pieces, docs/cuda.md):
# - gpu_cuda_model_runner_test's SmolLM2 cases, among them the FP8 KV cache
#   against the BF16 one (16 greedy tokens on the golden prompts) and against
#   the cpu runner with the same scales;
# - onecard perplexity on the cuda backend over the golden's 2,048 tokens in
#   windows of 512 moving by 256: KV cache bf16, then fp8;
# - the same over FP8 weights (onecard quantize --format fp8 of the GGUF):
#   fp8_compute w8a8 (the default), then w8a16.
# Logs under $OUT; one JSON line a perplexity run in $OUT/accuracy.jsonl.
# Usage (on the GPU machine, repository root): bash scripts/device/fp8-accuracy-session.sh
set -uo pipefail
OUT=${OUT:-/tmp/onecard-out}
mkdir -p "$OUT"
dev=/tmp/onecard-device
export LD_LIBRARY_PATH=$dev/lib:/usr/local/cuda/lib64
model=models/SmolLM2-135M-Instruct.Q4_1.gguf
text=tests/data/text/sqlite-docs.txt
timeout 300 "$dev/bin/gpu_cuda_model_runner_test" --gtest_color=no --gtest_filter='*Smol*' \
  >"$OUT/tests.log" 2>&1
echo "SmolLM2 runner tests: rc=$?"
grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/tests.log"
ppl() {  # ppl LABEL MODEL FLAGS...
  local label=$1 m=$2 line
  shift 2
  line=$(timeout 200 "$dev/bin/onecard" perplexity --model "$m" --text "$text" --backend cuda \
    --window 512 --stride 256 --text-tokens 2048 "$@" 2>>"$OUT/perplexity.log") ||
    { echo "FAILED: $label"; return; }
  printf '{"row": "%s", "result": %s}\n' "$label" "$line" >>"$OUT/accuracy.jsonl"
}
ppl kv-bf16 "$model" --kv-cache-dtype bf16
ppl kv-fp8 "$model" --kv-cache-dtype fp8
timeout 200 "$dev/bin/onecard" quantize --model "$model" --out /tmp/smollm2-fp8 --format fp8 \
  --allow-requantize --threads "$(nproc)" >"$OUT/quantize.log" 2>&1 || echo "FAILED: quantize"
ppl fp8-weights-w8a8 /tmp/smollm2-fp8 --fp8-compute w8a8
ppl fp8-weights-w8a16 /tmp/smollm2-fp8 --fp8-compute w8a16
cut -c1-400 "$OUT/accuracy.jsonl"
