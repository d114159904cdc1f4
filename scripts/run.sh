#!/usr/bin/env bash
# The README's main command: the whole onecard cluster on this machine.
#   scripts/run.sh [--once] [--prompt TEXT] [--max-tokens N] [--prometheus]
# Installs what is missing (scripts/setup.sh), fetches SmolLM2
# (scripts/fetch-model.sh), builds the services, then starts on 127.0.0.1
# (ports picked by the kernel) the metrics service (control plane), one
# worker (CUDA backend when a GPU is present, CPU otherwise) and a router,
# waits until all three answer SERVING on grpc.health.v1 and the router has
# the worker in its table, streams one chat answer through the router's gRPC
# API, asks the same through its OpenAI-compatible HTTP API (curl; on
# 127.0.0.1:8000, or ONECARD_HTTP_PORT; 0: any free port), and prints the
# endpoints. Then it keeps serving until Ctrl-C; --once stops
# after the answer. --prometheus also runs Prometheus (deploy/prometheus)
# scraping the three. Logs, the cluster config and the services' role tokens
# (service_auth) go to a temp directory.
# Tested by tests/integration/ops_run_script_test.cc (--once).
set -euo pipefail
cd "$(dirname "$0")/.."

ONCE=0
PROMETHEUS=0
PROMPT="What is the capital of France? Answer in one sentence."
MAX_TOKENS=48
while (($#)); do
  case "$1" in
    --once) ONCE=1 ;;
    --prometheus) PROMETHEUS=1 ;;
    --prompt) PROMPT=$2; shift ;;
    --max-tokens) MAX_TOKENS=$2; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

BUILD_DIR=${BUILD_DIR:-build}
API_KEY=${ONECARD_API_KEY:-local-dev-key}
HTTP_PORT=${ONECARD_HTTP_PORT:-8000}
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
TARGETS=(onecard-metrics onecard-worker onecard-router onecard onecard-health-probe)

# --- set up and build (ONECARD_SKIP_BUILD=1: use what BUILD_DIR holds) ----
if [[ ${ONECARD_SKIP_BUILD:-0} != 1 ]]; then
  bash scripts/setup.sh
  bash scripts/fetch-model.sh
  # The CUDA backend is built wherever nvcc is (ONECARD_CUDA=AUTO); the
  # worker uses it when a GPU is present.
  cmake -S . -B "$BUILD_DIR" -G Ninja -DONECARD_CUDA="${ONECARD_CUDA:-AUTO}" >/dev/null
  cmake --build "$BUILD_DIR" -j "${ONECARD_JOBS:-$(nproc)}" --target "${TARGETS[@]}"
fi
bin() { find "$BUILD_DIR" -type f -name "$1" -perm -u+x -print -quit; }
METRICS_BIN=$(bin onecard-metrics)
WORKER_BIN=$(bin onecard-worker)
ROUTER_BIN=$(bin onecard-router)
CLI_BIN=$(bin onecard)
PROBE_BIN=$(bin onecard-health-probe)
for b in METRICS_BIN WORKER_BIN ROUTER_BIN CLI_BIN PROBE_BIN; do
  [[ -n ${!b} ]] || { echo "run.sh: no ${b%_BIN} binary under $BUILD_DIR" >&2; exit 1; }
done

BACKEND=cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  BACKEND=cuda
fi

RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/onecard-run.XXXXXX")
PIDS=()
declare -A PID_OF
stop_all() {
  trap - INT TERM EXIT
  local pid
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    pid=${PIDS[i]}
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}
trap 'stop_all; exit 130' INT TERM
trap stop_all EXIT

# --- the cluster config (deploy/local/cluster.yaml, filled in) -------------
KEY_SHA256=$(printf '%s' "$API_KEY" | sha256sum | cut -d' ' -f1)
# One fresh token per service role, readable by this user only.
(umask 077 && for role in worker router; do
  od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > "$RUN_DIR/$role.token"
done)
sed -e "s|@MODEL_PATH@|$PWD/$MODEL|g" -e "s|@BACKEND@|$BACKEND|g" \
  -e "s|@API_KEY_SHA256@|$KEY_SHA256|g" -e "s|@RUN_DIR@|$RUN_DIR|g" \
  -e "s|@HTTP_LISTEN@|127.0.0.1:$HTTP_PORT|g" \
  deploy/local/cluster.yaml > "$RUN_DIR/cluster.yaml"

# start NAME BINARY ARGS...: runs it in the background, stdout and stderr in
# RUN_DIR/NAME.out and NAME.log.
start() {
  local name=$1
  shift
  "$@" >"$RUN_DIR/$name.out" 2>"$RUN_DIR/$name.log" &
  PIDS+=($!)
  PID_OF[$name]=$!
}
# address NAME KIND: waits for "LISTENING KIND ADDR" from NAME; prints ADDR.
address() {
  local name=$1 kind=$2 line
  for _ in $(seq 1 3000); do
    line=$(grep -m1 "^LISTENING $kind " "$RUN_DIR/$name.out" 2>/dev/null || true)
    if [[ -n $line ]]; then echo "${line##* }"; return 0; fi
    if ! kill -0 "${PID_OF[$name]}" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "run.sh: $name did not start; its log ($RUN_DIR/$name.log):" >&2
  tail -20 "$RUN_DIR/$name.log" >&2
  return 1
}
healthy() {
  "$PROBE_BIN" --target="$2" --wait="${3:-60s}" ||
    { echo "run.sh: $1 is not healthy; log: $RUN_DIR/$1.log" >&2; tail -20 "$RUN_DIR/$1.log" >&2; return 1; }
}

