#!/usr/bin/env bash
# The cost of governance: the A2A task echo (memory store) measured with wrk in one run,
# plain, with JWT verification (EdDSA, issuer, audience, expiry, a required scope), and with
# JWT verification plus the audit trail (every decision an fsynced, hash-chained record,
# committed before the request is served, or only queued in order), with JWT and the task
# envelope (an Idempotency-Key per request: a key claimed in the task store, the envelope
# recorded on the task), the same two on the SQLite store, and the p50/p99 of minting a token.
#   [ROUNDS=N] bash bench/governance.sh [DURATION_S] [CONNECTIONS]
#   BENCH_PIN=1 ...        server on CPU 0, one wrk thread on CPU 1: req/s is then the
#                          server's own rate, steady from round to round on a shared VM
#                          (unpinned, wrk shares the server's cores; needs taskset)
#   BENCH_BIN=PATH ...     another build's serve_echo (its mint beside it), no build
#   BENCH_MODES="plain jwt jwt+envelope" ...   only these runs (plain is always one)
set -euo pipefail
cd "$(dirname "$0")"
DUR=${1:-10}
CONN=${2:-64}
ROOT=$(cd .. && pwd)
T=${CARGO_TARGET_DIR:-$ROOT/target}
OUT=${BENCH_OUT:-$PWD/results}
mkdir -p "$OUT"
command -v wrk >/dev/null || { echo "wrk missing: apt-get install -y wrk" >&2; exit 1; }
if [ -z "${BENCH_BIN:-}" ]; then
  echo "==> building the echo server and the token minter (release)"
  (cd "$ROOT" && cargo build --release --locked -p agentry --no-default-features --features mimalloc --example serve_echo --example mint)
fi
BIN=${BENCH_BIN:-$T/release/examples/serve_echo}
MINT=$(dirname "$BIN")/mint
MODES=" ${BENCH_MODES:-jwt jwt+audit jwt+queued jwt+envelope plain-sqlite jwt+env-sqlite} "
wants() { [[ $MODES == *" $1 "* ]]; }
SERVER_PIN=() WRK_PIN=() WRK_THREADS=2
if [ "${BENCH_PIN:-0}" = 1 ]; then
  command -v taskset >/dev/null || { echo "taskset missing (util-linux)" >&2; exit 1; }
  SERVER_PIN=(taskset -c 0) WRK_PIN=(taskset -c 1) WRK_THREADS=1
fi
PORT=19600
URL="http://127.0.0.1:$PORT/"
ISS=https://bench.idp
TOKEN=$("$MINT" "$OUT/gov-jwks.json" "$ISS" "$URL" 10000 2>"$OUT/gov-mint.txt")
PID=
stop() { if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi; PID=; }
trap stop EXIT

declare -A RPS P99 ERR CPU
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
measure() { # name, then env assignments for the server
  local name=$1; shift
  rm -f "$OUT/gov-audit.db"* "$OUT/gov-tasks.db"*
  env "$@" "${SERVER_PIN[@]}" "$BIN" "$PORT" task ${STORE_ARGS:-} 2>/dev/null &
  PID=$!
  for _ in $(seq 200); do curl -sf "$URL.well-known/agent-card.json" >/dev/null 2>&1 && break; sleep 0.05; done
  local token=""; [ "${name%%-*}" != plain ] && token=$TOKEN
  A2A_TOKEN=$token A2A_PROTO=1.0 "${WRK_PIN[@]}" wrk -t1 -c8 -d2s -s wrk_a2a_send.lua "$URL" >/dev/null
  # A keyed run starts where a long-running server is: its key map full (the memory store
  # keeps 100,000 claims; each new one then evicts the oldest). Keys of their own, so the
  # measured run's are all new; the fill itself (a p99 of tens of ms while the map's memory
  # is first touched) is not what a server does for long.
  if [ "${KEYED:-0}" = 1 ]; then
    A2A_TOKEN=$token A2A_PROTO=1.0 A2A_IDEMPOTENCY=1 A2A_KEY_PREFIX=fill- "${WRK_PIN[@]}" \
      wrk -t"$WRK_THREADS" -c"$CONN" -d4s -s wrk_a2a_send.lua "$URL" >/dev/null
  fi
  local t0; t0=$(cpu_ticks "$PID")
  A2A_TOKEN=$token A2A_PROTO=1.0 A2A_IDEMPOTENCY=${KEYED:-0} "${WRK_PIN[@]}" wrk -t"$WRK_THREADS" -c"$CONN" -d"${DUR}s" --latency -s wrk_a2a_send.lua "$URL" > "$OUT/gov-$name.txt"
  local t1; t1=$(cpu_ticks "$PID")
  # The server's CPU per request (µs): steadier than throughput on a shared machine, where
  # wrk and a neighbour's load move req/s by more than the cost measured.
  CPU[$name]=$(awk -v a="$t0" -v b="$t1" -v hz="$(getconf CLK_TCK)" \
    '/requests in/ {printf "%.2f", (b-a)/hz/$1*1e6}' "$OUT/gov-$name.txt")
  RPS[$name]=$(awk '/Requests\/sec/ {print $2}' "$OUT/gov-$name.txt")
  P99[$name]=$(awk '/A2A_LAT/ {split($4,a,"="); printf "%.2f", a[2]/1000}' "$OUT/gov-$name.txt")
  ERR[$name]=$(awk '/A2A_RESULT/ {print $2, $3, $4}' "$OUT/gov-$name.txt")
  stop
  printf '  %-12s %10s req/s  p99 %7s ms  cpu %6s µs/req  %s\n' "$name" "${RPS[$name]}" "${P99[$name]}" "${CPU[$name]}" "${ERR[$name]}"
}

