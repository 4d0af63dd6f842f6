#!/usr/bin/env bash
# A2A server benchmark: agentry against the official JS SDK (@a2a-js/sdk 1.3.0 + express) and
# Python SDK (a2a-sdk 1.3.0 + uvicorn), measured in the same run with wrk, in both protocol
# versions: v0.3 message/send and v1.0 SendMessage (A2A-Version: 1.0).
#
#   bash bench/run.sh [DURATION_S] [CONNECTIONS]
#   BENCH_PROTOS="1.0" bash bench/run.sh     (one version only)
#
# Workloads: "message" (the agent answers with a direct message) and "task" (submitted ->
# working -> artifact -> completed; agentry with its SQLite store, and as "agentry-pg" with
# PostgreSQL at $BENCH_POSTGRES, default the local test database when one answers; "" skips). For each server: requests/s,
# p50/p99 latency, server CPU seconds per 1k requests, peak RSS, and ratios against agentry.
# Then a soak: agentry's resident memory while 500,000 tasks run (BENCH_SOAK_TASKS to change).
# Each protocol version starts with "bare": the same HTTP stack (axum, the example binary's
# allocator) parsing the body into a JSON tree and echoing a message, no A2A: the ceiling the
# message workload is compared with. BENCH_PEERS="js" (or "") leaves peers out.
# Needs wrk, node/npm and python3; installs the peers under bench/ on first use.
set -euo pipefail
cd "$(dirname "$0")"
DUR=${1:-10}
CONN=${2:-64}
SOAK=${BENCH_SOAK_TASKS:-500000}
PROTOS=${BENCH_PROTOS:-0.3 1.0}
ROOT=$(cd .. && pwd)
# The A2A server with the built-in echo agent, without the rest of agentry (same server code
# as `agentry serve --agent echo`, a much shorter release build).
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/serve_echo
OUT=${BENCH_OUT:-$PWD/results}
mkdir -p "$OUT"

command -v wrk >/dev/null || { echo "wrk missing: apt-get install -y wrk" >&2; exit 1; }
echo "==> building agentry's A2A echo server (release)"
(cd "$ROOT" && cargo build --release --locked -p agentry --no-default-features --features postgres,mimalloc --example serve_echo)
PG=${BENCH_POSTGRES-postgres://postgres@127.0.0.1:5432/test}
if [ -n "$PG" ] && ! (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null && [ -z "${BENCH_POSTGRES:-}" ]; then
  echo "    no PostgreSQL on 127.0.0.1:5432: agentry-pg left out"; PG=
fi
# The peers are the interop tests' echo servers (tests/interop, tests/a2a-peers).
JS_PEERS=$ROOT/tests/a2a-peers
if [[ " ${BENCH_PEERS-js python} " == *" js "* ]] && [ ! -d "$JS_PEERS/node_modules/@a2a-js/sdk" ]; then
  echo "==> installing @a2a-js/sdk 1.3.0 + express"
  (cd "$JS_PEERS" && npm ci --silent --no-audit --no-fund)
fi
if [[ " ${BENCH_PEERS-js python} " == *" python "* ]] && ! .venv-sdk1/bin/python -c 'import a2a, uvicorn, uvloop' 2>/dev/null; then
  echo "==> installing a2a-sdk 1.3.0 + uvicorn"
  python3 -m venv .venv-sdk1
  .venv-sdk1/bin/pip install -q 'a2a-sdk[http-server]==1.3.0' uvicorn uvloop httptools
fi

PORT=19500
PID=
stop() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  PID=
}
trap stop EXIT

wait_up() {
  for _ in $(seq 200); do
    curl -sf "http://127.0.0.1:$PORT/.well-known/agent-card.json" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "server on $PORT did not come up" >&2; return 1
}

start() { # name mode
  local name=$1 mode=$2
  PORT=$((PORT + 1))
  case $name in
    agentry)
      local db="$OUT/bench-$mode.db"; rm -f "$db"*
      local em=task; [ "$mode" = message ] && em=message
      "$BIN" "$PORT" "$em" "$db" 2>/dev/null &
      ;;
    agentry-pg) "$BIN" "$PORT" task "$PG" 2>/dev/null & ;;
    bare) "$BIN" "$PORT" bare 2>/dev/null & ;;
    js) (cd "$JS_PEERS" && A2A_MODE=$mode A2A_PORT=$PORT exec node a2a_js1_echo_server.mjs >/dev/null 2>&1) & ;;
    python) A2A_MODE=$mode A2A_PORT=$PORT .venv-sdk1/bin/python "$ROOT/tests/interop/a2a_sdk1_echo_server.py" >/dev/null 2>&1 & ;;
  esac
  PID=$!
  wait_up
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hwm_kb() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

