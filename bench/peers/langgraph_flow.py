"""LangGraph running the same graphs as agentry's flow_overhead example: a 1,000-node chain of
instant nodes, and a fan-out of 100 nodes that each wait 100 ms (asyncio), joined at the end.

Prints LANGGRAPH_CHAIN_MS and LANGGRAPH_FANOUT_MS (best of several runs; graph compiled once).
"""
import asyncio
import operator
import sys
import time
import warnings
from typing import Annotated, TypedDict

warnings.filterwarnings("ignore")
sys.setrecursionlimit(10000)

from langgraph.graph import END, START, StateGraph


class ChainState(TypedDict):
    text: str


def chain_graph(n):
    g = StateGraph(ChainState)
    for i in range(n):
        g.add_node(f"s{i}", lambda s: {"text": f"{len(s['text'])}+"})
    g.add_edge(START, "s0")
    for i in range(n - 1):
        g.add_edge(f"s{i}", f"s{i + 1}")
    g.add_edge(f"s{n - 1}", END)
    return g.compile()


class FanState(TypedDict):
    done: Annotated[list, operator.add]


def fan_graph(n):
    g = StateGraph(FanState)

    async def sleeper(_s):
        await asyncio.sleep(0.1)
        return {"done": ["slept"]}

    for i in range(n):
        g.add_node(f"f{i}", sleeper)
        g.add_edge(START, f"f{i}")
        g.add_edge(f"f{i}", END)
    return g.compile()


def main():
    chain = chain_graph(1000)
    chain.invoke({"text": "start"}, {"recursion_limit": 5000})
    best = min(
        (lambda t0: (chain.invoke({"text": "start"}, {"recursion_limit": 5000}), time.perf_counter() - t0)[1])(time.perf_counter())
        for _ in range(3)
    )
    print(f"langgraph: 1,000-step chain: {best * 1e3:.1f} ms")
    print(f"LANGGRAPH_CHAIN_MS={best * 1e3:.2f}")

    fan = fan_graph(100)

    async def timed():
        t0 = time.perf_counter()
        out = await fan.ainvoke({"done": []})
        assert len(out["done"]) == 100
        return time.perf_counter() - t0

    best = min(asyncio.run(timed()) for _ in range(3))
    print(f"langgraph: fan-out of 100 x 100 ms: {best * 1e3:.1f} ms wall")
    print(f"LANGGRAPH_FANOUT_MS={best * 1e3:.2f}")


if __name__ == "__main__":
    main()
