#!/usr/bin/env bash
# The test command: installs the peers and data (scripts/peers.sh) and runs every test.
#   bash scripts/test.sh [extra cargo test args]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/peers.sh
VENV=.venv-interop
export AGENTRY_INTEROP_PYTHON="$PWD/$VENV/bin/python"
export AGENTRY_INTEROP1_PYTHON="$PWD/.venv-a2a1/bin/python"
export AGENTRY_PPTX_PYTHON="$PWD/.venv-pptx/bin/python"
# Each interop test writes its cell of the matrix here; it is printed after the tests.
mkdir -p .agentry
export AGENTRY_INTEROP_MATRIX="$PWD/.agentry/interop-matrix.tsv"
rm -f "$AGENTRY_INTEROP_MATRIX"
# Interop tests fail, instead of skipping, when a peer is missing.
export AGENTRY_REQUIRE_INTEROP=1
# Model tests fail, instead of skipping, when the model files are missing.
export AGENTRY_REQUIRE_MODELS=1
# Test binaries run in parallel on small machines: candle's kernels get one thread each (its
# spinning thread pool collapses when oversubscribed).
export CANDLE_NUM_THREADS=${CANDLE_NUM_THREADS:-1}

# Tests whose peer is missing (and not required) record why here; the count ends the run.
export AGENTRY_SKIP_LOG="$PWD/.agentry/skipped.txt"
rm -f "$AGENTRY_SKIP_LOG"

echo "==> cargo test"
status=0
cargo test --workspace --locked "$@" || status=$?
bash scripts/interop-matrix.sh "$AGENTRY_INTEROP_MATRIX"
# The official conformance kits, when ../shared/a2a-tck (or $AGENTRY_TCK_DIR) has them.
bash scripts/tck.sh || status=1

echo "==> skipped"
if [ -s "$AGENTRY_SKIP_LOG" ]; then
  echo "    $(wc -l <"$AGENTRY_SKIP_LOG") test(s) skipped a part, their peer missing:"
  sort "$AGENTRY_SKIP_LOG" | uniq -c | sed 's/^ */      /'
  # CI has every peer: a skip there is a missing install step.
  if [ "${AGENTRY_FAIL_ON_SKIP:-0}" = 1 ]; then
    echo "    AGENTRY_FAIL_ON_SKIP=1: failing"; status=1
  fi
else
  echo "    none: every test ran in full"
fi
exit $status
