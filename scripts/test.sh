#!/usr/bin/env bash
# The README's test command: installs what is missing, fetches the model,
# builds, and runs every ctest test except those labelled gpu.
#
# The tests run on a CPU-only build (build/). When nvcc is present the CUDA
# backend, kernels and gpu tests are also compiled (build-cuda-check/), so CUDA
# code is checked by the compiler even though nothing here can run it. (Known
# issue: a process that loads cuBLAS cannot start prometheus-cpp's /metrics
# server, so the services under test are linked without the CUDA backend.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/fetch-model.sh
bash scripts/build.sh -DONECARD_CUDA=OFF
if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  cmake -S . -B build-cuda-check -G Ninja -DONECARD_CUDA=ON >/dev/null
  cmake --build build-cuda-check -j "${ONECARD_JOBS:-$(nproc)}" --target \
    onecard_kernels_cuda onecard_cuda_backend onecard_engine gpu_kernels_test \
    gpu_cuda_model_runner_test onecard-bench-cuda
fi
cd "${BUILD_DIR:-build}"
ctest -LE gpu --output-on-failure -j "${ONECARD_TEST_JOBS:-2}" "$@"
