#!/usr/bin/env python3
"""Tool-choice suites from the Berkeley Function Calling Leaderboard (BFCL v4), for
`tool_choice` (crates/agentry-local/examples/tool_choice.rs).

BFCL's questions and functions were written by its authors and (in the `live_` categories) by
real users of its public demo, with no knowledge of agentry's router: a test of tool choice on
requests and tool sets nobody here tuned for. Each request comes with its own functions; the
right one is the function of its ground-truth call. Categories taken: `multiple` (200 written
requests, 2-4 functions each) and `live_multiple` (1,053 user requests, 2 to 37 functions,
4 on average). BFCL offers few functions per request, fewer than an agent with a real toolbox
holds, so a third suite, `live_multiple_wide`, offers each live request its own functions plus
functions of other live requests (names it does not have, drawn with a fixed seed) up to
32: the same requests against a toolbox the size of the MCP suites'. A fourth,
`multi_turn`, takes each turn of BFCL's `multi_turn_base` conversations (requests written by
BFCL's authors against eight simulated APIs: a file system, messaging, trading, travel, a
vehicle, ...) whose ground truth asks for one tool (a `cd` before it, moving to the directory
it works in, not counted), offered every tool of the APIs its conversation involves (17 to 39,
most of them near neighbours from one API, as in the MCP and retail suites).
Functions keep their names, descriptions and parameters verbatim; BFCL's Python-flavoured
types are mapped to JSON Schema's (`dict` -> `object`, `float` -> `number`, `tuple` ->
`array`, `any` -> no type). A request is the last user message (37 live cases open with a
system message, dropped: the harness has its own).

The data is PyPI's bfcl-eval wheel (Apache-2.0), fetched with the ordinary client and checked
against its sha256.
  python3 scripts/bfcl-suites.py OUT_DIR
(writes bfcl_multiple.json, bfcl_live_multiple.json, bfcl_live_multiple_wide.json,
bfcl_multi_turn.json, and
.complete holding this script's own sha256 when all are written: scripts/fetch-data.sh runs it
into $AGENTRY_DATA/bfcl, where the tests read them, again whenever this script (and so the
pinned wheel or the conversion) has changed)
"""
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import zipfile

VERSION = "2026.3.23"
WHEEL = f"bfcl_eval-{VERSION}-py3-none-any.whl"
SHA256 = "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a"
CATEGORIES = ["multiple", "live_multiple"]
TYPES = {"dict": "object", "float": "number", "tuple": "array"}
WIDE = 32


def schema(p):
    """BFCL's parameter schema as JSON Schema."""
    if isinstance(p, dict):
        out = {}
        for k, v in p.items():
            if k == "type":
                if v == "any":
                    continue
                out[k] = TYPES.get(v, v)
            elif k == "properties" and isinstance(v, dict):
                out[k] = {name: schema(sub) for name, sub in v.items()}
            elif k in ("items", "additionalProperties"):
                out[k] = schema(v)
            else:
                out[k] = v
        return out
    return p


def jsonl(z, path):
    """The records of a JSON-lines member of the wheel."""
    return [json.loads(l) for l in z.read(path).splitlines() if l.strip()]


def ground_truth(z, cat):
    """A category's ground truth by request id."""
    return {a["id"]: a["ground_truth"] for a in jsonl(z, f"bfcl_eval/data/possible_answer/BFCL_v4_{cat}.json")}


def tool_spec(f):
    """A BFCL function as a tool: name, description and parameters as JSON Schema."""
    return {"name": f["name"], "description": f.get("description", ""),
            "parameters": schema(f.get("parameters", {"type": "object"}))}


