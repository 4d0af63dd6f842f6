#!/usr/bin/env bash
# The evaluation harness's cost per turn and the concurrency it sustains, against a fast agent,
# beside the same agent called directly with the A2A client in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --release --locked -q -p agentry-eval --example overhead
