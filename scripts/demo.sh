#!/usr/bin/env bash
# The main job on the embedded defaults: build agentry, serve the echo agent over A2A with its
# SQLite task store, and call it (card, send, stream) with agentry's own client.
#   bash scripts/demo.sh [PORT]
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${1:-8080}
URL="http://127.0.0.1:$PORT"

echo "==> building agentry (release)"
cargo build --release --locked -p agentry-cli
BIN=target/release/agentry
export AGENTRY_HOME=${AGENTRY_HOME:-$PWD/.agentry}

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
echo "==> done; tasks are kept in $AGENTRY_HOME/echo.db"