# ROUNDS > 1 repeats the whole set and reports the median of each round's ratio: on a
# shared 2-core VM one run's ratio moves by more than the cost being measured.
ROUNDS=${ROUNDS:-1}
declare -A RATIOS CPURATIOS
for round in $(seq "$ROUNDS"); do
[ "$ROUNDS" -gt 1 ] && echo "==> round $round of $ROUNDS"
echo "==> wrk -t$WRK_THREADS -c$CONN -d${DUR}s, v1.0 SendMessage, task echo, memory store${SERVER_PIN:+ (pinned)}"
measure plain
wants jwt && measure jwt AGENTRY_BENCH_JWKS="$OUT/gov-jwks.json" AGENTRY_BENCH_ISSUER="$ISS"
wants jwt+audit && measure jwt+audit AGENTRY_BENCH_JWKS="$OUT/gov-jwks.json" AGENTRY_BENCH_ISSUER="$ISS" AGENTRY_BENCH_AUDIT="$OUT/gov-audit.db"
wants jwt+queued && measure jwt+queued AGENTRY_BENCH_JWKS="$OUT/gov-jwks.json" AGENTRY_BENCH_ISSUER="$ISS" AGENTRY_BENCH_AUDIT="$OUT/gov-audit.db" AGENTRY_BENCH_AUDIT_QUEUED=1
wants jwt+envelope && KEYED=1 measure jwt+envelope AGENTRY_BENCH_JWKS="$OUT/gov-jwks.json" AGENTRY_BENCH_ISSUER="$ISS"
wants plain-sqlite && STORE_ARGS="$OUT/gov-tasks.db" measure plain-sqlite
wants jwt+env-sqlite && STORE_ARGS="$OUT/gov-tasks.db" KEYED=1 measure jwt+env-sqlite AGENTRY_BENCH_JWKS="$OUT/gov-jwks.json" AGENTRY_BENCH_ISSUER="$ISS"
echo
echo "==> throughput against plain on the same store (same run)"
for name in jwt jwt+audit jwt+queued jwt+envelope; do
  wants "$name" || continue
  awk -v a="${RPS[$name]}" -v b="${RPS[plain]}" -v n="$name" \
    'BEGIN {printf "  %-14s x%.3f (%.1f%% lower)\n", n, a/b, (1-a/b)*100}'
  RATIOS[$name]+="$(awk -v a="${RPS[$name]}" -v b="${RPS[plain]}" 'BEGIN {printf "%.4f", a/b}') "
  CPURATIOS[$name]+="$(awk -v a="${CPU[$name]}" -v b="${CPU[plain]}" 'BEGIN {printf "%.4f", a/b}') "
done
if wants plain-sqlite && wants jwt+env-sqlite; then
awk -v a="${RPS[jwt+env-sqlite]}" -v b="${RPS[plain-sqlite]}" -v n="jwt+env-sqlite" \
  'BEGIN {printf "  %-14s x%.3f (%.1f%% lower than plain-sqlite)\n", n, a/b, (1-a/b)*100}'
RATIOS[jwt+env-sqlite]+="$(awk -v a="${RPS[jwt+env-sqlite]}" -v b="${RPS[plain-sqlite]}" 'BEGIN {printf "%.4f", a/b}') "
CPURATIOS[jwt+env-sqlite]+="$(awk -v a="${CPU[jwt+env-sqlite]}" -v b="${CPU[plain-sqlite]}" 'BEGIN {printf "%.4f", a/b}') "
fi
done
if [ "$ROUNDS" -gt 1 ]; then
  echo "==> median over $ROUNDS rounds of the ratio to plain on the same store"
  for name in jwt jwt+audit jwt+queued jwt+envelope jwt+env-sqlite; do
    [ -n "${RATIOS[$name]:-}" ] || continue
    # shellcheck disable=SC2086
    printf '%s\n' ${RATIOS[$name]} | sort -g | awk -v n="$name" \
      '{v[NR]=$1} END {m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2;
        printf "  %-14s x%.3f (%.1f%% lower; rounds %s..%s)\n", n, m, (1-m)*100, v[1], v[NR]}'
  done
fi
echo "==> server CPU per request against plain on the same store (median over $ROUNDS rounds)"
for name in jwt jwt+audit jwt+queued jwt+envelope jwt+env-sqlite; do
  [ -n "${CPURATIOS[$name]:-}" ] || continue
  # shellcheck disable=SC2086
  printf '%s\n' ${CPURATIOS[$name]} | sort -g | awk -v n="$name" \
    '{v[NR]=$1} END {m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2;
      printf "  %-14s x%.3f (%.1f%% more CPU per request; rounds %s..%s)\n", n, m, (m-1)*100, v[1], v[NR]}'
done
echo "==> minting an EdDSA token: $(sed 's/MINT //' "$OUT/gov-mint.txt")"
