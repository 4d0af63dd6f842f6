#!/usr/bin/env bash
# Load test: 10,000 tasks sent at once, then 10,000 SSE streams open at once; errors, latency,
# the servers' resident memory and CPU per task (see crates/agentry/examples/load.rs). First
# one server on SQLite, then, in the same run, three replicas sharing PostgreSQL and NATS
# (skipped, saying so, when either does not answer). Release build of the small server alone.
#   bash bench/load.sh [N]      (default 10000; needs `ulimit -n` above N + a few hundred, in each of the two processes)
#   BENCH_POSTGRES=postgres://... BENCH_NATS=nats://... for other servers than the local ones
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000}
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((N + 512)) ]; then
  ulimit -n $((N + 512)) 2>/dev/null || {
    echo "open files limit $(ulimit -n) is below $((N + 512)): raise it (ulimit -n)" >&2
    exit 1
  }
fi
T=${CARGO_TARGET_DIR:-target}
cargo build --release --locked -p agentry --no-default-features --features postgres,nats,mimalloc \
  --example serve_echo --example load
echo "==> one server, SQLite"
status=0
"$T/release/examples/load" "$T/release/examples/serve_echo" "$N" || status=1
PG=${BENCH_POSTGRES:-postgres://postgres@127.0.0.1:5432/test}
NATS=${BENCH_NATS:-nats://127.0.0.1:4222}
hostport() { local a=${1#*://}; a=${a#*@}; echo "${a%%/*}"; }
if ! (exec 3<>"/dev/tcp/$(hostport "$PG" | tr : /)") 2>/dev/null \
   || ! (exec 3<>"/dev/tcp/$(hostport "$NATS" | tr : /)") 2>/dev/null; then
  echo "==> three replicas: SKIPPED (no PostgreSQL at $(hostport "$PG") or no NATS at $(hostport "$NATS"))"
  exit $status
fi
echo "==> three replicas, PostgreSQL + NATS"
"$T/release/examples/load" "$T/release/examples/serve_echo" "$N" --replicas 3 --store "$PG" --bus "$NATS" || status=1
exit $status
