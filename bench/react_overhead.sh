#!/usr/bin/env bash
# ReAct framework overhead: agentry's loop vs LangGraph's prebuilt ReAct agent, the same scripted
# exchange (4 tool calls, then an answer) with a fake model and a trivial tool, in one run.
#   bash bench/react_overhead.sh [AGENTRY_RUNS] [LANGGRAPH_RUNS]
set -euo pipefail
cd "$(dirname "$0")"
A_RUNS=${1:-20000}
L_RUNS=${2:-300}
if ! .venv-langgraph/bin/python -c 'import langgraph.prebuilt' 2>/dev/null; then
  echo "==> installing langgraph"
  python3 -m venv .venv-langgraph
  .venv-langgraph/bin/pip install -q 'langgraph>=1.2,<2' 'langchain-core>=1.0,<2'
fi
echo "==> agentry (release)"
A=$(cd .. && cargo run -q --release --locked -p agentry-core --example react_overhead "$A_RUNS" 4)
echo "$A" | grep -v '='
echo "==> langgraph $(.venv-langgraph/bin/python -c 'import importlib.metadata as m; print(m.version("langgraph"))')"
L=$(.venv-langgraph/bin/python peers/langgraph_react.py "$L_RUNS" 4)
echo "$L" | grep -v '='
val() { echo "$1" | awk -F= -v k="$2" '$1 == k {print $2}'; }
awk -v a="$(val "$A" AGENTRY_STEP_US)" -v l="$(val "$L" LANGGRAPH_STEP_US)" \
    -v am="$(val "$A" AGENTRY_RUN_KB)" -v lm="$(val "$L" LANGGRAPH_RUN_KB)" \
  'BEGIN {printf "==> overhead per step: agentry %.2f µs, langgraph %.1f µs: %.0fx less\n==> memory per concurrent run: agentry %.1f KiB, langgraph %.1f KiB: %.1fx less\n", a, l, l/a, am, lm, lm/am}'
