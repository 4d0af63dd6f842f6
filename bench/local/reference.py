"""The reference stack for bench/local.sh, on the same model files as agentry-local:
  chat:  PyPI transformers loading the same GGUF (dequantized to float32 by transformers)
  embed: PyPI sentence-transformers on the same all-MiniLM-L6-v2 files
  prompt: prompt processing alone (ten passes over the chat prompt: median and best)
Threads: torch.set_num_threads(N). Prints one JSON line like the Rust example."""
import json, os, resource, sys, time

import torch

what, threads = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(threads)
models = os.environ.get("AGENTRY_MODELS", os.path.expanduser("~/.cache/agentry/models"))


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if what == "embed":
    from sentence_transformers import SentenceTransformer, models as stm
    word = stm.Transformer(os.path.join(models, "all-minilm-l6-v2"), max_seq_length=256)
    pool = stm.Pooling(word.get_embedding_dimension(), pooling_mode="mean")
    model = SentenceTransformer(modules=[word, pool, stm.Normalize()], device="cpu")
    texts = [f"Sentence number {i} is about Hamlet, the prince of Denmark, and his father's ghost." for i in range(256)]
    model.encode(texts[:32], batch_size=32)
    t0 = time.time()
    model.encode(texts, batch_size=32)
    print(json.dumps({"embed_sentences_per_s": round(len(texts) / (time.time() - t0), 1), "peak_rss_mb": round(peak_mb())}))
else:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    d = os.path.join(models, "smollm2")
    f = "SmolLM2-135M-Instruct.Q4_1.gguf"
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float32)
    model.eval()
    long = "Hamlet, Prince of Denmark, returns home to find his father dead and his mother married to his uncle Claudius. " * 8
    msgs = [{"role": "user", "content": long + "\nWrite a long essay about this story."}]
    ids = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt")
    if not torch.is_tensor(ids):
        ids = ids["input_ids"]
    with torch.no_grad():
        model.generate(tok("Hello", return_tensors="pt").input_ids, max_new_tokens=4, do_sample=False)
        if what == "prompt":
            # Prompt processing alone, as `local_bench prompt`: ten passes, median and best.
            rates = []
            for _ in range(10):
                t0 = time.time()
                model(ids)
                rates.append(ids.shape[1] / (time.time() - t0))
            rates.sort()
            print(json.dumps({"prompt_tokens": ids.shape[1], "prompt_tok_per_s_median": round(rates[5], 1),
                              "best": round(rates[9], 1)}))
            sys.exit(0)
        t0 = time.time()
        model(ids)
        prompt_s = time.time() - t0
        t0 = time.time()
        out = model.generate(ids, max_new_tokens=128, do_sample=False)
        total = time.time() - t0
    n = out.shape[1] - ids.shape[1]
    gen_s = max(total - prompt_s, 1e-9)
    print(json.dumps({"prompt_tokens": ids.shape[1], "prompt_tok_per_s": round(ids.shape[1] / prompt_s, 1),
                      "gen_tokens": n, "gen_tok_per_s": round(n / gen_s, 1), "peak_rss_mb": round(peak_mb())}))
