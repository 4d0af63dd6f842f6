#!/usr/bin/env bash
# Orchestration overhead: agentry's workflow engine vs LangGraph on the same graphs, one run:
# a 1,000-step chain of instant steps, and a fan-out of 100 steps that each wait 100 ms.
#   bash bench/flow_overhead.sh
set -euo pipefail
cd "$(dirname "$0")"
if ! .venv-langgraph/bin/python -c 'import langgraph.graph' 2>/dev/null; then
  echo "==> installing langgraph"
  python3 -m venv .venv-langgraph
  .venv-langgraph/bin/pip install -q 'langgraph>=1.2,<2' 'langchain-core>=1.0,<2'
fi
echo "==> agentry (release)"
A=$(cd .. && cargo run -q --release --locked -p agentry-flow --example flow_overhead)
echo "$A" | grep -v '='
echo "==> langgraph $(.venv-langgraph/bin/python -c 'import importlib.metadata as m; print(m.version("langgraph"))')"
L=$(.venv-langgraph/bin/python peers/langgraph_flow.py)
echo "$L" | grep -v '='
val() { echo "$1" | awk -F= -v k="$2" '$1 == k {print $2}'; }
awk -v a="$(val "$A" FLOW_CHAIN_MS)" -v l="$(val "$L" LANGGRAPH_CHAIN_MS)" \
    -v af="$(val "$A" FLOW_FANOUT_MS)" -v lf="$(val "$L" LANGGRAPH_FANOUT_MS)" \
  'BEGIN {printf "==> 1,000-step chain: agentry %.1f ms, langgraph %.1f ms: %.0fx less overhead\n==> fan-out 100 x 100 ms: agentry %.1f ms, langgraph %.1f ms wall\n", a, l, l/a, af, lf}'
