#!/usr/bin/env bash
# Data-agent query time on flights-3m.parquet (npm vega-datasets, 3M rows) beside DuckDB and
# pandas on the same file, in the same run. Python peers go into bench/.venv-data (PyPI).
#   bash bench/data.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-data.sh >/dev/null
F=${AGENTRY_DATA:-$HOME/.cache/agentry/data}/vega/flights-3m.parquet
if ! bench/.venv-data/bin/python -c 'import duckdb, pandas, pyarrow' 2>/dev/null; then
  python3 -m venv bench/.venv-data
  bench/.venv-data/bin/pip install -q --disable-pip-version-check 'duckdb==1.4.1' 'pandas==2.3.3' 'pyarrow==21.0.0'
fi
cargo build --release --locked -p agentry-data --example data_bench
"${CARGO_TARGET_DIR:-target}/release/examples/data_bench" "$F"
bench/.venv-data/bin/python bench/data/python_stack.py "$F"
