#!/usr/bin/env bash
# The cost of governance measured side by side: the plain task echo and a governed one run AT
# THE SAME TIME, both servers on CPU 0 (the scheduler gives each half of it), each loaded by
# its own wrk on CPU 1. Each server's throughput is then what its half of the CPU buys, and
# the ratio of the two is the ratio of their CPU per request, with whatever the machine's
# neighbours do falling on both at once. Run one after the other (bench/governance.sh) the
# same ratio's medians moved by +-4% between sets on a shared 2-core VM; side by side, single
# rounds of plain beside plain move by +-5% and the median of 8 by about 1%, and the governed
# ratio's rounds stayed within 0.84-0.88 (docs/BENCHMARKS.md, 2026-11-28). An A/A pair comes first:
# its ratio is the method's own bias (which server starts first, which port), to read the
# others against.
#   [ROUNDS=N] bash bench/governance_ab.sh [DURATION_S] [CONNECTIONS]     (needs wrk, taskset)
#   BENCH_BIN=PATH ...   another build's serve_echo (its mint beside it), no build
#   BENCH_MODES="jwt jwt+envelope" ...  (the governed servers set beside plain; also
#   `envelope`: the envelope and a new idempotency key per request, anonymous, no JWT)
#   BENCH_STORE=power|process ...  every server on its own SQLite store (the embedded
#   default) of that durability, instead of the memory store
# Prints each round's requests and p99 per server, each pair's median ratio and median p99s,
# and last the p50/p99 of minting a token.
set -euo pipefail
cd "$(dirname "$0")"
DUR=${1:-5}
CONN=${2:-32}
ROUNDS=${ROUNDS:-4}
ROOT=$(cd .. && pwd)
T=${CARGO_TARGET_DIR:-$ROOT/target}
OUT=${BENCH_OUT:-$PWD/results}
mkdir -p "$OUT"
for tool in wrk taskset curl; do
  command -v "$tool" >/dev/null || { echo "$tool missing (apt-get install -y wrk util-linux curl)" >&2; exit 1; }
done
if [ -z "${BENCH_BIN:-}" ]; then
  echo "==> building the echo server and the token minter (release)"
  (cd "$ROOT" && cargo build --release --locked -p agentry --no-default-features --features mimalloc --example serve_echo --example mint)
fi
BIN=${BENCH_BIN:-$T/release/examples/serve_echo}
MINT=$(dirname "$BIN")/mint
ISS=https://bench.idp
PORTS=(19610 19611)
PIDS=()
stop() {
  for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}
trap stop EXIT

# Starts a server for `mode` on slot `i` (port PORTS[i], its own signing key and token).
declare -a MODE TOKEN KEYED
start() { # slot mode
  local i=$1 mode=$2 port=${PORTS[$1]} envs=()
  MODE[$i]=$mode TOKEN[$i]="" KEYED[$i]=0
  if [ "$mode" != plain ] && [ "$mode" != envelope ]; then
    TOKEN[$i]=$("$MINT" "$OUT/ab-jwks-$i.json" "$ISS" "http://127.0.0.1:$port/" 10 2>/dev/null)
    envs=(AGENTRY_BENCH_JWKS="$OUT/ab-jwks-$i.json" AGENTRY_BENCH_ISSUER="$ISS")
  fi
  case $mode in jwt+envelope | envelope) KEYED[$i]=1 ;; esac
  local store=()
  if [ -n "${BENCH_STORE:-}" ]; then
    rm -f "$OUT/ab-store-$i.db"*
    store=("$OUT/ab-store-$i.db" "$BENCH_STORE")
  fi
  env "${envs[@]}" taskset -c 0 "$BIN" "$port" task "${store[@]}" 2>/dev/null &
  PIDS+=($!)
  for _ in $(seq 200); do curl -sf "http://127.0.0.1:$port/.well-known/agent-card.json" >/dev/null 2>&1 && break; sleep 0.05; done
}
load() { # slot duration out key-prefix [keyed]
  local i=$1
  A2A_TOKEN=${TOKEN[$i]} A2A_PROTO=1.0 A2A_IDEMPOTENCY=${5:-${KEYED[$i]}} A2A_KEY_PREFIX=$4- \
    taskset -c 1 wrk -t1 -c"$CONN" -d"$2s" -s wrk_a2a_send.lua "http://127.0.0.1:${PORTS[$i]}/" > "$3"
}
both() { # duration key-prefix [keyed]: loads both slots at once, fills $OUT/ab-{0,1}.txt
  load 0 "$1" "$OUT/ab-0.txt" "$2" ${3:+"$3"} & local a=$!
  load 1 "$1" "$OUT/ab-1.txt" "$2" ${3:+"$3"} & local b=$!
  wait "$a" "$b"
}
requests() { # slot
  local f="$OUT/ab-$1.txt"
  case $(awk '/A2A_RESULT/ {print $3, $4}' "$f") in
    "rpc_errors=0 bad_status=0") ;;
    *) echo "failed requests on ${MODE[$1]}: $(grep A2A_RESULT "$f")" >&2; exit 1 ;;
  esac
  awk '/requests in/ {print $1}' "$f"
}
p99() { # slot: that slot's p99 latency of the last round, in ms
  awk '/A2A_LAT/ {split($4, p, "="); printf "%.2f", p[2] / 1000}' "$OUT/ab-$1.txt"
}
median() { # numbers on stdin
  sort -g | awk '{v[NR]=$1} END {printf "%s", (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'
}

