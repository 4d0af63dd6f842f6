"""The same hybrid search in a common Python stack: FAISS (exact inner-product index) for the
vectors, bm25s for BM25, reciprocal-rank fusion in Python, on the corpus and query vectors that
`rag_bench` exported (so both sides rank the same vectors).
usage: python_stack.py EXPORT_DIR SIZE..."""
import json
import sys
import time

import bm25s
import faiss
import numpy as np

out, sizes = sys.argv[1], [int(s) for s in sys.argv[2:]]
queries = [json.loads(l) for l in open(f"{out}/queries.jsonl")]
qv = np.array([q["vector"] for q in queries], dtype=np.float32)
for size in sizes:
    texts = [json.loads(l) for l in open(f"{out}/texts{size}.jsonl")]
    vecs = np.fromfile(f"{out}/vectors{size}.f32", dtype=np.float32).reshape(len(texts), -1)
    t = time.perf_counter()
    index = faiss.IndexFlatIP(vecs.shape[1])
    index.add(vecs)
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    build = time.perf_counter() - t
    k, depth = 10, 40
    def search(i):
        _, vid = index.search(qv[i:i + 1], depth)
        toks = bm25s.tokenize([queries[i]["text"]], stopwords="en", show_progress=False)
        kid, _ = retriever.retrieve(toks, k=depth, show_progress=False)
        fused = {}
        for rank, d in enumerate(vid[0]):
            fused[int(d)] = fused.get(int(d), 0.0) + 1.0 / (61 + rank)
        for rank, d in enumerate(kid[0]):
            fused[int(d)] = fused.get(int(d), 0.0) + 1.0 / (61 + rank)
        top = sorted(fused.items(), key=lambda x: -x[1])[:k]
        return [texts[d] for d, _ in top]
    for i in range(10):
        search(i)
    ms, found = [], 0
    for i, q in enumerate(queries):
        t = time.perf_counter()
        hits = search(i)
        ms.append((time.perf_counter() - t) * 1000)
        found += any(q["text"] in " ".join(h.split()) for h in hits)
    ms.sort()
    p = lambda x: ms[round((len(ms) - 1) * x)]
    print(f"python faiss+bm25s search @ {size} chunks: p50 {p(0.5):.2f} ms, p99 {p(0.99):.2f} ms, "
          f"mean {sum(ms) / len(ms):.2f} ms; source chunk in top 10: {found}/{len(ms)}; index build {build:.1f} s")
