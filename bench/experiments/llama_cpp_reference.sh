#!/usr/bin/env bash
# llama.cpp's CPU decode rate on this machine: the reference that onecard's
# CPU backend is held to ("cpu-decode >= 1.0x llama.cpp's decode rate with the
# same threads"). This is a reference measurement, not part of onecard: it
# builds and runs upstream llama.cpp, and nothing of onecard links to it or
# runs it (not in the tests, not in CI).
#
# What it does, idempotently, under DIR (default /tmp/llamacpp):
#   1. pip-downloads the sdist of llama-cpp-python (default 0.3.36, checked
#      against its sha256), which vendors llama.cpp under vendor/llama.cpp
#      (0.3.36 vendors ggml-org/llama.cpp@0c1e57098bba43ac29e6e3b677cdceebdd22334f),
#      and unpacks it;
#   2. builds llama.cpp's llama-bench out of tree (CMake, Release, CPU only,
#      -DGGML_NATIVE=ON, static, no server/tests/examples, no OpenSSL) under
#      `nice -n 19` with JOBS (default 1) parallel jobs;
#   3. unless --build-only, runs llama-bench on the models (default: this
#      repo's models/SmolLM2-135M-Instruct.Q4_1.gguf and
#      models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf) with each thread count
#      (default 2,1) and REPS repetitions (default 5), printing llama-bench's
#      own tables (Markdown, or JSON with --output json) on stdout.
#
# The tests, batch 1 throughout (llama-bench decodes one sequence):
#   tg64          64 generated tokens on an empty context: the decode rate.
#   tg64 @ d128   64 generated tokens after a 128-token context is filled (the
#                 fill is not timed): the decode rate that mirrors onecard's
#                 bench (128-token prompt, then 64 generated tokens).
#   pp128+tg64    (-pg 128,64; skipped with --no-pg) prompt of 128 then 64
#                 generated tokens, timed together: (128+64)/total seconds, so
#                 it is not a decode rate; it is printed for comparison with an
#                 end-to-end figure.
# Compare onecard's decode tokens/s against the t/s column of tg64 @ d128 (and
# tg64) at the same thread count. The figure means something only on an
# otherwise idle machine: the load average is printed on stderr first.
#
#   bench/experiments/llama_cpp_reference.sh [options] [MODEL.gguf ...]
#     --dir DIR        work directory (env LLAMACPP_DIR; default /tmp/llamacpp)
#     --build-only     download and build, then stop
#     -t, --threads L  thread counts, comma separated (env THREADS; default 2,1)
#     -r, --reps N     repetitions of each test (env REPS; default 5)
#     -o, --output F   md or json (env OUTPUT; default md); json prints one
#                      JSON array for each llama-bench run (two, or one with
#                      --no-pg)
#     --no-pg          skip the -pg 128,64 run
# Other environment: LLAMA_CPP_PYTHON_VERSION (default 0.3.36),
# LLAMA_CPP_PYTHON_SHA256 (the sdist's sha256; checked when set, set by default
# for 0.3.36), JOBS (build jobs, default 1), PYTHON (default python3).
# Needs: python3 with pip, cmake >= 3.14, a C/C++ compiler with OpenMP (gcc).
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/../.." && pwd)

dir=${LLAMACPP_DIR:-/tmp/llamacpp}
threads=${THREADS:-2,1}
reps=${REPS:-5}
output=${OUTPUT:-md}
jobs=${JOBS:-1}
python=${PYTHON:-python3}
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
if [[ -z ${LLAMA_CPP_PYTHON_SHA256+x} && $version == 0.3.36 ]]; then
  sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
else
  sha256=${LLAMA_CPP_PYTHON_SHA256:-}
fi
build_only=0
pg=1
models=()

usage() {
  sed -n '/^#   bench\/experiments/,/^# Needs:/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

die() {
  echo "llama_cpp_reference: $*" >&2
  exit 1
}

while (($#)); do
  case "$1" in
    --dir) [[ $# -ge 2 ]] || die "--dir needs a value"; dir=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -t | --threads) [[ $# -ge 2 ]] || die "$1 needs a value"; threads=$2; shift 2 ;;
    -r | --reps) [[ $# -ge 2 ]] || die "$1 needs a value"; reps=$2; shift 2 ;;
    -o | --output) [[ $# -ge 2 ]] || die "$1 needs a value"; output=$2; shift 2 ;;
    --no-pg) pg=0; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; models+=("$@"); break ;;
    -*) usage >&2; die "unknown option: $1" ;;
    *) models+=("$1"); shift ;;
  esac
done

[[ $output == md || $output == json ]] || die "--output must be md or json, not '$output'"
[[ $reps =~ ^[1-9][0-9]*$ ]] || die "--reps must be a positive integer, not '$reps'"
[[ $threads =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--threads must be like 2,1, not '$threads'"
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "JOBS must be a positive integer, not '$jobs'"
if ((${#models[@]} == 0)); then
  models=("$repo_root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    "$repo_root/models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf")
fi

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
sdist="$dir/dl/llama_cpp_python-$version.tar.gz"
src_root="$dir/llama_cpp_python-$version"
src="$src_root/vendor/llama.cpp"
build="$dir/build-$version"
bench="$build/bin/llama-bench"

# 1. The source: llama-cpp-python's sdist from PyPI, unpacked once.
if [[ ! -f $sdist ]]; then
  command -v "$python" >/dev/null || die "$python not found"
  echo "# downloading llama-cpp-python==$version (sdist) from PyPI" >&2
  mkdir -p "$dir/dl"
  "$python" -m pip download --quiet --no-deps --no-binary :all: \
    -d "$dir/dl" "llama-cpp-python==$version" >&2
  [[ -f $sdist ]] || die "pip did not leave $sdist"
fi
if [[ -n $sha256 ]]; then
  echo "$sha256  $sdist" | sha256sum --check --quiet - ||
    die "$sdist does not have sha256 $sha256"
fi
if [[ ! -f $src_root/.unpacked ]]; then
  echo "# unpacking $sdist" >&2
  rm -rf "$src_root"
  tar -xzf "$sdist" -C "$dir" --no-same-owner
  [[ -f $src/CMakeLists.txt ]] || die "$sdist has no vendor/llama.cpp"
  touch "$src_root/.unpacked"
fi

# 2. llama-bench, out of tree, at the lowest priority (the machine is shared).
command -v cmake >/dev/null || die "cmake not found (apt-get install cmake)"
if [[ ! -f $build/CMakeCache.txt ]]; then
  echo "# configuring $build" >&2
  nice -n 19 cmake -S "$src" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON \
    -DGGML_CUDA=OFF \
    -DGGML_OPENMP=ON \
    -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF >&2
fi
nice -n 19 cmake --build "$build" --target llama-bench -j "$jobs" >&2
[[ -x $bench ]] || die "no $bench after the build"
echo "# llama-bench: $bench" >&2
"$bench" --version >&2 || true

if ((build_only)); then
  exit 0
fi

# 3. The measurement.
margs=()
for m in "${models[@]}"; do
  [[ -f $m ]] || die "no model file $m"
  margs+=(-m "$m")
done
{
  echo "# host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "# load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# threads $threads, $reps repetitions"
} >&2

"$bench" "${margs[@]}" -t "$threads" -r "$reps" -o "$output" -p 0 -n 64 -d 0,128
if ((pg)); then
  "$bench" "${margs[@]}" -t "$threads" -r "$reps" -o "$output" -p 0 -n 0 -pg 128,64
fi
