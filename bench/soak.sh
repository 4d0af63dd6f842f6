#!/usr/bin/env bash
# Soak: one agentry server under a mixed load (send, stream, cancel, resubscribe, push) for
# MINUTES (default 30) with WORKERS (default 32); memory and latency every 10 s as CSV and an
# SVG chart in OUT (default bench/out). See crates/agentry/examples/soak.rs.
#   bash bench/soak.sh [MINUTES] [WORKERS] [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
T=${CARGO_TARGET_DIR:-target}
cargo build --release --locked -p agentry --no-default-features --features mimalloc --example serve_echo --example soak
"$T/release/examples/soak" "$T/release/examples/serve_echo" "${1:-30}" "${2:-32}" "${3:-bench/out}"
