#!/usr/bin/env bash
# The embedded models against a reference stack on the same files, same run, 1 and 2 threads:
#   chat: agentry-local (candle, GGUF re-quantized to Q8_0) vs PyPI transformers (same GGUF,
#         dequantized to float32); embeddings: agentry-local (candle) vs sentence-transformers.
#   bash bench/local.sh        (creates .venv-bench-local: torch + transformers, ~7 GB)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-models.sh >/dev/null
VENV=.venv-bench-local
if ! "$VENV/bin/python" -c 'import torch, transformers, sentence_transformers, gguf, accelerate' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check torch sentence-transformers transformers gguf accelerate
fi
cargo build -q --release -p agentry-local --example local_bench
BIN=${CARGO_TARGET_DIR:-target}/release/examples/local_bench
for t in 1 2; do
  # Both: candle's matrix products take their threads from RAYON_NUM_THREADS.
  echo "threads=$t chat   agentry-local: $(CANDLE_NUM_THREADS=$t RAYON_NUM_THREADS=$t $BIN chat)"
  echo "threads=$t chat   transformers:  $("$VENV/bin/python" bench/local/reference.py chat $t 2>/dev/null)"
  echo "threads=$t prompt agentry-local: $(CANDLE_NUM_THREADS=$t RAYON_NUM_THREADS=$t $BIN prompt)"
  echo "threads=$t prompt transformers:  $("$VENV/bin/python" bench/local/reference.py prompt $t 2>/dev/null)"
  echo "threads=$t embed  agentry-local: $(CANDLE_NUM_THREADS=$t RAYON_NUM_THREADS=$t $BIN embed)"
  echo "threads=$t embed  sentence-tf:   $("$VENV/bin/python" bench/local/reference.py embed $t 2>/dev/null)"
done
[ -n "${SKIP_TOOL_CHOICE:-}" ] && exit 0
echo "tool choice (55 requests, 11 tools):"
cargo build -q --release -p agentry-local --example tool_choice
CANDLE_NUM_THREADS=2 ${CARGO_TARGET_DIR:-target}/release/examples/tool_choice router,prompted,constrained,routed
