#!/usr/bin/env bash
# On the GPU machine: the worker on the CUDA backend, end to end, from the
# binaries `scripts/device/pack.sh services` put in .device/ and SmolLM2 under
# models/ (docs/cuda.md: carry .device/lib, the model halves, then .device/bin
# and run this with DEVICE_LIB). Logs under $OUT:
#   worker.log      onecard-worker --backend cuda (plan, load, drain)
#   generate.json   `onecard generate --target` against it (greedy, 32 tokens)
#   local_cpu.json  the same request on an in-process CPU engine
#   local_cuda.json the same request on an in-process CUDA engine
#   metrics.txt     /metrics of the CUDA worker after the request
#   summary.txt     what was checked, and the worker's exit status after SIGTERM
# Exit status: non-zero when a step failed.
set -uo pipefail
OUT=${OUT:-/tmp/onecard-out}
mkdir -p "$OUT"
bin=.device/bin
cuda_libs=/usr/local/cuda/lib64
# The services' libraries (gRPC, protobuf, ICU, ...) with the binaries are more
# than one call may carry: $DEVICE_LIB names where an earlier call left them.
export LD_LIBRARY_PATH="${DEVICE_LIB:-$PWD/.device/lib}:$cuda_libs:${LD_LIBRARY_PATH:-}"
model=models/SmolLM2-135M-Instruct.Q4_1.gguf
prompt="The capital of France is"
status=0
say() { echo "$*" >>"$OUT/summary.txt"; }  # printed once, at the end

"$bin/onecard-worker" --model "$model" --backend cuda --listen 127.0.0.1:50151 \
  --metrics-listen 127.0.0.1:9451 --max-context 4096 >"$OUT/worker.log" 2>&1 &
pid=$!
for _ in $(seq 1 240); do
  grep -q "loaded" "$OUT/worker.log" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.5
done
grep -q "loaded" "$OUT/worker.log" || { say "FAILED: the worker did not load"; status=1; }

common=(--prompt "$prompt" --max-tokens 32 --temperature 0 --json)
"$bin/onecard" generate --target 127.0.0.1:50151 "${common[@]}" >"$OUT/generate.json" 2>&1 ||
  { say "FAILED: generate --target"; status=1; }
python3 - "$OUT" <<'PY' || status=1
import json, sys, urllib.request
out = sys.argv[1]
body = urllib.request.urlopen("http://127.0.0.1:9451/metrics", timeout=10).read().decode()
open(f"{out}/metrics.txt", "w").write(body)
names = [l.split("{")[0].split(" ")[0] for l in body.splitlines() if l and not l.startswith("#")]
wanted = ["onecard_worker_kv_cache_blocks_total", "onecard_worker_requests_total",
          "onecard_worker_generation_tokens_total"]
missing = [w for w in wanted if not any(n.startswith(w) for n in names)]
with open(f"{out}/summary.txt", "a") as f:
    f.write(f"/metrics served by the CUDA worker: {len(body)} bytes, "
            f"{len(set(names))} series names, missing {missing or 'none'}\n")
sys.exit(1 if missing else 0)
PY
kill -TERM "$pid"
wait "$pid"
say "worker exit status after SIGTERM: $?"

"$bin/onecard" generate --model "$model" --backend cpu "${common[@]}" >"$OUT/local_cpu.json" 2>&1 ||
  { say "FAILED: local cpu generate"; status=1; }
"$bin/onecard" generate --model "$model" --backend cuda --max-context 4096 "${common[@]}" \
  >"$OUT/local_cuda.json" 2>&1 || { say "FAILED: local cuda generate"; status=1; }
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
def text(name):
    try:
        return json.loads(open(f"{out}/{name}").read().splitlines()[-1]).get("text")
    except Exception as e:
        return f"<unreadable: {e}>"
a, b, c = text("generate.json"), text("local_cuda.json"), text("local_cpu.json")
with open(f"{out}/summary.txt", "a") as f:
    f.write(f"worker (cuda): {a!r}\nlocal cuda:    {b!r}\nlocal cpu:     {c!r}\n")
    f.write(f"worker == local cuda: {a == b}; cuda == cpu: {b == c}\n")
PY
cat "$OUT/summary.txt"
exit $status
