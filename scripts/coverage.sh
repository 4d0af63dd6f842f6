#!/usr/bin/env bash
# Line coverage of the workspace: the whole test suite (as the test command runs it, with
# its peers) under cargo-llvm-cov. The rustup llvm-tools component is not needed: Debian's
# llvm-22 matches rustc 1.95's LLVM 22. Not part of .ci/run (an instrumented build of
# everything is another ~30 minutes); run it by hand, after `bash scripts/test.sh` has
# installed the peers:
#   bash scripts/coverage.sh            # summary per file, total last
# The figures go to docs/COVERAGE.md by hand (with what the uncovered paths are).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v llvm-cov-22 >/dev/null || ! command -v llvm-profdata-22 >/dev/null; then
  echo "==> installing llvm-22 (Debian) for llvm-cov and llvm-profdata"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends llvm-22 >/dev/null
fi
if ! cargo llvm-cov --version >/dev/null 2>&1; then
  echo "==> installing cargo-llvm-cov 0.9.1 (crates.io)"
  cargo install cargo-llvm-cov --version 0.9.1 --locked --quiet
fi
export LLVM_COV="$(command -v llvm-cov-22)" LLVM_PROFDATA="$(command -v llvm-profdata-22)"
export CARGO_TARGET_DIR=${AGENTRY_COV_TARGET:-$HOME/.cache/agentry-cov}
# The test command's peers and settings (scripts/test.sh installs them).
export AGENTRY_INTEROP_PYTHON="$PWD/.venv-interop/bin/python"
export AGENTRY_INTEROP1_PYTHON="$PWD/.venv-a2a1/bin/python"
export AGENTRY_PPTX_PYTHON="$PWD/.venv-pptx/bin/python"
export AGENTRY_REQUIRE_POSTGRES=${AGENTRY_REQUIRE_POSTGRES:-0}
export CANDLE_NUM_THREADS=${CANDLE_NUM_THREADS:-1}
mkdir -p .agentry
export AGENTRY_SKIP_LOG="$PWD/.agentry/coverage-skipped.txt"
rm -f "$AGENTRY_SKIP_LOG"
# Test code, the test kit and the fuzz targets are not what is measured.
cargo llvm-cov --workspace --locked --summary-only --ignore-run-fail \
  --ignore-filename-regex '(/tests/|agentry-testkit/|/fuzz/|/examples/)' 2>&1 \
  | tee .agentry/coverage.txt | grep -vE '^\s+(Running|Compiling|Finished)' | tail -60
