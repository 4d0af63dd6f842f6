#!/usr/bin/env bash
# Fuzzes what reads outside input (the A2A request decoders, a peer's REST error bodies and
# event streams, the agent-config and workflow loaders) for a bounded time (cargo-fuzz,
# libFuzzer; needs a nightly toolchain). By hand, to search: FUZZ_SECONDS=600 bash scripts/fuzz.sh
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
echo "==> fuzzing ($what): request decoders, REST error bodies, event streams, config loaders"
if ! rustup run nightly rustc -V >/dev/null 2>&1; then
  echo "    SKIPPED: no nightly toolchain (cargo-fuzz needs one)"
  [ -n "${AGENTRY_SKIP_LOG:-}" ] && echo "fuzz.sh: no nightly toolchain" >>"$AGENTRY_SKIP_LOG"
  [ "${AGENTRY_FAIL_ON_SKIP:-0}" = 1 ] && exit 1
  exit 0
fi
mkdir -p "$CACHE"
export CARGO_TARGET_DIR="$CACHE/target"
status=0
# The targets built as `cargo fuzz run --sanitizer none` builds them (cargo-fuzz 0.13's flags:
# libFuzzer's coverage instrumentation, `--cfg fuzzing`, release with debug assertions), by
# cargo itself: no cargo-fuzz to install (minutes of a cold CI run), all the targets in one
# build. Release's 16 codegen units, not one: libFuzzer gathers the counters of every module,
# and the build takes 4 minutes instead of 5.5 on two cores.
TRIPLE=$(rustup run nightly rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing \
-Cllvm-args=-simplifycfg-branch-fold-threshold=0 -Cllvm-args=-sanitizer-coverage-stack-depth \
-Cdebug-assertions ${RUSTFLAGS:-}"
if ! cargo +nightly build --quiet --manifest-path fuzz/Cargo.toml --target "$TRIPLE" --release \
    --config 'profile.release.debug="line-tables-only"' --bins >"$CACHE/build.log" 2>&1; then
  echo "    the fuzz targets do not build (log: $CACHE/build.log)"
  tail -20 "$CACHE/build.log" | sed 's/^/      /'
  exit 1
fi
BINS="$CARGO_TARGET_DIR/$TRIPLE/release"
for spec in "decode_request:fuzz/seeds/decode_request fuzz/regressions" \
            "decode_request_v1:fuzz/seeds/decode_request fuzz/regressions" \
            "rest_error:" "sse:" "load_configs:"; do
  target=${spec%%:*}
  seeds=${spec#*:}
  corpus="$CACHE/corpus/$target"
  # A fixed budget starts from the checked-in seeds alone (a fresh, empty corpus folder).
  [ -n "$RUNS" ] && corpus="$CACHE/gate/$target" && rm -rf "$corpus"
  mkdir -p "$corpus" "fuzz/artifacts/$target"
  # Built without a sanitizer: the code under test is safe Rust, and the build and the runs
  # are several times faster; panics (the invariants) are what is looked for.
  # shellcheck disable=SC2086
  if "$BINS/$target" "${budget[@]}" -artifact_prefix="fuzz/artifacts/$target/" \
      "$corpus" $seeds >"$CACHE/$target.log" 2>&1; then
    echo "    $target: $(grep -Eo 'Done [0-9]+ runs' "$CACHE/$target.log" | tail -1 || echo done), no crash"
  else
    echo "    $target: FAILED (log: $CACHE/$target.log)"
    ls "fuzz/artifacts/$target/" 2>/dev/null | sed 's/^/      /'
    tail -20 "$CACHE/$target.log" | sed 's/^/      /'
    status=1
  fi
done
exit $status
