#!/usr/bin/env bash
# Installs the official OpenAI Python client (PyPI `openai`, pinned) and what
# it needs into .deps/python, for the HTTP API's tests
# (tests/integration/router_http_test.cc runs python3 with
# PYTHONPATH=.deps/python). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=1.109.1
TARGET=.deps/python
if PYTHONPATH=$TARGET python3 -c "import openai, sys; sys.exit(openai.__version__ != '$VERSION')" \
    2>/dev/null; then
  echo "install-openai: openai $VERSION present"
  exit 0
fi
rm -rf "$TARGET"
mkdir -p "$TARGET"
python3 -m pip install --quiet --disable-pip-version-check --no-warn-conflicts \
  --target "$TARGET" "openai==$VERSION"
echo "install-openai: openai $VERSION installed in $TARGET"
