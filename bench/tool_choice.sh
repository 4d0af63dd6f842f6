#!/usr/bin/env bash
# Tool choice of the embedded router (and, with MODES, the routed model) on every suite: the
# project's own four (crates/agentry-local/tests/data/tool_choice*.json) and four built from
# the Berkeley Function Calling Leaderboard's data (PyPI bfcl-eval, scripts/bfcl-suites.py),
# which nobody here wrote or tuned for.
#   bash bench/tool_choice.sh                  (router only: ~2 minutes on 2 cores)
#   MODES=router,reader bash bench/tool_choice.sh   (and with the chat model reading the close
#                                                    tools, as the routed mode does: ~30 min)
#   MODES=router,routed bash bench/tool_choice.sh   (the model too: hours; BFCL's live prompts are
#                                                    long, ~8 s a request on 2 cores)
#   VERBOSE=1 ...                              (every miss)
#   MODES=dump bash bench/tool_choice.sh       (the router's inputs to $OUT/router-lab, ~25 min, for
#                                               bench/local/router_lab.py: variants in seconds)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-models.sh >/dev/null
OUT=${BENCH_OUT:-bench/results}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
python3 scripts/bfcl-suites.py "$OUT" >/dev/null
cargo build -q --release -p agentry-local --example tool_choice
BIN=$PWD/${CARGO_TARGET_DIR:-target}/release/examples/tool_choice
cd crates/agentry-local
export TOOL_CHOICE_DUMP=${TOOL_CHOICE_DUMP:-$OUT/router-lab}
"$BIN" "${MODES:-router}" tests/data/tool_choice.json tests/data/tool_choice_mcp.json \
  tests/data/tool_choice_retail.json tests/data/tool_choice_heldout.json \
  "$OUT/bfcl_multiple.json" "$OUT/bfcl_live_multiple.json" \
  "$OUT/bfcl_live_multiple_wide.json" "$OUT/bfcl_multi_turn.json"
