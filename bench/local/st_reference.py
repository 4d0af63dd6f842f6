"""Reference embeddings from PyPI sentence-transformers on the same all-MiniLM-L6-v2 files the
Rust embedder loads; written to crates/agentry-local/tests/data/minilm_reference.json, which
the test `embeddings_match_sentence_transformers` compares against (cosine > 0.999).

    .venv-bench-local/bin/python bench/local/st_reference.py [MODEL_DIR]
(bench/local.sh creates the virtualenv: torch + sentence-transformers are ~3 GB, too big for CI.)
"""
import json
import os
import sys

from sentence_transformers import SentenceTransformer, models

model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.environ.get("AGENTRY_MODELS", os.path.expanduser("~/.cache/agentry/models")), "all-minilm-l6-v2")
word = models.Transformer(model_dir, max_seq_length=256)
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
]
emb = model.encode(texts, normalize_embeddings=True)
out = {
    "generator": "sentence-transformers " + __import__("sentence_transformers").__version__
    + ", torch " + __import__("torch").__version__,
    "texts": texts,
    "embeddings": [[round(float(x), 7) for x in row] for row in emb],
}
path = os.path.join(os.path.dirname(__file__), "../../crates/agentry-local/tests/data/minilm_reference.json")
with open(path, "w") as f:
    json.dump(out, f)
print("wrote", os.path.normpath(path), len(texts), "embeddings of", len(out["embeddings"][0]))
