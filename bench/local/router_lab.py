"""The tool router re-computed from its dumped inputs, to try variants of it in seconds.

    MODES=dump bash bench/tool_choice.sh          # once: writes bench/results/router-lab/*.json
    python3 bench/local/router_lab.py bench/results/router-lab/*.json [--share 0.8] [--kw 0.1]
        [--no-center] [--misses]

Each dump holds both embedders' vectors of every request and tool text (`router`: the
router's, all-mpnet-base-v2; `documents`: MiniLM), each request's keyword scores and the
router's own first choice. This file scores requests as `crates/agentry-local/src/route.rs`
does (cosine to the tool's text, less the set's mean text from `center_min_tools` tools on,
averaged with the closest example, plus the keyword score scaled to `keyword_weight`) and
first checks that, with no option, it picks what the router picked. Needs numpy.
"""
import argparse
import json

import numpy as np


def scores(case, vec, center_min, kw_weight):
    q = vec[case["request"]]
    t = np.stack([vec[x] for x in case["texts"]])
    if len(t) >= center_min:
        c = t - t.mean(0)
        s = (c @ q) / np.maximum(np.linalg.norm(c, axis=1), 1e-6)
    else:
        s = t @ q
    for i, ex in enumerate(case["examples"]):
        if ex:
            s[i] = (s[i] + max(float(vec[x] @ q) for x in ex)) / 2
    k = np.array(case["keywords"], dtype=np.float32)
    if kw_weight and k.max() > 0:
        s = s + kw_weight * k / k.max()
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dumps", nargs="+")
    ap.add_argument("--share", type=float, default=1.0,
                    help="the router embedder's share of the score, the rest MiniLM's")
    ap.add_argument("--kw", type=float, help="keyword weight (default: the router's)")
    ap.add_argument("--no-center", action="store_true")
    ap.add_argument("--misses", action="store_true")
    a = ap.parse_args()
    print("| suite | requests | top 1 | top 2 | top 4 |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for path in a.dumps:
        d = json.load(open(path))
        vecs = {name: {t: np.array(v, dtype=np.float32) for t, v in zip(d["texts"], vs)}
                for name, vs in d["vectors"].items()}
        center = 10**9 if a.no_center else d["center_min_tools"]
        kw = d["keyword_weight"] if a.kw is None else a.kw
        plain = a.share == 1.0 and a.kw is None and not a.no_center
        hits = [0, 0, 0]
        for c in d["cases"]:
            if not c["names"]:
                continue
            s = a.share * scores(c, vecs["router"], center, kw)
            if a.share < 1.0:
                s += (1 - a.share) * scores(c, vecs["documents"], center, kw)
            order = [c["names"][i] for i in np.argsort(-s, kind="stable")]
            if plain and order[0] != c["router_first"] and abs(
                    s[c["names"].index(order[0])] - s[c["names"].index(c["router_first"])]) > 1e-5:
                raise SystemExit(f"{path}: re-computed {order[0]}, the router chose "
                                 f"{c['router_first']} for {c['request']!r}")
            rank = order.index(c["tool"])
            for j, k in enumerate((1, 2, 4)):
                hits[j] += rank < k
            if a.misses and rank > 0:
                print(f"    miss: {c['request'][:100]!r} -> {order[0]} (want {c['tool']}, #{rank + 1})")
        n = len(d["cases"])
        name = path.rsplit("/", 1)[-1].removesuffix(".json")
        print(f"| {name} | {n} | {hits[0]} ({100 * hits[0] / n:.1f}%) | {hits[1]} | {hits[2]} |")


if __name__ == "__main__":
    main()