def wheel_path(cache):
    path = os.path.join(cache, WHEEL)
    if not os.path.exists(path):
        os.makedirs(cache, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                 "-q", "-d", tmp, f"bfcl-eval=={VERSION}"],
                check=True,
            )
            os.replace(os.path.join(tmp, WHEEL), path)
    got = hashlib.sha256(open(path, "rb").read()).hexdigest()
    if got != SHA256:
        sys.exit(f"error: {path} has sha256 {got}, expected {SHA256}")
    return path


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    cache = os.path.join(os.environ.get("AGENTRY_DATA") or os.path.expanduser("~/.cache/agentry/data"), "bfcl")
    z = zipfile.ZipFile(wheel_path(cache))
    os.makedirs(out_dir, exist_ok=True)
    for cat in CATEGORIES:
        answers = ground_truth(z, cat)
        cases = []
        for r in jsonl(z, f"bfcl_eval/data/BFCL_v4_{cat}.json"):
            truth = answers[r["id"]]
            if len(truth) != 1:
                continue
            (tool,) = truth[0].keys()
            users = [m["content"] for m in r["question"][-1] if m["role"] == "user"]
            tools = [tool_spec(f) for f in r["function"]]
            assert tool in {t["name"] for t in tools}, r["id"]
            cases.append({"id": r["id"], "request": users[-1], "tool": tool, "tools": tools})
        suite = {
            "source": f"BFCL v4 `{cat}` (PyPI bfcl-eval {VERSION}, Apache-2.0): questions, functions and "
                      "ground truth verbatim, types mapped to JSON Schema; each request with its own functions.",
            "tools": [],
            "cases": cases,
        }
        write(out_dir, f"bfcl_{cat}.json", suite)
        if cat == "live_multiple":
            write(out_dir, f"bfcl_{cat}_wide.json", widen(suite, cat))
    write(out_dir, "bfcl_multi_turn.json", multi_turn(z))
    with open(os.path.join(out_dir, ".complete"), "w") as f:
        f.write(hashlib.sha256(open(__file__, "rb").read()).hexdigest())


# The APIs of BFCL's multi-turn conversations (`involved_classes`) and their function docs.
API_DOCS = {
    "GorillaFileSystem": "gorilla_file_system", "MathAPI": "math_api", "MessageAPI": "message_api",
    "TwitterAPI": "posting_api", "TicketAPI": "ticket_api", "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking", "VehicleControlAPI": "vehicle_control",
}


def multi_turn(z):
    """Turns of `multi_turn_base` whose ground truth calls one tool besides `cd`, each offered
    the tools of its conversation's APIs (less any the conversation withholds)."""
    docs = {api: [tool_spec(f) for f in jsonl(z, f"bfcl_eval/data/multi_turn_func_doc/{name}.json")]
            for api, name in API_DOCS.items()}
    answers = ground_truth(z, "multi_turn_base")
    cases = []
    for r in jsonl(z, "bfcl_eval/data/BFCL_v4_multi_turn_base.json"):
        # Some conversations withhold a function (`cp`, `rm`): it is not offered.
        excluded = set(r.get("excluded_function") or [])
        tools = [t for api in r["involved_classes"] for t in docs[api] if t["name"] not in excluded]
        for n, (turn, calls) in enumerate(zip(r["question"], answers[r["id"]])):
            users = [m["content"] for m in turn if m["role"] == "user"]
            names = {re.match(r"\s*([\w.]+)\(", c).group(1) for c in calls}
            wanted = names - {"cd"} or names
            if not users or len(wanted) != 1:
                continue
            (tool,) = wanted
            assert tool in {t["name"] for t in tools}, r["id"]
            cases.append({"id": f"{r['id']}_turn{n}", "request": users[-1], "tool": tool, "tools": tools})
    return {
        "source": f"BFCL v4 `multi_turn_base` (PyPI bfcl-eval {VERSION}, Apache-2.0): each turn whose "
                  "ground truth calls one tool besides `cd`, offered every tool of its conversation's APIs; "
                  "questions, functions and ground truth verbatim, types mapped to JSON Schema.",
        "tools": [],
        "cases": cases,
    }


def widen(suite, cat):
    """Each request's own functions plus others' up to WIDE, shuffled with a fixed seed."""
    rng = random.Random(23)
    pool = {}
    for c in suite["cases"]:
        for t in c["tools"]:
            pool.setdefault(t["name"], t)
    names = sorted(pool)
    cases = []
    for c in suite["cases"]:
        own = {t["name"] for t in c["tools"]}
        others = [pool[n] for n in rng.sample(names, len(names)) if n not in own]
        tools = c["tools"] + others[: max(0, WIDE - len(c["tools"]))]
        rng.shuffle(tools)
        cases.append(dict(c, tools=tools))
    return {
        "source": f"BFCL v4 `{cat}` (PyPI bfcl-eval {VERSION}, Apache-2.0), each request offered its own "
                  f"functions plus other requests' up to {WIDE} (fixed seed).",
        "tools": [],
        "cases": cases,
    }


def write(out_dir, name, suite):
    path = os.path.join(out_dir, name)
    with open(path + ".part", "w") as f:
        json.dump(suite, f)
    os.replace(path + ".part", path)
    print(f"{path}: {len(suite['cases'])} requests")


if __name__ == "__main__":
    main()
