#!/usr/bin/env bash
# Instructions per request of the A2A echo server, counted by valgrind (callgrind), for the
# workloads whose cost ratios the issues set targets on: the task echo plain, with JWT
# verification, with JWT and the task envelope (a new Idempotency-Key per request), and the
# message echo beside the bare axum echo (issue 19's protocol-layer ratio).
#
# Why instructions: on a shared 2-core VM the same binary's CPU per request moved by +-30%
# between runs minutes apart (docs/BENCHMARKS.md, 2026-11-27), more than the costs measured.
# An instruction count is the same to within 0.3% from run to run, so a change of a few
# percent shows. What it does not see: cache misses, the kernel's TCP work (user space
# only: the ratios below leave out a cost both sides pay), and timing. Time is still
# measured by bench/governance.sh and bench/echo_ratio.sh; this one says whether a change
# did less work.
#
#   bash bench/instructions.sh [DURATION_S]           (needs valgrind: apt-get install -y valgrind)
#   BENCH_BIN=PATH bash bench/instructions.sh         (another build's serve_echo, to compare)
#   BENCH_MODES="plain envelope" bash bench/instructions.sh
#     (modes: plain, jwt, envelope = JWT and the envelope, envelope-only = the envelope and
#     its key with no JWT, message, bare)
#   BENCH_PROTO=0.3 bash bench/instructions.sh          (v0.3 message/send requests)
set -euo pipefail
cd "$(dirname "$0")"
DUR=${1:-8}
MODES=${BENCH_MODES:-plain jwt envelope message bare}
# The protocol version of the requests (1.0: SendMessage; 0.3: message/send).
PROTO=${BENCH_PROTO:-1.0}
ROOT=$(cd .. && pwd)
T=${CARGO_TARGET_DIR:-$ROOT/target}
OUT=${BENCH_OUT:-$PWD/results}
mkdir -p "$OUT"
for tool in wrk valgrind callgrind_annotate python3; do
  command -v "$tool" >/dev/null || { echo "$tool missing: apt-get install -y wrk valgrind" >&2; exit 1; }
done
[ -n "${BENCH_BIN:-}" ] || echo "==> building the echo server and the token minter (release)"
[ -n "${BENCH_BIN:-}" ] || (cd "$ROOT" && cargo build --release --locked -p agentry --no-default-features --features mimalloc --example serve_echo --example mint)
BIN=${BENCH_BIN:-$T/release/examples/serve_echo}
MINT=${BENCH_MINT:-$(dirname "$BIN")/mint}
PORT=19620
URL="http://127.0.0.1:$PORT/"
ISS=https://bench.idp
TOKEN=$("$MINT" "$OUT/ins-jwks.json" "$ISS" "$URL" 10 2>/dev/null)
PID=
# SIGINT (agentry's servers shut down gracefully on it), then SIGKILL for the bare echo,
# which installs no handler and which valgrind keeps alive on it.
stop() {
  if [ -n "$PID" ]; then
    kill -INT "$PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
  fi
  PID=
}
trap stop EXIT

declare -A IR
# Calls to the global allocator (`__rust_alloc`, `__rust_alloc_zeroed`; reallocations not
# counted) in a callgrind profile: an allocation and its free cost ~100 instructions here and
# more in time (the allocator's shared structures), so their count is worth watching apart.
allocations() { # callgrind file
  python3 - "$1" <<'PY'
import re, sys
names, callee, total = {}, None, 0
for line in open(sys.argv[1]):
    if line.startswith(("fn=", "cfn=")):
        m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
        if m.group(2):
            names[m.group(1)] = m.group(2)
        if line.startswith("cfn="):
            callee = names.get(m.group(1))
    elif line.startswith("calls=") and callee in ("__rustc::__rust_alloc", "__rustc::__rust_alloc_zeroed"):
        total += int(line.split()[0][6:])
print(total)
PY
}
measure() { # mode
  local mode=$1 serve=task token="" keyed=0 envs=()
  case $mode in
    plain) ;;
    jwt) envs=(AGENTRY_BENCH_JWKS="$OUT/ins-jwks.json" AGENTRY_BENCH_ISSUER="$ISS"); token=$TOKEN ;;
    envelope) envs=(AGENTRY_BENCH_JWKS="$OUT/ins-jwks.json" AGENTRY_BENCH_ISSUER="$ISS"); token=$TOKEN; keyed=1 ;;
    envelope-only) keyed=1 ;;
    message) serve=message ;;
    bare) serve=bare ;;
    *) echo "unknown mode $mode" >&2; exit 2 ;;
  esac
  local cg="$OUT/ins-$mode.callgrind"
  rm -f "$cg"*
  env "${envs[@]}" valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$cg" \
    "$BIN" "$PORT" "$serve" 2>/dev/null &
  PID=$!
  for _ in $(seq 600); do curl -sf "$URL.well-known/agent-card.json" >/dev/null 2>&1 && break; sleep 0.1; done
  # Warm-up without keys: a keyed warm-up would claim the keys the measured run sends again
  # (wrk numbers them from 1 in every run), and the measured run would count repeats.
  A2A_TOKEN=$token A2A_PROTO=$PROTO wrk -t1 -c4 -d3s -s wrk_a2a_send.lua "$URL" >/dev/null
  callgrind_control -i on "$PID" >/dev/null 2>&1
  A2A_TOKEN=$token A2A_PROTO=$PROTO A2A_IDEMPOTENCY=$keyed wrk -t1 -c4 -d"${DUR}s" -s wrk_a2a_send.lua "$URL" > "$OUT/ins-$mode.txt"
  callgrind_control -d "$PID" >/dev/null 2>&1
  stop
  local n ir bad
  n=$(awk '/requests in/ {print $1}' "$OUT/ins-$mode.txt")
  bad=$(awk '/A2A_RESULT/ {print $3, $4}' "$OUT/ins-$mode.txt")
  ir=$(grep -h '^totals:' "$cg".1 | awk '{print $2}')
  case $bad in "rpc_errors=0 bad_status=0") ;; *) echo "  $mode: failed requests ($bad)" >&2; exit 1 ;; esac
  IR[$mode]=$(awk -v a="$ir" -v b="$n" 'BEGIN {printf "%.0f", a/b}')
  local allocs
  allocs=$(allocations "$cg".1)
  printf '  %-9s %8s requests  %9s instructions  %6s allocations per request\n' "$mode" "$n" \
    "${IR[$mode]}" "$(awk -v a="$allocs" -v b="$n" 'BEGIN {printf "%.1f", a/b}')"
}

echo "==> callgrind, wrk -t1 -c4 -d${DUR}s, v$PROTO send, memory store: $BIN"
for m in $MODES; do measure "$m"; done
ratio() { # name, a, b
  [ -n "${IR[$2]:-}" ] && [ -n "${IR[$3]:-}" ] || return 0
  awk -v a="${IR[$2]}" -v b="${IR[$3]}" -v n="$1" 'BEGIN {printf "  %-22s x%.3f\n", n, a/b}'
}
echo "==> ratios (user-space instructions)"
ratio "jwt / plain" jwt plain
ratio "jwt+envelope / plain" envelope plain
ratio "envelope-only / plain" envelope-only plain
ratio "bare / message" bare message
