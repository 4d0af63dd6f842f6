#!/usr/bin/env bash
# agentry's message workload against the bare axum echo, in alternating rounds on one machine:
# the protocol layer's cost (issue 19: agentry answers at least 75% of the bare echo's rate).
# A single pair of runs swings by about ±5% on a shared 2-core machine, so each protocol
# version gets ROUNDS pairs (bare, then agentry, each `wrk -t2 -cCONN -dDURATION`) and the
# median of the pairs' ratios is reported.
#
#   bash bench/echo_ratio.sh [DURATION_S] [CONNECTIONS] [ROUNDS]
#   BENCH_PROTOS="1.0" bash bench/echo_ratio.sh           (one version only)
#   BENCH_PROFILE=profiling bash bench/echo_ratio.sh      (the build `perf` can read)
#   BENCH_PIN=1 bash bench/echo_ratio.sh                  (server on CPU 0, one wrk thread on
#                                                         CPU 1: each server's one-core rate,
#                                                         steadier on a shared VM; needs taskset)
set -euo pipefail
cd "$(dirname "$0")"
DUR=${1:-8}
CONN=${2:-64}
ROUNDS=${3:-3}
PROTOS=${BENCH_PROTOS:-0.3 1.0}
PROFILE=${BENCH_PROFILE:-release}
# Pinned: the server alone on one core and wrk on the other, so the ratio is of the servers'
# CPU cost per request (kernel included) rather than of how two processes share two cores.
SERVER_PIN=() WRK_PIN=() WRK_THREADS=2
if [ "${BENCH_PIN:-0}" = 1 ]; then
  command -v taskset >/dev/null || { echo "taskset missing (util-linux)" >&2; exit 1; }
  SERVER_PIN=(taskset -c 0) WRK_PIN=(taskset -c 1) WRK_THREADS=1
fi
ROOT=$(cd .. && pwd)
BIN=${BENCH_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE/examples/serve_echo}
OUT=${BENCH_OUT:-$PWD/results}
mkdir -p "$OUT"
command -v wrk >/dev/null || { echo "wrk missing: apt-get install -y wrk" >&2; exit 1; }
# BENCH_BIN=PATH: a serve_echo built elsewhere (another commit's, to compare), not built here.
[ -n "${BENCH_BIN:-}" ] || echo "==> building agentry's A2A echo server ($PROFILE)"
[ -n "${BENCH_BIN:-}" ] || (cd "$ROOT" && cargo build --profile "$PROFILE" --locked -p agentry --no-default-features --features postgres,mimalloc --example serve_echo)

PORT=19700
PID=
stop() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  PID=
}
trap stop EXIT

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

run() { # mode proto -> "req/s server-CPU-µs-per-request"
  local mode=$1 proto=$2
  PORT=$((PORT + 1))
  # The message workload as bench/run.sh serves it: SQLite store (a message creates no task).
  local db="$OUT/ratio-$PORT.db"; rm -f "$db"*
  if [ "$mode" = bare ]; then
    "${SERVER_PIN[@]}" "$BIN" "$PORT" bare 2>/dev/null &
  else
    "${SERVER_PIN[@]}" "$BIN" "$PORT" message "$db" 2>/dev/null &
  fi
  PID=$!
  for _ in $(seq 200); do
    curl -sf "http://127.0.0.1:$PORT/.well-known/agent-card.json" >/dev/null 2>&1 && break
    sleep 0.05
  done
  A2A_PROTO=$proto "${WRK_PIN[@]}" wrk -t1 -c8 -d1s -s wrk_a2a_send.lua "http://127.0.0.1:$PORT/" >/dev/null
  local out="$OUT/ratio-$mode-$proto.txt"
  local t0; t0=$(cpu_ticks "$PID")
  A2A_PROTO=$proto "${WRK_PIN[@]}" wrk -t"$WRK_THREADS" -c"$CONN" -d"${DUR}s" --latency -s wrk_a2a_send.lua \
    "http://127.0.0.1:$PORT/" > "$out"
  local t1; t1=$(cpu_ticks "$PID")
  stop
  rm -f "$db"*
  # Every answer must be a success: a fast error is no throughput.
  if ! grep -q 'rpc_errors=0 bad_status=0' "$out"; then
    echo "errors in the $mode run:" >&2; grep A2A_RESULT "$out" >&2; exit 1
  fi
  local n; n=$(awk '/requests in/ {print $1}' "$out")
  awk -v a="$t0" -v b="$t1" -v hz="$(getconf CLK_TCK)" -v n="$n" \
    '/Requests\/sec/ {printf "%s %.2f\n", $2, (b-a)/hz/n*1e6}' "$out"
}

echo "==> $ROUNDS rounds per version of wrk -t$WRK_THREADS -c$CONN -d${DUR}s${SERVER_PIN[*]:+ (pinned)}: bare axum echo, then agentry (message)"
for proto in $PROTOS; do
  ratios=()
  for r in $(seq "$ROUNDS"); do
    read -r bare bare_cpu < <(run bare "$proto")
    read -r ours ours_cpu < <(run agentry "$proto")
    ratio=$(awk -v a="$ours" -v b="$bare" 'BEGIN {printf "%.3f", a/b}')
    ratios+=("$ratio")
    printf '  v%-4s round %d: bare %10s req/s (%5s µs CPU each)   agentry %10s req/s (%5s µs)   %5.1f%%\n' \
      "$proto" "$r" "$bare" "$bare_cpu" "$ours" "$ours_cpu" "$(awk -v x="$ratio" 'BEGIN {print 100*x}')"
  done
  median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
  printf '  v%-4s median agentry / bare: %.1f%% (issue 19: at least 75%%)\n' \
    "$proto" "$(awk -v x="$median" 'BEGIN {print 100*x}')"
done
