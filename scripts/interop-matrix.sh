#!/usr/bin/env bash
# Prints the A2A interop matrix the interop tests recorded (peer, direction, transport, result).
#   bash scripts/interop-matrix.sh [FILE]   (default .agentry/interop-matrix.tsv)
set -euo pipefail
f=${1:-.agentry/interop-matrix.tsv}
echo "==> A2A interop matrix (each cell a real peer from a package registry)"
if [ ! -s "$f" ]; then
  echo "    (no interop test ran)"
  exit 0
fi
{
  printf 'PEER\tDIRECTION\tTRANSPORT\tRESULT\n'
  sort "$f" | uniq
} | awk -F'\t' '{ printf "    %-26s %-34s %-14s %s\n", $1, $2, $3, $4 }'
fails=$(grep -c $'\tFAIL$' "$f" || true)
echo "    $(sort "$f" | uniq | wc -l) cells, $fails failed"
