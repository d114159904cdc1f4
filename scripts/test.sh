#!/usr/bin/env bash
# The README's test command: installs what is missing, fetches the model,
# builds, and runs every ctest test except those labelled gpu.
#
# Where nvcc is present (here and in CI) the build includes the CUDA backend,
# its kernels and the gpu tests (ONECARD_CUDA=AUTO), so CUDA code is compiled
# and linked into the services under test even though no GPU runs it here.
# ONECARD_CUDA=OFF skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/fetch-model.sh
bash scripts/build.sh -DONECARD_CUDA="${ONECARD_CUDA:-AUTO}"
cd "${BUILD_DIR:-build}"
ctest -LE gpu --output-on-failure -j "${ONECARD_TEST_JOBS:-2}" "$@"
