#!/usr/bin/env bash
# Fuzzes what reads outside input (the A2A request decoders, a peer's REST error bodies,
# the agent-config and workflow loaders) for a bounded time (cargo-fuzz, libFuzzer; needs a nightly
# toolchain). By hand, to search: FUZZ_SECONDS=600 bash scripts/fuzz.sh
#   FUZZ_SECONDS  per target (default 30), random seed, corpus kept in
#                 ~/.cache/agentry-fuzz/corpus between runs (outside the clone)
#   FUZZ_RUNS     instead: this many inputs per target from a fixed seed and the checked-in
#                 seeds only, so the outcome depends on the code alone (what .ci/run does: a
#                 gate that passes here passes in CI, and a new crash is found by a search
#                 by hand, not by a coin toss in CI)
# A crash is left in fuzz/artifacts/<target>/ and fails the run: fix it, then copy the input
# into fuzz/regressions/, which the stable test suite replays (tests/it/wire.rs).
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-30}
RUNS=${FUZZ_RUNS:-}
CACHE=${AGENTRY_FUZZ_CACHE:-$HOME/.cache/agentry-fuzz}
if [ -n "$RUNS" ]; then
  budget=(-runs="$RUNS" -seed=1)
  what="$RUNS inputs per target, fixed seed"
else
  budget=(-max_total_time="$SECONDS_EACH")
  what="$SECONDS_EACH s per target"
fi
echo "==> fuzzing ($what): request decoders, REST error bodies, config loaders"
if ! rustup run nightly rustc -V >/dev/null 2>&1; then
  echo "    SKIPPED: no nightly toolchain (cargo-fuzz needs one)"
  [ -n "${AGENTRY_SKIP_LOG:-}" ] && echo "fuzz.sh: no nightly toolchain" >>"$AGENTRY_SKIP_LOG"
  [ "${AGENTRY_FAIL_ON_SKIP:-0}" = 1 ] && exit 1
  exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "    installing cargo-fuzz 0.13.2 (crates.io)"
  cargo install cargo-fuzz --version 0.13.2 --locked --quiet || exit 1
fi
export CARGO_TARGET_DIR="$CACHE/target"
status=0
# Each target with its seed folders (the decoders share theirs; the others start empty).
for spec in "decode_request:fuzz/seeds/decode_request fuzz/regressions" \
            "decode_request_v1:fuzz/seeds/decode_request fuzz/regressions" \
            "rest_error:" "load_configs:"; do
  target=${spec%%:*}
  seeds=${spec#*:}
  corpus="$CACHE/corpus/$target"
  # A fixed budget starts from the checked-in seeds alone (a fresh, empty corpus folder).
  [ -n "$RUNS" ] && corpus="$CACHE/gate/$target" && rm -rf "$corpus"
  mkdir -p "$corpus" "fuzz/artifacts/$target"
  # Built without a sanitizer: the code under test is safe Rust, and the build and the runs
  # are several times faster; panics (the invariants) are what is looked for.
  # shellcheck disable=SC2086
  if cargo +nightly fuzz run --sanitizer none "$target" "$corpus" $seeds -- \
      "${budget[@]}" -artifact_prefix="fuzz/artifacts/$target/" \
      >"$CACHE/$target.log" 2>&1; then
    echo "    $target: $(grep -Eo 'Done [0-9]+ runs' "$CACHE/$target.log" | tail -1 || echo done), no crash"
  else
    echo "    $target: FAILED (log: $CACHE/$target.log)"
    ls "fuzz/artifacts/$target/" 2>/dev/null | sed 's/^/      /'
    tail -20 "$CACHE/$target.log" | sed 's/^/      /'
    status=1
  fi
done
exit $status
