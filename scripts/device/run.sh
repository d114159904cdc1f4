#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, what scripts/device/pack.sh
# carried in .device/ (bundle.txz, unpacked under $TMPDIR, or bin/ and lib/):
# the machine check, every gpu-labelled test and the
# CUDA benchmarks, with logs under $OUT:
#   machine.txt   nvidia-smi, nvcc --version, ldd of the binaries
#   tests.log     the gtest binaries (the gpu label's suites)
#   bench.log     onecard-bench-cuda tables and messages
#   results.jsonl the benchmark records (bench/results format)
#   results_ab.jsonl  decode-8b-bf16 again with $AB_FLAGS (onecard-bench-cuda's
#                 comparison arms; default --pdl=false, i.e. without programmatic
#                 dependent launch), then without them: an A/B inside one run;
#                 skipped when NO_AB_COMPARISON is set
#   accuracy.log, accuracy.jsonl, perplexity_<model>.json  (mode accuracy,
#                 not in all; $ACCURACY_MODELS: smollm2 and/or qwen, default
#                 smollm2): per model, Hugging Face's perplexity over
#                 tests/data/text/sqlite-docs.txt (tests/golden/
#                 make_perplexity_golden.py on the GPU; the wheels it lacks,
#                 such as gguf, carried in .model/wheels/), `onecard
#                 perplexity` of the file's own weights on the cuda and the cpu
#                 backend, and of its re-quantizations by `onecard quantize`
#                 (rtn, and gptq for SmolLM2; groups of 128, SmolLM2's 64) of
#                 transformers' fp32 export (tests/golden/
#                 export_hf_checkpoint.py): one JSON line a run {"row",
#                 "model", "backend", "result"}
#                 (bench/results/accuracy.md)
# Usage (see docs/cuda.md): scripts/device/run.sh [tests|bench|all|accuracy|int4-goldens] [scenario...]
#   a scenario may carry its flags in one word: "decode-70b-int4 --batches 1,64";
#   $GTEST_FILTER narrows the tests (default every one).
# Exit status: non-zero when a test or a benchmark failed.
set -uo pipefail
what=${1:-all}
shift || true
scenarios=("$@")
((${#scenarios[@]})) || scenarios=(ceilings decode-8b-bf16 decode-8b-int4 decode-70b-int4
                                    decode-70b-int4-48g decode-72b-int4 decode-123b-int4 prefill
                                    budget-8b-bf16 kernels-8b kernels-int4 load)
OUT=${OUT:-/tmp/onecard-out}
mkdir -p "$OUT"
bin=.device/bin
commit_file=.device/COMMIT
# What pack.sh bundled, when the call carried .device/bundle.txz (alone, or
# newer than a .device/bin an earlier call left on this machine).
if [[ -f .device/bundle.txz && (! -d $bin || .device/bundle.txz -nt $bin) ]]; then
  unpacked=${TMPDIR:-/tmp}/onecard-device
  rm -rf "$unpacked" && mkdir -p "$unpacked" && tar -C "$unpacked" -xJf .device/bundle.txz
  bin=$unpacked/bin
  commit_file=$unpacked/COMMIT
  DEVICE_LIB=${DEVICE_LIB:-$unpacked/lib}
fi

# shellcheck source=scripts/device/libs.sh
source scripts/device/libs.sh
cuda_libs=$(cuda_lib_dir)
# $DEVICE_LIB: where an earlier call left .device/lib when the bundle was
# more than one call may carry (ICU alone is 30 MiB; docs/cuda.md).
export LD_LIBRARY_PATH="${DEVICE_LIB:-$PWD/.device/lib}:$cuda_libs:${LD_LIBRARY_PATH:-}"
export ONECARD_COMMIT=$(cat "$commit_file" 2>/dev/null || echo unknown)

{
  echo "== commit $ONECARD_COMMIT"; date -u
  nvidia-smi; nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv
  nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version
  uname -a; nproc; free -g
  echo "== cuda libs from $cuda_libs"
  for b in "$bin"/*; do echo "== ldd $b"; ldd "$b"; done
} >"$OUT/machine.txt" 2>&1

status=0
if [[ $what == all || $what == tests ]]; then
  # Per-binary limits keep the whole run inside one 10-minute call
  # (gpu_kernels_test's covers its whole run on an H100; $KERNELS_TEST_TIMEOUT
  # shortens it for a filtered run).
  for t in cuda_memory_plan_test:20 gpu_kernels_test:"${KERNELS_TEST_TIMEOUT:-360}" \
    gpu_cuda_model_runner_test:240; do
    echo "===== ${t%%:*}" | tee -a "$OUT/tests.log"
    timeout "${t##*:}" "$bin/${t%%:*}" --gtest_color=no --gtest_filter="${GTEST_FILTER:-*}" \
      >>"$OUT/tests.log" 2>&1 || status=1
    grep -E '^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests' "$OUT/tests.log" | tail -3
  done
  grep -E '^\[  FAILED  \]' "$OUT/tests.log" | sort -u | head -40
fi
if [[ $what == all || $what == bench ]]; then
  for s in "${scenarios[@]}"; do
    echo "===== onecard-bench-cuda $s" | tee -a "$OUT/bench.log"
    # shellcheck disable=SC2086  # a scenario and its flags ("decode-70b-int4 --batches 1,16")
    timeout "${BENCH_TIMEOUT:-150}" "$bin/onecard-bench-cuda" $s --results "$OUT/results.jsonl" \
      >>"$OUT/bench.log" 2>&1 || { status=1; echo "FAILED: $s"; }
  done
  if [[ -z "${NO_AB_COMPARISON:-}" ]]; then  # with the main run this orders them
    # B (as committed), A ($AB_ENV), B: drift between runs shows
    for setting in "${AB_FLAGS:---pdl=false}" ""; do
      echo "===== onecard-bench-cuda decode-8b-bf16 with '$setting'" | tee -a "$OUT/bench.log"
      # shellcheck disable=SC2086  # the arms are separate flags
      timeout "${BENCH_TIMEOUT:-150}" "$bin/onecard-bench-cuda" decode-8b-bf16 $setting \
        --results "$OUT/results_ab.jsonl" >>"$OUT/bench.log" 2>&1 || echo "FAILED: '$setting' decode"
    done
  fi
  grep -vE '^ *$' "$OUT/bench.log" | grep -E 'GB/s|tok/s|TFLOP|ms |us |GiB|bytes|bool|FAILED|error|needs' | cut -c1-110
fi
if [[ $what == accuracy ]]; then
  text=tests/data/text/sqlite-docs.txt
  if compgen -G ".model/wheels/*.whl" >/dev/null; then
    py=${TMPDIR:-/tmp}/onecard-py
    python3 -m pip install -q --no-deps --target "$py" .model/wheels/*.whl >>"$OUT/accuracy.log" 2>&1
    export PYTHONPATH="$py:${PYTHONPATH:-}"
  fi
  # One JSON line a run in accuracy.jsonl: {"row", "model", "backend", "result": onecard's}.
  ppl() {  # row model backend window:stride:tokens
    local row=$1 m=$2 backend=$3 window stride tokens line
    IFS=: read -r window stride tokens <<<"$4"
    echo "===== onecard perplexity $row $backend $4" | tee -a "$OUT/accuracy.log"
    line=$(timeout 400 "$bin/onecard" perplexity --model "$m" --text "$text" --backend "$backend" \
      --window "$window" --stride "$stride" --text-tokens "$tokens" --threads "$(nproc)" \
      2>>"$OUT/accuracy.log") || { status=1; echo "FAILED: $row $backend $4"; return; }
    printf '{"row": "%s", "model": "%s", "backend": "%s", "result": %s}\n' "$row" "$m" \
      "$backend" "$line" >>"$OUT/accuracy.jsonl"
  }
  # ACCURACY_MODELS: smollm2 (default) and/or qwen (models/ must hold the files);
  # ACCURACY_ROWS: any of hf (Hugging Face's perplexity), own (the file's
  # weights), requant (onecard quantize's); default all three.
  rows=" ${ACCURACY_ROWS:-hf own requant} "
  for name in ${ACCURACY_MODELS:-smollm2}; do
    case $name in
      # SmolLM2's hidden size, 576, is no multiple of 128: its groups are 64.
      smollm2) model=models/SmolLM2-135M-Instruct.Q4_1.gguf golden=tests/golden/smollm2 group=64 ;;
      qwen) model=models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf golden=tests/golden/qwen2_5_coder
            group=128 ;;
    esac
    [[ -f $model ]] || { status=1; echo "FAILED: $model missing"; continue; }
    if [[ $rows == *" hf "* ]]; then
      echo "===== Hugging Face perplexity of $model" | tee -a "$OUT/accuracy.log"
      timeout 400 python3 tests/golden/make_perplexity_golden.py --device cuda --gguf "$model" \
        --out "$golden/perplexity.json" >>"$OUT/accuracy.log" 2>&1 &&
        cp "$golden/perplexity.json" "$OUT/perplexity_$name.json" ||
        { status=1; echo "FAILED: HF $name"; }
    fi
    # The file's own weights: the golden's windows on cuda, CI's prefix on cpu too.
    if [[ $rows == *" own "* ]]; then
      for run in 512:256:2048 1024:512:0 2048:1024:0; do ppl own "$model" cuda "$run"; done
      ppl own "$model" cpu 512:256:2048
    fi
    [[ $rows == *" requant "* ]] || continue
    # Re-quantized to 4-bit g128 by onecard from transformers' fp32 export of
    # the same weights: round-to-nearest, and GPTQ calibrated on another text
    # (GPTQ only for SmolLM2: its O(k^3) a projection runs on one core).
    acc=${TMPDIR:-/tmp}/onecard-acc/$name
    timeout 400 python3 tests/golden/export_hf_checkpoint.py "$model" "$acc/f32" \
      >>"$OUT/accuracy.log" 2>&1 || { status=1; echo "FAILED: export $name"; continue; }
    methods=(rtn)
    [[ $name == smollm2 ]] && methods+=(gptq)
    for method in "${methods[@]}"; do
      echo "===== onecard quantize $name $method" | tee -a "$OUT/accuracy.log"
      calibration=()
      [[ $method == gptq ]] && calibration=(--calibration tests/data/text/sqlite-calibration.txt
                                            --calibration-tokens 8192)
      timeout 900 "$bin/onecard" quantize --model "$acc/f32" --out "$acc/$method" --method "$method" \
        --group-size "$group" "${calibration[@]}" --threads "$(nproc)" >>"$OUT/accuracy.log" 2>&1 ||
        { status=1; echo "FAILED: quantize $name $method"; continue; }
      for run in 1024:512:0 2048:1024:0; do ppl "$method-g$group" "$acc/$method" cuda "$run"; done
    done
  done
  cat "$OUT/accuracy.jsonl"
fi
if [[ $what == int4-goldens ]]; then
  # SmolLM2 as a GPTQ act-order file and an AutoAWQ file (models/smollm2-gptq-act,
  # models/smollm2-awq) with Hugging Face's goldens of their values
  # (tests/golden/make_smollm2_int4_goldens.py; INT4_GOLDENS_ARGS=--models-only
  # remakes the files alone), then the test that reads them; the goldens come
  # back as int4_goldens.tgz (commit tests/golden/smollm2_gptq_act, _awq).
  if compgen -G ".model/wheels/*.whl" >/dev/null; then
    py=${TMPDIR:-/tmp}/onecard-py
    python3 -m pip install -q --no-deps --target "$py" .model/wheels/*.whl >>"$OUT/int4.log" 2>&1
    export PYTHONPATH="$py:${PYTHONPATH:-}"
  fi
  echo "===== make_smollm2_int4_goldens.py ${INT4_GOLDENS_ARGS:-}" | tee -a "$OUT/int4.log"
  # shellcheck disable=SC2086  # the arguments are separate flags
  timeout 400 python3 tests/golden/make_smollm2_int4_goldens.py --out-models models --device cuda \
    ${INT4_GOLDENS_ARGS:-} >>"$OUT/int4.log" 2>&1 || { status=1; echo "FAILED: the goldens"; }
  tar -czf "$OUT/int4_goldens.tgz" tests/golden/smollm2_gptq_act tests/golden/smollm2_awq 2>/dev/null
  timeout 300 "$bin/gpu_cuda_model_runner_test" --gtest_color=no \
    --gtest_filter='*SmolLm2GptqActOrderAndAwq*:*HfCheckpointsMatchCpu*' >>"$OUT/int4.log" 2>&1 ||
    status=1
  grep -E 'vs HF|OK \]|FAILED|sha256' "$OUT/int4.log" | tail -30
fi
exit $status