declare -A RPS P50 P99 CPU MEM ERR
measure() { # name mode proto
  local name=$1 mode=$2 proto=$3 key="$1/$2/$3"
  local out="$OUT/wrk-$name-$mode-$proto.txt"
  start "$name" "$mode"
  # Warm-up, then the measured run.
  A2A_PROTO=$proto wrk -t1 -c8 -d2s -s wrk_a2a_send.lua "http://127.0.0.1:$PORT/" >/dev/null
  local t0; t0=$(cpu_ticks "$PID")
  A2A_PROTO=$proto wrk -t2 -c"$CONN" -d"${DUR}s" --latency -s wrk_a2a_send.lua "http://127.0.0.1:$PORT/" > "$out"
  local t1; t1=$(cpu_ticks "$PID")
  local hz; hz=$(getconf CLK_TCK)
  local rps; rps=$(awk '/Requests\/sec/ {print $2}' "$out")
  local total; total=$(awk '/requests in/ {print $1}' "$out")
  RPS[$key]=$rps
  P50[$key]=$(awk '/A2A_LAT/ {split($2,a,"="); printf "%.2f", a[2]/1000}' "$out")
  P99[$key]=$(awk '/A2A_LAT/ {split($4,a,"="); printf "%.2f", a[2]/1000}' "$out")
  CPU[$key]=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v n="$total" 'BEGIN {printf "%.3f", (b-a)/hz/n*1000}')
  MEM[$key]=$(( $(hwm_kb "$PID") / 1024 ))
  ERR[$key]=$(awk '/A2A_RESULT/ {print $3, $4}' "$out")
  stop
  printf '  v%-4s %-8s %-8s %10s req/s  p50 %6s ms  p99 %7s ms  cpu %6s s/1k req  peak %5s MB  %s\n' \
    "$proto" "$name" "$mode" "$rps" "${P50[$key]}" "${P99[$key]}" "${CPU[$key]}" "${MEM[$key]}" "${ERR[$key]}"
}

echo "==> wrk -t2 -c$CONN -d${DUR}s, send (v0.3 message/send, v1.0 SendMessage), unique messageIds"
PEERS=${BENCH_PEERS-js python}
for proto in $PROTOS; do
  # The ceiling: the same HTTP stack parsing the body and answering a message, no A2A.
  measure bare message "$proto"
  for mode in message task; do
    for name in agentry $PEERS; do
      measure "$name" "$mode" "$proto"
    done
  done
  [ -n "$PG" ] && measure agentry-pg task "$proto"
done

echo
echo "==> ratios (agentry / peer)"
for proto in $PROTOS; do
  awk -v a="${RPS[agentry/message/$proto]}" -v b="${RPS[bare/message/$proto]}" -v v="$proto" \
    'BEGIN {printf "  v%-4s message  vs bare axum echo: throughput %.0f%% (issue 19: at least 75%%)\n", v, 100*a/b}'
  for mode in message task; do
    for peer in $PEERS; do
      k=$mode/$proto
      awk -v a="${RPS[agentry/$k]}" -v b="${RPS[$peer/$k]}" \
          -v ca="${CPU[agentry/$k]}" -v cb="${CPU[$peer/$k]}" \
          -v ma="${MEM[agentry/$k]}" -v mb="${MEM[$peer/$k]}" -v m="$mode" -v p="$peer" -v v="$proto" \
        'BEGIN {printf "  v%-4s %-8s vs %-7s throughput x%.1f   cpu per request x%.2f   peak memory x%.2f\n", v, m, p, a/b, ca/cb, ma/mb}'
    done
  done
done

if [ -n "$PG" ]; then
  for proto in $PROTOS; do
    awk -v a="${RPS[agentry-pg/task/$proto]}" -v b="${RPS[agentry/task/$proto]}" \
        -v pa="${P99[agentry-pg/task/$proto]}" -v pb="${P99[agentry/task/$proto]}" -v v="$proto" \
      'BEGIN {printf "  v%-4s task on PostgreSQL vs SQLite: throughput x%.2f   p99 %s ms vs %s ms\n", v, a/b, pa, pb}'
  done
fi

echo
echo "==> soak: agentry task echo (SQLite), $SOAK tasks, resident memory"
start agentry task
n=0; samples=""
while [ "$n" -lt "$SOAK" ]; do
  A2A_PROTO=0.3 wrk -t2 -c"$CONN" -d5s -s wrk_a2a_send.lua "http://127.0.0.1:$PORT/" > "$OUT/soak.txt"
  done_now=$(awk '/requests in/ {print $1}' "$OUT/soak.txt")
  n=$((n + done_now))
  samples="$samples $n:$(( $(rss_kb "$PID") / 1024 ))MB"
  echo "  tasks ${n}: rss $(( $(rss_kb "$PID") / 1024 )) MB"
done
rows=$(sqlite3 "$OUT/bench-task.db" 'select count(*) from tasks' 2>/dev/null || echo "?")
echo "  tasks stored in SQLite: $rows; peak RSS $(( $(hwm_kb "$PID") / 1024 )) MB"
stop
