#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root: the serving path on the
# card (issue 20), from what `scripts/device/pack.sh cluster` bundled
# (.device/bundle.txz: onecard-worker, onecard-router, onecard-bench,
# onecard-bench-cuda and the services' libraries). Synthetic models
# (--model synthetic:<shape>[:<weights>]) give the workers real step times.
# Parts (arguments, in order; default: 8b):
#   8b         onecard-bench-cuda decode-8b-bf16 batch 1 (the raw decode of
#              the same run), then one worker on synthetic:llama3-8b: serve-mix
#              (each class alone: warm-up, then 10 runs), one stream of
#              128/256 (host work against the raw decode), offline throughput
#              (128 users of 128/128, then of 1000/1000), and `stability`
#              (1,000 requests through a router, device memory before/after)
#   72b        `serve-load` on synthetic:qwen2-72b:int4 under --gpu-memory-budget
#              $BUDGET_72B (default 48GiB): 150 closed-loop users of 128/128
#              through a router with the worker's gauges sampled, then the
#              90/10 short/long mix at 0.8x capacity, priority against FIFO; $PREFILL_CAP:
#              the workers' --long-prefill-token-threshold
#   70b-mix    the 8b part's serve-mix, single stream and offline runs on
#              synthetic:llama3-70b:int4 (about 5 minutes)
#   8b-offline, 70b-offline   the offline runs of 8b / 70b-mix alone (the worker's
#              /metrics scraped before, between and after them)
#   8b-ahead, 70b-ahead   the raw decode (8b: batches 1 and 128; 70b: 1), then one
#              stream and the offline runs with the worker's --async-scheduling true (one
#              step of look-ahead; cases "8b-bf16-ahead-", "70b-int4-ahead-"), to compare
#              with 8b-offline / 70b-offline in the same call
#   8b-fp8     the 8b part's serve-mix, single stream and offline runs on
#              synthetic:llama3-8b:fp8 (FP8 weights, W8A8 past the GEMV)
#   70b-fp8-mix, 70b-fp8-offline   the serve-mix and single stream / the offline runs on
#              synthetic:llama3-70b:fp8 (two parts: together they pass one call's 10 minutes);
#              8b-fp8-offline the offline runs of 8b-fp8 alone; 70b-fp8-ahead one stream and
#              the offline runs on synthetic:llama3-70b:fp8 with --async-scheduling true
#   8b-fp8-ahead   the raw decode-8b-fp8 (batches 1 and 128), then one stream and the
#              offline runs on synthetic:llama3-8b:fp8 with --async-scheduling true
#   ttft-70b   one stream of 128/1 and of 128/32 on synthetic:llama3-70b:int4, without
#              and with --async-scheduling true (the time to first token of each)
#   70b        onecard-bench-cuda decode-70b-int4 batch 1, one stream of 128/256
#              through a worker on synthetic:llama3-70b:int4, and `stability` on it
#              (1,000 requests of 128/32, 32 users)
# Under $OUT: results.jsonl (every record, the H200 as their device), *.json
# (each run's full result), metrics-*.txt (a worker's /metrics around its offline runs),
# bench.log, logs/ (each process's log),
# gpu_memory.txt (nvidia-smi while each worker serves), summary.txt.
# A call brings back few files: `tar` $OUT's JSON and logs into one after it.
# Exit status: non-zero when a step failed.
set -uo pipefail
OUT=${OUT:-/tmp/onecard-out}
mkdir -p "$OUT/logs"
parts=("$@")
((${#parts[@]})) || parts=(8b)

unpacked=${TMPDIR:-/tmp}/onecard-cluster
if [[ ! -x $unpacked/bin/onecard-worker || .device/bundle.txz -nt $unpacked/bin ]]; then
  rm -rf "$unpacked" && mkdir -p "$unpacked"
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    .device/bundle.txz "$unpacked" || { echo "cluster: cannot unpack .device/bundle.txz" >&2; exit 1; }
fi
bin=$unpacked/bin
# shellcheck source=scripts/device/libs.sh
source scripts/device/libs.sh
cuda_libs=$(cuda_lib_dir)
export LD_LIBRARY_PATH="$unpacked/lib:$cuda_libs:${LD_LIBRARY_PATH:-}"
export ONECARD_COMMIT=$(cat "$unpacked/COMMIT" 2>/dev/null || echo unknown)
work=${TMPDIR:-/tmp}/onecard-cluster-work
mkdir -p "$work"
results=$OUT/results.jsonl
status=0
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
step() {  # step NAME COMMAND...: runs it, logs it, counts a failure
  local name=$1
  shift
  echo "===== $name: $*" >>"$OUT/bench.log"
  local t0=$SECONDS
  if "$@" >>"$OUT/bench.log" 2>&1; then
    say "ok     $name ($((SECONDS - t0)) s)"
  else
    say "FAILED $name ($((SECONDS - t0)) s, exit $?)"
    status=1
  fi
}
gpu_memory() { echo "$1: $(nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader)" \
  >>"$OUT/gpu_memory.txt"; }
say "commit $ONECARD_COMMIT, $(date -u), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"

# The device string the CUDA benchmark writes, so every record names the card.
device_of_records() {
  python3 -c 'import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
print(json.loads(lines[-1])["device"] if lines else "")' "$results" 2>/dev/null
}
# onecard-bench with the card named in its records, under $limit seconds
# (default 240: one stuck run must not take the whole call).
bench() {
  timeout "${limit:-240}" "$bin/onecard-bench" "$@" --device "$device" --results "$results" \
    --log_dir "$OUT/logs"
}

# One worker on `model` at 127.0.0.1:$port; waits for READY.
start_worker() {
  local model=$1 port=$2 log=$3
  shift 3
  "$bin/onecard-worker" --model "$model" --backend cuda --listen "127.0.0.1:$port" \
    --metrics-listen 127.0.0.1:0 "$@" >"$OUT/logs/$log.out" 2>"$OUT/logs/$log.log" &
  worker_pid=$!
  for _ in $(seq 1 600); do
    grep -q READY "$OUT/logs/$log.out" && return 0
    kill -0 "$worker_pid" 2>/dev/null || break
    sleep 0.5
  done
  say "FAILED worker $log did not become ready"
  status=1
  return 1
}
stop_worker() { kill -TERM "$worker_pid" 2>/dev/null && wait "$worker_pid"; }

# A step's token budget (the worker's --max-batched-tokens): $BATCHED_TOKENS, default 2048.
gpu_args="--max-num-seqs 128 --max-batched-tokens ${BATCHED_TOKENS:-2048}"
# The worker's /metrics (its address from the worker's stdout) into $OUT/metrics-$1.txt:
# the step host time and idle gap histograms, to break a served step down.
scrape() {
  local addr
  addr=$(awk '/^LISTENING metrics/{print $3}' "$OUT/logs/worker-$2.out")
  python3 -c 'import sys, urllib.request
open(sys.argv[2], "w").write(urllib.request.urlopen("http://" + sys.argv[1] + "/metrics", timeout=10).read().decode())' \
    "$addr" "$OUT/metrics-$1.txt" || say "FAILED scraping $1"
}

# One worker on model $1 at port $2 (logs worker-$3; records' cases start "$3-"): serve-mix (each
# class alone: warm-up, then 10 runs) unless $4 is "offline" or "ahead", one stream of 128/256
# unless $4 is "offline", offline throughput (128 users of 128/128, then of 1000/1000) unless $4
# is "mix", the worker's metrics scraped around the offline runs. $4 "ahead": the worker takes
# --async-scheduling true (one step of look-ahead).
serve_tables() {
  local model=$1 port=$2 name=$3 only=${4:-} t=127.0.0.1:$2 extra=""
  [[ $only == ahead ]] && extra="--async-scheduling true"
  # shellcheck disable=SC2086
  start_worker "$model" "$port" "worker-$name" $gpu_args $tune $extra || return
  gpu_memory "$model worker, loaded"
  if [[ $only != offline && $only != ahead ]]; then
    for c in short-qa long-generation long-context multi-turn; do
      limit=420 step "serve-mix $c ($name)" bench serve --target $t --mix $c --users 1 --requests 10 \
        --warmup 1 --case_prefix "$name-" --json "$OUT/serve-mix-$c-$name.json"
    done
  fi
  if [[ $only != offline ]]; then
    step "single-stream ($name)" bench serve --target $t --mix "single-stream=1:128/256" \
      --users 1 --requests 5 --warmup 1 --case_prefix "$name-" \
      --json "$OUT/single-stream-$name.json"
  fi
  if [[ $only != mix ]]; then
    scrape "$name-before-offline" "$name"
    step "offline-128 ($name)" bench serve --target $t --mix "offline-128=1:128/128" --users 128 \
      --requests 1024 --warmup 128 --case_prefix "$name-" \
      --json "$OUT/offline-128-$name.json"
    scrape "$name-after-offline-128" "$name"
    gpu_memory "$model worker, after offline-128"
    limit=400 step "offline-1000 ($name)" bench serve --target $t \
      --mix "offline-1000=1:1000/1000" --users 128 --requests 256 --warmup 0 \
      --case_prefix "$name-" --json "$OUT/offline-1000-$name.json"
    scrape "$name-after-offline-1000" "$name"
    gpu_memory "$model worker, after offline-1000"
  fi
  stop_worker
}

device=""
for part in "${parts[@]}"; do
  case $part in
  8b)
    step decode-8b-bf16 "$bin/onecard-bench-cuda" decode-8b-bf16 --batches 1 --results "$results"
    device=$(device_of_records)
    tune="--tuning-cache $work/tuning-llama3-8b.txt"
    serve_tables synthetic:llama3-8b 50161 8b-bf16
    step stability-8b bench stability --model synthetic:llama3-8b \
      --worker_bin "$bin/onecard-worker" --router_bin "$bin/onecard-router" \
      --worker_args "--backend cuda $gpu_args $tune" --users 64 --requests 1000 --warmup 64 \
      --json "$OUT/stability-8b.json"
    ;;
  72b)
    [[ -n $device ]] || { step ceilings "$bin/onecard-bench-cuda" ceilings --results "$results";
                          device=$(device_of_records); }
    limit=300 step serve-load-72b bench serve-load --model synthetic:qwen2-72b:int4 \
      --worker_bin "$bin/onecard-worker" --router_bin "$bin/onecard-router" \
      --worker_args "--backend cuda --gpu-memory-budget ${BUDGET_72B:-48GiB} --max-context 4096 $gpu_args ${PREFILL_CAP:+--long-prefill-token-threshold $PREFILL_CAP} --tuning-cache $work/tuning-qwen2-72b.txt" \
      --users 150 --requests 300 --warmup 16 --router_max_in_flight 32 \
      --priority_mix "short=0.9:64/32@interactive,long=0.1:2048/32@batch" \
      --priority_requests 200 --target_load 0.8 --json "$OUT/serve-load-72b.json"
    ;;
  70b-mix)
    [[ -n $device ]] || { step ceilings "$bin/onecard-bench-cuda" ceilings --results "$results";
                          device=$(device_of_records); }
    tune="--tuning-cache $work/tuning-llama3-70b.txt"
    serve_tables synthetic:llama3-70b:int4 50163 70b-int4
    ;;
  8b-offline | 70b-offline | 8b-ahead | 70b-ahead)
    [[ -n $device ]] || { step ceilings "$bin/onecard-bench-cuda" ceilings --results "$results";
                          device=$(device_of_records); }
    case $part in
      8b-offline) tune="--tuning-cache $work/tuning-llama3-8b.txt"
                  serve_tables synthetic:llama3-8b 50164 8b-bf16 offline ;;
      70b-offline) tune="--tuning-cache $work/tuning-llama3-70b.txt"
                   serve_tables synthetic:llama3-70b:int4 50165 70b-int4 offline ;;
      8b-ahead) tune="--tuning-cache $work/tuning-llama3-8b.txt"
                step decode-8b-bf16 "$bin/onecard-bench-cuda" decode-8b-bf16 --batches 1,128 \
                  --results "$results"
                serve_tables synthetic:llama3-8b 50166 8b-bf16-ahead ahead ;;
      70b-ahead) tune="--tuning-cache $work/tuning-llama3-70b.txt"
                 step decode-70b-int4 "$bin/onecard-bench-cuda" decode-70b-int4 --batches 1 \
                   --results "$results"
                 serve_tables synthetic:llama3-70b:int4 50167 70b-int4-ahead ahead ;;
    esac
    ;;
  8b-fp8)
    [[ -n $device ]] || { step ceilings "$bin/onecard-bench-cuda" ceilings --results "$results";
                          device=$(device_of_records); }
    tune="--tuning-cache $work/tuning-llama3-8b-fp8.txt"
    serve_tables synthetic:llama3-8b:fp8 50169 8b-fp8
    ;;
  8b-fp8-offline | 70b-fp8-mix | 70b-fp8-offline | 70b-fp8-ahead)
    [[ -n $device ]] || { step ceilings "$bin/onecard-bench-cuda" ceilings --results "$results";
                          device=$(device_of_records); }
    size=${part%%-*} mode=${part##*-}
    tune="--tuning-cache $work/tuning-llama3-$size-fp8.txt"
    name=$size-fp8
    [[ $mode == ahead ]] && name=$size-fp8-ahead
    case $part in 8b-fp8-offline) port=50172 ;; 70b-fp8-mix) port=50173 ;;
                  70b-fp8-offline) port=50174 ;; *) port=50175 ;; esac
    serve_tables "synthetic:llama3-$size:fp8" $port "$name" "$mode"
    ;;
  8b-fp8-ahead)
    tune="--tuning-cache $work/tuning-llama3-8b-fp8.txt"
    step decode-8b-fp8 "$bin/onecard-bench-cuda" decode-8b-fp8 --batches 1,128 \
      --results "$results"
    device=$(device_of_records)
    serve_tables synthetic:llama3-8b:fp8 50171 8b-fp8-ahead ahead
    ;;
  ttft-70b)
    # One stream on synthetic:llama3-70b:int4, without and with look-ahead: 128/1 (the
    # prefill alone) and 128/32, five each after one warm-up.
    [[ -n $device ]] || { step ceilings "$bin/onecard-bench-cuda" ceilings --results "$results";
                          device=$(device_of_records); }
    tune="--tuning-cache $work/tuning-llama3-70b.txt"
    for arm in "" ahead; do
      name=70b-int4${arm:+-$arm}
      # shellcheck disable=SC2086
      start_worker synthetic:llama3-70b:int4 50168 "worker-ttft-$name" $gpu_args $tune \
        ${arm:+--async-scheduling true} || continue
      for shape in 128/1 128/32; do
        step "ttft $shape ($name)" bench serve --target 127.0.0.1:50168 \
          --mix "ttft-${shape/\//-}=1:$shape" --users 1 --requests 5 --warmup 1 \
          --case_prefix "$name-" --json "$OUT/ttft-${shape/\//-}-$name.json"
      done
      stop_worker
    done
    ;;
  70b)
    step decode-70b-int4 "$bin/onecard-bench-cuda" decode-70b-int4 --batches 1 --results "$results"
    device=$(device_of_records)
    tune="--tuning-cache $work/tuning-llama3-70b.txt"
    # shellcheck disable=SC2086
    if start_worker synthetic:llama3-70b:int4 50162 worker-70b $gpu_args $tune; then
      step single-stream-70b bench serve --target 127.0.0.1:50162 \
        --mix "single-stream-70b=1:128/256" --users 1 --requests 5 --warmup 1 \
        --json "$OUT/single-stream-70b.json"
      stop_worker
    fi
    step stability-70b bench stability --model synthetic:llama3-70b:int4 \
      --worker_bin "$bin/onecard-worker" --router_bin "$bin/onecard-router" \
      --worker_args "--backend cuda $gpu_args $tune" --mix "chat=1:128/32" --users 32 \
      --requests 1000 --warmup 32 --json "$OUT/stability-70b.json"
    ;;
  *)
    say "unknown part $part (8b, 72b, 70b, 70b-mix, 8b-offline, 70b-offline, 8b-ahead, 70b-ahead, 8b-fp8, 8b-fp8-offline, 70b-fp8-mix, 70b-fp8-offline, 70b-fp8-ahead, 8b-fp8-ahead, ttft-70b)"
    status=1
    ;;
  esac
done
cp "$work"/tuning-*.txt "$OUT/" 2>/dev/null
exit $status
