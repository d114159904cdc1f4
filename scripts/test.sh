#!/usr/bin/env bash
# The README's test command: installs what is missing, fetches the model,
# builds, and runs every ctest test except those labelled gpu.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/fetch-model.sh
bash scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest -LE gpu --output-on-failure -j "${ONECARD_TEST_JOBS:-2}" "$@"