echo "run.sh: starting the local cluster ($BACKEND backend; logs in $RUN_DIR)"
start metrics "$METRICS_BIN" --config="$RUN_DIR/cluster.yaml"
METRICS_GRPC=$(address metrics grpc)
METRICS_HTTP=$(address metrics metrics)
start worker "$WORKER_BIN" --config="$RUN_DIR/cluster.yaml" --control_plane="$METRICS_GRPC"
WORKER_GRPC=$(address worker grpc)
WORKER_HTTP=$(address worker metrics)
start router "$ROUTER_BIN" --config="$RUN_DIR/cluster.yaml" --control_plane="$METRICS_GRPC"
ROUTER_GRPC=$(address router grpc)
ROUTER_OPENAI=$(address router http)
ROUTER_HTTP=$(address router metrics)

healthy metrics "$METRICS_GRPC"
healthy worker "$WORKER_GRPC" 600s   # loads the model first
healthy router "$ROUTER_GRPC" 120s
# The router learns the worker from the metrics service's watch.
for _ in $(seq 1 600); do
  if curl -fsS "http://$ROUTER_HTTP/metrics" 2>/dev/null |
      grep -q '^onecard_router_workers{state="healthy"} [1-9]'; then
    break
  fi
  sleep 0.1
done

if ((PROMETHEUS)); then
  mkdir -p "$RUN_DIR/prometheus/targets"
  cp -r deploy/prometheus/rules "$RUN_DIR/prometheus/"
  sed -e 's/scrape_interval: 15s/scrape_interval: 2s/' -e 's/scrape_timeout: 10s/scrape_timeout: 2s/' \
    -e 's/evaluation_interval: 15s/evaluation_interval: 2s/' \
    deploy/prometheus/prometheus.yml > "$RUN_DIR/prometheus/prometheus.yml"
  for c in router:$ROUTER_HTTP worker:$WORKER_HTTP metrics:$METRICS_HTTP; do
    printf '[{"targets": ["%s"], "labels": {"namespace": "local", "pod": "%s-0", "service": "onecard-%s"}}]\n' \
      "${c#*:}" "${c%%:*}" "${c%%:*}" > "$RUN_DIR/prometheus/targets/${c%%:*}.json"
  done
  echo '[]' > "$RUN_DIR/prometheus/targets/kube-state-metrics.json"
  start prometheus prometheus --config.file="$RUN_DIR/prometheus/prometheus.yml" \
    --storage.tsdb.path="$RUN_DIR/prometheus/data" --web.listen-address=127.0.0.1:9090
fi

echo "run.sh: streaming a chat answer through the router"
echo "> $PROMPT"
"$CLI_BIN" chat --target="$ROUTER_GRPC" --api_key="$API_KEY" --prompt="$PROMPT" \
  --max_tokens="$MAX_TOKENS" --temperature=0 </dev/null
echo
echo "run.sh: the same through the OpenAI-compatible HTTP API (curl)"
python3 -c 'import json, sys; print(json.dumps({"messages": [{"role": "user", "content": sys.argv[1]}],
  "max_tokens": int(sys.argv[2]), "temperature": 0}))' "$PROMPT" "$MAX_TOKENS" |
  curl -fsS "http://$ROUTER_OPENAI/v1/chat/completions" -H "Authorization: Bearer $API_KEY" \
    -H "Content-Type: application/json" --data-binary @- |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["choices"][0]["message"]["content"])'

cat <<EOF
onecard is serving on 127.0.0.1 ($BACKEND backend):
  router  (onecard.v1.Generation) grpc $ROUTER_GRPC   /metrics http://$ROUTER_HTTP/metrics
          (OpenAI-compatible API)  http://$ROUTER_OPENAI/v1  (/models, /completions, /chat/completions)
  worker                          grpc $WORKER_GRPC   /metrics http://$WORKER_HTTP/metrics
  metrics service (control plane) grpc $METRICS_GRPC   /metrics http://$METRICS_HTTP/metrics
  API key: $API_KEY (tenant "local")
  try: $CLI_BIN chat --target=$ROUTER_GRPC --api_key=$API_KEY --prompt="Hello"
       curl http://$ROUTER_OPENAI/v1/chat/completions -H "Authorization: Bearer $API_KEY" \\
         -d '{"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 32}'
  logs and config: $RUN_DIR
EOF
if ((PROMETHEUS)); then echo "  Prometheus: http://127.0.0.1:9090"; fi

if ((ONCE)); then
  exit 0
fi
echo "run.sh: serving until Ctrl-C"
wait