pair() { # mode-a mode-b: ROUNDS rounds side by side, prints each and the median of b/a
  stop
  start 0 "$1"
  start 1 "$2"
  both 2 warm 0
  # A keyed server is measured as a long-running one is: its key map full (100,000 claims,
  # each new one evicting the oldest), as bench/governance.sh does.
  if [ "${KEYED[0]}" = 1 ] || [ "${KEYED[1]}" = 1 ]; then both 4 fill; fi
  local ratios=() p99a=() p99b=() r a b
  for r in $(seq "$ROUNDS"); do
    both "$DUR" "r$r"
    a=$(requests 0) b=$(requests 1)
    p99a+=("$(p99 0)") p99b+=("$(p99 1)")
    ratios+=("$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.4f", b/a}')")
    printf '  round %d: %-12s %7d requests p99 %5s ms  %-12s %7d requests p99 %5s ms  ratio %s\n' \
      "$r" "$1" "$a" "${p99a[-1]}" "$2" "$b" "${p99b[-1]}" "${ratios[-1]}"
  done
  printf '%s\n' "${ratios[@]}" | sort -g | awk -v a="$1" -v b="$2" \
    '{v[NR]=$1} END {m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2;
      printf "  => %s / %s: median x%.3f (%.1f%% lower; rounds %s..%s)", b, a, m, (1-m)*100, v[1], v[NR]}'
  printf '; median p99 %s ms / %s ms\n' "$(printf '%s\n' "${p99b[@]}" | median)" \
    "$(printf '%s\n' "${p99a[@]}" | median)"
  stop
}

STORE_NAME="memory store"
[ -z "${BENCH_STORE:-}" ] || STORE_NAME="SQLite store (durability $BENCH_STORE)"
echo "==> side by side on CPU 0 (wrk -t1 -c$CONN -d${DUR}s each, on CPU 1), v1.0 SendMessage, task echo, $STORE_NAME"
echo "==> A/A: the method's own bias"
pair plain plain
for mode in ${BENCH_MODES:-jwt jwt+envelope}; do
  echo "==> $mode beside plain"
  pair plain "$mode"
done
# Token minting (the orchestrator's delegated credentials), alone on CPU 0 after the pairs.
taskset -c 0 "$MINT" "$OUT/ab-mint-jwks.json" "$ISS" "http://127.0.0.1:${PORTS[0]}/" 10000 \
  2>"$OUT/ab-mint.txt" >/dev/null
echo "==> minting an EdDSA token: $(sed 's/MINT //' "$OUT/ab-mint.txt")"
