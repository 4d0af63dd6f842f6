#!/usr/bin/env bash
# The gRPC binding's speed: agentry's echo agent against the official Python SDK's gRPC server
# (a2a-sdk 1.3.0's GrpcHandler on grpc.aio), the same unary SendMessage (a direct message
# back), loaded by h2load (nghttp2, HTTP/2) in the same run; and, for scale, agentry's
# JSON-RPC on the same binary under wrk.
#
#   bash bench/grpc.sh [DURATION_S] [CONNECTIONS] [STREAMS_PER_CONNECTION]
#
# For each: requests/s, mean latency, server CPU per 1k requests, peak RSS; then ratios. Every
# answer is checked once first (grpcio reads it as a SendMessageResponse holding a message),
# since h2load counts HTTP statuses and a gRPC error is an HTTP 200 too.
# Needs python3; installs h2load (Debian nghttp2-client), wrk and the SDK on first use.
set -euo pipefail
cd "$(dirname "$0")"
DUR=${1:-10}
CONN=${2:-4}
STREAMS=${3:-16}
ROOT=$(cd .. && pwd)
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/serve_echo
OUT=${BENCH_OUT:-$PWD/results}
mkdir -p "$OUT"
for tool in h2load:nghttp2-client wrk:wrk; do
  if ! command -v "${tool%%:*}" >/dev/null; then
    echo "==> installing ${tool#*:} (Debian)"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${tool#*:}" >/dev/null
  fi
done
echo "==> building agentry's A2A echo server (release, with gRPC)"
(cd "$ROOT" && cargo build --release --locked -p agentry --no-default-features --features grpc,mimalloc --example serve_echo)
PY=$PWD/.venv-sdk1-grpc/bin/python
if ! "$PY" -c 'import a2a, grpc, uvicorn' 2>/dev/null; then
  echo "==> installing a2a-sdk[grpc] 1.3.0"
  python3 -m venv .venv-sdk1-grpc
  .venv-sdk1-grpc/bin/pip install -q 'a2a-sdk[http-server,grpc]==1.3.0' uvicorn
fi
# One SendMessageRequest, framed as gRPC sends it (flag 0, 4-byte length, message), written
# by the SDK's own protobuf types.
BODY=$OUT/grpc-send.bin
"$PY" - "$BODY" <<'PY'
import struct, sys
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
m = SendMessageRequest(message=Message(role=Role.ROLE_USER, message_id="bench-1",
                                       parts=[Part(text="hello from h2load")]))
b = m.SerializeToString()
open(sys.argv[1], "wb").write(b"\0" + struct.pack(">I", len(b)) + b)
PY

PORT=19700
PID=
stop() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  PID=
}
trap stop EXIT
wait_up() {
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$1/.well-known/agent-card.json" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "server on $1 did not come up" >&2; return 1
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hwm_kb() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }

# Checks one call the way a gRPC client reads it.
check() { # target
  "$PY" - "$1" "$BODY" <<'PY'
import sys, grpc
from a2a.types.a2a_pb2 import SendMessageRequest, SendMessageResponse
target, body = sys.argv[1], open(sys.argv[2], "rb").read()[5:]
with grpc.insecure_channel(target) as ch:
    call = ch.unary_unary("/lf.a2a.v1.A2AService/SendMessage",
                          request_serializer=lambda b: b,
                          response_deserializer=SendMessageResponse.FromString)
    r = call(body, metadata=[("a2a-version", "1.0")], timeout=10)
assert r.HasField("message") and r.message.parts[0].text.endswith("hello from h2load"), r
PY
}

