#!/usr/bin/env bash
# Load test: one agentry server under 10,000 tasks sent at once, then 10,000 SSE streams open
# at once; errors, latency and the server's resident memory (see
# crates/agentry/examples/load.rs). Release build of the small server alone.
#   bash bench/load.sh [N]      (default 10000; needs `ulimit -n` above N + a few hundred, in each of the two processes)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000}
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((N + 512)) ]; then
  ulimit -n $((N + 512)) 2>/dev/null || {
    echo "open files limit $(ulimit -n) is below $((N + 512)): raise it (ulimit -n)" >&2
    exit 1
  }
fi
T=${CARGO_TARGET_DIR:-target}
cargo build --release --locked -p agentry --no-default-features --example serve_echo --example load
"$T/release/examples/load" "$T/release/examples/serve_echo" "$N"
