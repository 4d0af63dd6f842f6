"""Reference embeddings from PyPI sentence-transformers on the same files the Rust embedder
loads (all-MiniLM-L6-v2, or the router's all-mpnet-base-v2); written to
crates/agentry-local/tests/data/<OUT>, which the test `embeddings_match_sentence_transformers`
compares against.

    .venv-bench-local/bin/python bench/local/st_reference.py [MODEL_DIR [OUT]]
    e.g. ... ~/.cache/agentry/models/all-mpnet-base-v2 mpnet_reference.json
(bench/local.sh creates the virtualenv: torch + sentence-transformers are ~3 GB, too big for CI.)
"""
import json
import os
import sys

from sentence_transformers import SentenceTransformer, models

model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.environ.get("AGENTRY_MODELS", os.path.expanduser("~/.cache/agentry/models")), "all-minilm-l6-v2")
out_name = sys.argv[2] if len(sys.argv) > 2 else "minilm_reference.json"
# As the Rust embedder: the folder's own max_seq_length, else MiniLM's 256.
config = os.path.join(model_dir, "sentence_bert_config.json")
max_len = json.load(open(config))["max_seq_length"] if os.path.exists(config) else 256
word = models.Transformer(model_dir, max_seq_length=max_len)
pool = models.Pooling(word.get_embedding_dimension(), pooling_mode="mean")
model = SentenceTransformer(modules=[word, pool, models.Normalize()], device="cpu")
texts = [
    "Who is Hamlet?",
    "Hamlet is the Prince of Denmark, son of the late king.",
    "To be, or not to be, that is the question.",
    "Plot a bar chart of penguin counts per island.",
    "SELECT species, count(*) FROM penguins GROUP BY species",
    "Résumé of the café's naïve coöperation — 2024 edition!",
    "a",
    "The quick brown fox jumps over the lazy dog. " * 12,
    # Past 128 tokens: MPNet's relative positions beyond its last bucket's distance.
    "Search the files for a pattern, move them, copy them, count their lines. " * 14,
]
emb = model.encode(texts, normalize_embeddings=True)
out = {
    "generator": "sentence-transformers " + __import__("sentence_transformers").__version__
    + ", torch " + __import__("torch").__version__,
    "texts": texts,
    "embeddings": [[round(float(x), 7) for x in row] for row in emb],
}
path = os.path.join(os.path.dirname(__file__), "../../crates/agentry-local/tests/data", out_name)
with open(path, "w") as f:
    json.dump(out, f)
print("wrote", os.path.normpath(path), len(texts), "embeddings of", len(out["embeddings"][0]))
