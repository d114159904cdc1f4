#!/usr/bin/env bash
# Installs matplotlib and Pillow (PyPI, pinned: the PNGs' bytes depend on both) and what they
# need into .deps/plot, for bench/plot_results.py's figures, run by hand (it finds .deps/plot
# itself; bench/README.md). Not run by scripts/setup.sh: CI tests the script's page, which
# needs neither (tests/bench/plot_results_test.py). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
MATPLOTLIB=3.11.2
PILLOW=13.0.0
TARGET=.deps/plot
if PYTHONPATH=$TARGET python3 -c "import sys, matplotlib, PIL
sys.exit((matplotlib.__version__, PIL.__version__) != ('$MATPLOTLIB', '$PILLOW'))" 2>/dev/null; then
  echo "install-matplotlib: matplotlib $MATPLOTLIB and Pillow $PILLOW present"
  exit 0
fi
rm -rf "$TARGET"
mkdir -p "$TARGET"
python3 -m pip install --quiet --disable-pip-version-check --no-warn-conflicts \
  --target "$TARGET" "matplotlib==$MATPLOTLIB" "pillow==$PILLOW"
echo "install-matplotlib: matplotlib $MATPLOTLIB and Pillow $PILLOW installed in $TARGET"
