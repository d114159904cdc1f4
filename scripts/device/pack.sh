#!/usr/bin/env bash
# Builds the CUDA test and bench binaries for sm_90a (Release, build-device/)
# and collects them with the non-system shared libraries they need into
# .device/ (git-ignored; under 64 MiB so it can be carried to the GPU machine):
#   .device/bin/   gpu_kernels_test gpu_cuda_model_runner_test
#                  cuda_memory_plan_test onecard-bench-cuda onecard (the CLI:
#                  `onecard perplexity --backend cuda` for the accuracy table)
#   .device/lib/   absl and any other library ldd finds outside the system set
#                  (CUDA's own libcublas/libcudart come from the GPU machine)
#   .device/COMMIT the commit the binaries were built from (+ "-dirty")
# Usage: scripts/device/pack.sh            (then the `run` call in docs/cuda.md)
#        scripts/device/pack.sh services   onecard-worker and onecard instead (for
#                                          scripts/device/worker-smoke.sh)
#        scripts/device/pack.sh cluster    onecard-worker, onecard-router, onecard-bench
#                                          and onecard-bench-cuda (scripts/device/cluster.sh)
#        PACK_TARGETS="gpu_kernels_test onecard-bench-cuda" scripts/device/pack.sh
#                                          those targets only (a smaller bundle: each
#                                          binary holds every kernel, ~27 MB)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build-device}
jobs=${ONECARD_JOBS:-2}
targets=(gpu_kernels_test gpu_cuda_model_runner_test cuda_memory_plan_test onecard-bench-cuda
         onecard)
if [[ ${1:-} == services ]]; then
  targets=(onecard-worker onecard)
fi
if [[ ${1:-} == cluster ]]; then
  targets=(onecard-worker onecard-router onecard-bench onecard-bench-cuda)
fi
if [[ -n ${PACK_TARGETS:-} ]]; then
  read -r -a targets <<<"$PACK_TARGETS"
fi

cmake -S "$root" -B "$build" -G Ninja -DONECARD_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

out="$root/.device"
rm -rf "${out:?}/bin" "${out:?}/lib" "$out/COMMIT" "$out/bundle.tgz" "$out/bundle.txz"  # not arms.sh's arms
mkdir -p "$out/bin" "$out/lib"
for t in "${targets[@]}"; do
  src=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
  [[ -n "$src" ]] || { echo "pack: $t was not built" >&2; exit 1; }
  cp "$src" "$out/bin/$t"
  strip --strip-unneeded "$out/bin/$t"
done

# Libraries to take: everything ldd resolves but the system's and CUDA's.
# shellcheck source=scripts/device/libs.sh
source "$root/scripts/device/libs.sh"
copy_device_libs "$out/lib" "$out"/bin/*

commit=$(git -C "$root" rev-parse --short HEAD)
if ! git -C "$root" diff --quiet HEAD -- engine tests/gpu tools/bench/cuda 2>/dev/null; then
  commit="$commit-dirty"
fi
echo "$commit" >"$out/COMMIT"

# The decode kernels' registers, spills, instruction counts and main loops
# (scripts/sass.py), kept in .device/kernels.tsv and compared with the last
# pack's: a kernel that grew or spills shows before a card is lent. Left out
# (with a line saying so) where sass.py cannot get cuobjdump from PyPI.
stats="$out/kernels.tsv"
[[ -f "$stats" ]] && mv "$stats" "$out/kernels.prev.tsv"
for src in engine/kernels/int4_gemm_gemv.cu engine/kernels/gemv_fp8.cu engine/kernels/gemv.cu \
           engine/kernels/paged_attention_decode.cu; do
  if ! python3 "$root/scripts/sass.py" --tsv --build-dir "$build" "$src" >>"$stats" 2>/dev/null; then
    echo "pack: scripts/sass.py $src failed; its kernels are not in $stats"
  fi
done
if [[ -f "$out/kernels.prev.tsv" && -s "$stats" ]]; then
  # Kernels in both packs whose registers, stack or local bytes changed, or
  # whose instruction count or main loop moved by 5 % or more.
  awk -F'\t' 'NR == FNR { prev[$1 FS $2] = $0; next }
    ($1 FS $2) in prev {
      split(prev[$1 FS $2], p, FS)
      if (p[3] != $3 || p[4] != $4 || p[5] != $5 || ($6 - p[6]) * 20 >= p[6] ||
          (p[6] - $6) * 20 >= p[6] || ($7 - p[7]) * 20 >= p[7] || (p[7] - $7) * 20 >= p[7])
        printf "pack: %s %s: registers %s -> %s, stack %s -> %s, local %s -> %s, instructions %s -> %s, main loop %s -> %s\n",
               $1, $2, p[3], $3, p[4], $4, p[5], $5, p[6], $6, p[7], $7
    }' "$out/kernels.prev.tsv" "$stats"
fi
size=$(du -sm "$out" | cut -f1)
echo "pack: .device/ holds $size MiB ($(find "$out/bin" -type f | wc -l) binaries, $(find "$out/lib" -type f | wc -l) libraries), commit $commit"
# The same as one xz'd tar (the binaries' kernels compress ~10x), what a call
# carries: run.sh and cluster.sh unpack it. The test binaries and the bench
# are 39 MiB as gzip, too much beside the tree (~25 MiB); xz takes them to
# ~20 MiB (~75 s here).
bundle_file=bundle.txz
rm -f "$out/bundle.txz"
tar -C "$out" -cf - bin lib COMMIT | xz -9 -T2 >"$out/bundle.txz"
bundle=$(du -sm "$out/$bundle_file" | cut -f1)
echo "pack: .device/$bundle_file: $bundle MiB (carry it alone: [\".device/$bundle_file\"])"
# Apparent sizes in bytes (du -m would round every small file up to a MiB).
tree=$(git -C "$root" ls-files -z | (cd "$root" && xargs -0 du -cb 2>/dev/null) | tail -1 | cut -f1)
tree=$(((tree + (1 << 20) - 1) >> 20))
if ((bundle + tree >= 63)); then
  echo "pack: the bundle ($bundle MiB) and the tracked tree ($tree MiB) pass a call's 64 MiB;" \
    "pack fewer targets (PACK_TARGETS)" >&2
fi
