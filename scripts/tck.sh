#!/usr/bin/env bash
# The official A2A conformance kits (a2aproject/a2a-tck, both lines) against agentry's
# conformance agent, served by the CLI binary the tests built.
#   bash scripts/tck.sh [AGENTRY_BINARY]   (default target/debug/agentry)
# The kits come from $AGENTRY_TCK_DIR, else ../shared/a2a-tck beside the project; without them
# this says so in one line and passes. TCK 0.3 runs all four categories over JSON-RPC, TCK 1.0
# the must, should and may levels over JSON-RPC and HTTP+JSON. Fails on any failure or 1.0
# prerequisite skip that scripts/tck-expected.txt does not list, and on a listed one that no
# longer fails (so the list only shrinks).
set -uo pipefail
cd "$(dirname "$0")/.."
KITS=${AGENTRY_TCK_DIR:-../shared/a2a-tck}
BIN=${1:-${CARGO_TARGET_DIR:-target}/debug/agentry}
echo "==> A2A conformance kits (a2aproject/a2a-tck 0.3 and 1.0)"
if [ ! -f "$KITS/run.sh" ]; then
  echo "    SKIPPED: no kits at $KITS (set AGENTRY_TCK_DIR to a copy of a2a-tck)"
  [ -n "${AGENTRY_SKIP_LOG:-}" ] && echo "tck.sh: no conformance kits at $KITS" >>"$AGENTRY_SKIP_LOG"
  exit 0
fi
[ -x "$BIN" ] || { echo "    no agentry binary at $BIN (build the CLI first)"; exit 1; }

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null' EXIT
# One server per kit: TCK 1.0 validates the header-less card against the strict 1.0 schema
# (`--card 1.0`), TCK 0.3 needs the 0.3 fields in it (the default card carries both).
serve() { # VAR [serve args]: starts an agent, puts its port in VAR
  local var=$1 p; shift
  p=$(port)
  AGENTRY_HOME="$out/home-$p" "$BIN" serve --agent conformance --allow-private-push --store memory \
    --port "$p" "$@" >"$out/serve-$p.log" 2>&1 &
  pids+=($!)   # not in a subshell: the EXIT trap stops it
  for _ in $(seq 100); do
    if curl -sf "http://127.0.0.1:$p/.well-known/agent-card.json" >/dev/null; then
      printf -v "$var" %s "$p"
      return 0
    fi
    sleep 0.1
  done
  echo "    the conformance agent did not start: $(cat "$out/serve-$p.log")" >&2
  return 1
}
out=$(mktemp -d)
serve p03 || exit 1
serve p10 --card 1.0 || exit 1
A2A_TCK_REPORTS=$out bash "$KITS/run.sh" 0.3 "http://127.0.0.1:$p03/" >"$out/tck03.txt" 2>&1
A2A_TCK_REPORTS=$out bash "$KITS/run.sh" 1.0 "http://127.0.0.1:$p10" >"$out/tck10.txt" 2>&1
grep -hE '^TCK ' "$out/tck03.txt" "$out/tck10.txt" | sed 's/ (log: .*)//; s/ (reports: .*)//; s/^/    /'

# Every failure and prerequisite skip, one test id per line.
# TCK 0.3 lines are pytest's summary ("FAILED id - message", the message present or not
# depending on the terminal's width), TCK 1.0 lines the kit's own ("FAILED id: message").
grep -hE '^  (FAILED|ERROR|PREREQ-SKIP) ' "$out/tck03.txt" "$out/tck10.txt" \
  | sed -E 's/^  (FAILED|ERROR|PREREQ-SKIP) //; s/ - .*//; s/: .*//' | awk '{print $1}' \
  | sort -u >"$out/failed.txt"
grep -vE '^\s*(#|$)' scripts/tck-expected.txt | awk '{print $1}' | sort -u >"$out/expected.txt"
status=0
unexpected=$(comm -23 "$out/failed.txt" "$out/expected.txt")
fixed=$(comm -13 "$out/failed.txt" "$out/expected.txt")
if [ -n "$unexpected" ]; then
  echo "    failed, not expected:"; sed 's/^/      /' <<<"$unexpected"; status=1
fi
if [ -n "$fixed" ]; then
  echo "    listed in scripts/tck-expected.txt but passing now (remove them):"
  sed 's/^/      /' <<<"$fixed"; status=1
fi
if ! grep -qE '^TCK 0.3 mandatory: passed=[1-9]' "$out/tck03.txt" \
   || ! grep -qE '^TCK 1.0 must: passed=[1-9]' "$out/tck10.txt"; then
  echo "    a kit did not run: see $out"; status=1
fi
n=$(wc -l <"$out/expected.txt")
[ "$status" = 0 ] && echo "    conformance: no unexpected failure ($n expected, listed with reasons in scripts/tck-expected.txt)"
exit $status
