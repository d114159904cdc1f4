#!/usr/bin/env bash
# One call on the GPU machine for issue 19 (models larger than the card):
# what pack.sh bundled (PACK_TARGETS="gpu_cuda_model_runner_test
# cuda_memory_plan_test onecard-bench-cuda" at least), then
#   tests   the offload suites (CudaModelRunnerOffloadTest, PlacementPlanTest,
#           CudaKvSwapTest)
#           and the host's CPU facts (lscpu), in $OUT/tests.log, $OUT/machine.txt
#   bench   onecard-bench-cuda with the given arguments, records in
#           $OUT/results.jsonl, tables in $OUT/bench.log
#   host    the host kernels on the machine's CPU, from a bundle that also
#           holds host_linear_test, host_linear_amx_test and onecard-bench:
#           both tests (the AMX kernels where the CPU has AMX), then
#           onecard-bench host-linear on every core with each kernel set the CPU
#           runs from avx512bf16 on (records in $OUT/results.jsonl)
# Usage (a `run` call carrying [".device/bundle.txz"]):
#   bash scripts/device/offload-session.sh tests
#   bash scripts/device/offload-session.sh bench SECONDS ARGS... [-- SECONDS ARGS...]...
#   bash scripts/device/offload-session.sh both SECONDS ARGS... (tests, then bench)
#   bash scripts/device/offload-session.sh host
# e.g. both 300 --batches 1 offload-123b-32g -- 240 offload-70b-24g
# Exit status: non-zero when a test or a benchmark failed.
set -uo pipefail
OUT=${OUT:-/tmp/onecard-out}
mkdir -p "$OUT"
what=${1:-tests}
shift || true
dir=${TMPDIR:-/tmp}/onecard-device
rm -rf "$dir" && mkdir -p "$dir" && tar -C "$dir" -xJf .device/bundle.txz
export LD_LIBRARY_PATH=$dir/lib:/usr/local/cuda/lib64
ONECARD_COMMIT=$(cat "$dir/COMMIT")
export ONECARD_COMMIT
status=0

if [[ $what == tests || $what == both ]]; then
  { nvidia-smi --query-gpu=name,memory.total --format=csv; lscpu; free -g;
    cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag; } \
    >"$OUT/machine.txt" 2>&1
  "$dir/bin/cuda_memory_plan_test" --gtest_filter='PlacementPlanTest.*' >"$OUT/tests.log" 2>&1 ||
    status=1
  timeout 400 "$dir/bin/gpu_cuda_model_runner_test" --gtest_filter='*Offload*:*KvSwap*' >>"$OUT/tests.log" 2>&1 ||
    status=1
  grep -E "^\[  (PASSED|FAILED) |tests? ran" "$OUT/tests.log"
fi

if [[ $what == host ]]; then
  for t in host_linear_test host_linear_amx_test; do
    timeout 300 "$dir/bin/$t" --gtest_color=no >>"$OUT/tests.log" 2>&1 || status=1
    grep -E "^\[  (PASSED|FAILED) |tests? ran|SKIPPED" "$OUT/tests.log" | tail -3
  done
  grep -E '^\[  FAILED  \]' "$OUT/tests.log" | sort -u | head -20
  for isa in avx512bf16 amxbf16; do
    timeout 150 "$dir/bin/onecard-bench" host-linear --threads "$(nproc)" --cpu_isa "$isa" \
      --results "$OUT/results.jsonl" >>"$OUT/bench.log" 2>&1
    echo "host-linear $isa rc=$?"
  done
  grep -E "weight_read|fraction" "$OUT/bench.log" | cut -c1-100
fi

if [[ $what == bench || $what == both ]]; then
  while (($#)); do
    limit=$1
    shift
    args=()
    while (($#)) && [[ $1 != -- ]]; do
      args+=("$1")
      shift
    done
    shift || true
    timeout "$limit" "$dir/bin/onecard-bench-cuda" --results "$OUT/results.jsonl" "${args[@]}" \
      >>"$OUT/bench.log" 2>&1
    rc=$?
    echo "${args[*]} rc=$rc"
    ((rc == 0)) || status=1
  done
fi
exit $status
