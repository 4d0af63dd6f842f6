#!/usr/bin/env bash
# MCP client: tools/call round trips (agentry vs raw rmcp vs the official Python SDK client)
# over stdio and Streamable HTTP against npm server-everything, and a five-server fan-out.
#   bash bench/mcp_roundtrip.sh   (run scripts/test.sh once first: it installs the peers)
set -euo pipefail
cd "$(dirname "$0")/.."
JS=tests/mcp-peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js
[ -f "$JS" ] || (cd tests/mcp-peers && npm install --silent --no-audit --no-fund)
[ -x .venv-mcp/bin/python ] || { python3 -m venv .venv-mcp && .venv-mcp/bin/pip install -q 'mcp>=2.3,<3'; }
A=$(cargo run -q --release --locked -p agentry-mcp --example mcp_roundtrip -- "$JS" .venv-mcp/bin/python tests/interop/mcp_py_server.py)
echo "$A" | grep -v '='
P=$(.venv-mcp/bin/python bench/peers/mcp_py_client_bench.py "$JS")
echo "$P" | grep -v '='
val() { echo "$1" | awk -F= -v k="$2" '$1 == k {print $2}'; }
awk -v a="$(val "$A" MCP_STDIO_US)" -v r="$(val "$A" RMCP_STDIO_US)" -v p="$(val "$P" PY_STDIO_US)" \
    -v ah="$(val "$A" MCP_HTTP_US)" -v rh="$(val "$A" RMCP_HTTP_US)" -v ph="$(val "$P" PY_HTTP_US)" \
    -v f="$(val "$A" FANOUT_US)" -v s="$(val "$A" SLOWEST_US)" \
    -v fw="$(val "$A" FANOUT_SLEEP_MS)" -v sw="$(val "$A" SINGLE_SLEEP_MS)" \
  'BEGIN {printf "==> stdio: agentry/raw rmcp %.2f, python/agentry %.1fx\n==> HTTP: agentry/raw rmcp %.2f, python/agentry %.1fx\n==> fan-out tools/list (CPU-bound)/slowest single %.2f\n==> fan-out 100 ms tool/slowest single %.2f\n", a/r, p/a, ah/rh, ph/ah, f/s, fw/sw}'