declare -A RPS LAT CPU MEM
measure() { # name
  local name=$1 http grpc_port out
  PORT=$((PORT + 2)); http=$PORT; grpc_port=$PORT
  case $name in
    agentry|agentry-jsonrpc) "$BIN" "$http" message 2>/dev/null & ;;
    python)
      grpc_port=$((PORT + 1))
      A2A_MODE=message A2A_PORT=$http A2A_GRPC_PORT=$grpc_port "$PY" "$ROOT/tests/interop/a2a_sdk1_echo_server.py" >/dev/null 2>&1 &
      ;;
  esac
  PID=$!
  wait_up "$http"
  out=$OUT/grpc-$name.txt
  local t0 t1 hz total
  if [ "$name" = agentry-jsonrpc ]; then
    A2A_PROTO=1.0 wrk -t1 -c8 -d2s -s wrk_a2a_send.lua "http://127.0.0.1:$http/" >/dev/null
    t0=$(cpu_ticks "$PID")
    A2A_PROTO=1.0 wrk -t2 -c"$((CONN * STREAMS))" -d"${DUR}s" --latency -s wrk_a2a_send.lua "http://127.0.0.1:$http/" >"$out"
    t1=$(cpu_ticks "$PID")
    RPS[$name]=$(awk '/Requests\/sec/ {print $2}' "$out")
    total=$(awk '/requests in/ {print $1}' "$out")
    LAT[$name]=$(awk '/A2A_LAT/ {split($6,a,"="); printf "%.2f", a[2]/1000}' "$out")
  else
    # Warmed up first (grpcio's server, and both allocators), then measured.
    sleep 1
    check "127.0.0.1:$grpc_port"
    local h2=(h2load -c "$CONN" -m "$STREAMS" -d "$BODY" -H 'content-type: application/grpc'
      -H 'te: trailers' -H 'a2a-version: 1.0' "http://127.0.0.1:$grpc_port/lf.a2a.v1.A2AService/SendMessage")
    "${h2[@]}" -D 2 >/dev/null
    t0=$(cpu_ticks "$PID")
    "${h2[@]}" -D "$DUR" >"$out"
    t1=$(cpu_ticks "$PID")
    RPS[$name]=$(awk '/^finished in/ {print $4}' "$out")
    total=$(awk '/^requests:/ {print $8}' "$out")
    LAT[$name]=$(awk '/^time for request:/ {v=$6; if (v ~ /us$/) {sub(/us$/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v*=1000}; printf "%.2f", v}' "$out")
    local failed; failed=$(awk '/^requests:/ {print $10}' "$out")
    [ "$failed" = 0 ] || { echo "  $name: $failed requests failed (see $out)" >&2; }
  fi
  hz=$(getconf CLK_TCK)
  CPU[$name]=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v n="$total" 'BEGIN {printf "%.3f", (b-a)/hz/n*1000}')
  MEM[$name]=$(( $(hwm_kb "$PID") / 1024 ))
  stop
  printf '  %-16s %10s req/s  mean %7s ms  cpu %6s s/1k req  peak %5s MB\n' \
    "$name" "${RPS[$name]}" "${LAT[$name]}" "${CPU[$name]}" "${MEM[$name]}"
}

echo "==> unary SendMessage, ${DUR}s each: gRPC by h2load (-c $CONN -m $STREAMS), JSON-RPC by wrk (-c $((CONN * STREAMS)))"
measure agentry
measure python
measure agentry-jsonrpc
echo
echo "==> ratios"
awk -v a="${RPS[agentry]}" -v b="${RPS[python]}" -v ca="${CPU[agentry]}" -v cb="${CPU[python]}" \
    -v ma="${MEM[agentry]}" -v mb="${MEM[python]}" \
  'BEGIN {printf "  gRPC: agentry vs a2a-sdk (grpcio)   throughput x%.1f   cpu per request x%.3f   peak memory x%.2f\n", a/b, ca/cb, ma/mb}'
awk -v a="${RPS[agentry]}" -v b="${RPS[agentry-jsonrpc]}" -v ca="${CPU[agentry]}" -v cb="${CPU[agentry-jsonrpc]}" \
  'BEGIN {printf "  agentry: gRPC vs JSON-RPC (HTTP/1.1)  throughput x%.2f   cpu per request x%.2f\n", a/b, ca/cb}'
