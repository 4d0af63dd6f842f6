"""LangGraph's prebuilt ReAct agent driven by a fake chat model: the same scripted exchange as
agentry's `react_overhead` example (TOOL_STEPS tool calls, then an answer), timing invoke only.

    python langgraph_react.py [RUNS] [TOOL_STEPS]

Prints LANGGRAPH_STEP_US=<µs> and LANGGRAPH_RUN_KB=<KiB per concurrent run>.
"""
import asyncio
import resource
import sys
import time
import warnings

warnings.filterwarnings("ignore")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent


class FakeToolModel(GenericFakeChatModel):
    def bind_tools(self, tools, **kwargs):
        return self


@tool
def add(a: float, b: float) -> str:
    """Adds two numbers."""
    return str(a + b)


@tool
async def slow_add(a: float, b: float) -> str:
    """Waits, then adds."""
    await asyncio.sleep(0.5)
    return str(a + b)


def script(steps, name="add"):
    msgs = [AIMessage(content="", tool_calls=[{"name": name, "args": {"a": i, "b": 1}, "id": f"c{i}"}]) for i in range(steps)]
    return msgs + [AIMessage(content="done")]


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    model = FakeToolModel(messages=iter(()))
    agent = create_react_agent(model, [add])
    for _ in range(20):
        model.messages = iter(script(steps))
        agent.invoke({"messages": [("user", "go")]})
    t0 = time.perf_counter()
    for _ in range(runs):
        model.messages = iter(script(steps))
        out = agent.invoke({"messages": [("user", "go")]})
        assert out["messages"][-1].content == "done"
    per_step = (time.perf_counter() - t0) * 1e6 / (runs * (steps + 1))
    print(f"langgraph: {runs} runs x {steps + 1} steps: {per_step:.1f} µs per step")
    print(f"LANGGRAPH_STEP_US={per_step:.3f}")

    async def concurrent(n=500):
        before = rss_kb()
        tasks = []
        for _ in range(n):
            m = FakeToolModel(messages=iter(script(steps, "slow_add")))
            a = create_react_agent(m, [slow_add])
            tasks.append(asyncio.create_task(a.ainvoke({"messages": [("user", "go")]})))
        await asyncio.sleep(0.2)
        during = rss_kb()
        await asyncio.gather(*tasks)
        return (during - before) / n

    per_run = asyncio.run(concurrent())
    print(f"langgraph: 500 concurrent runs: {per_run:.1f} KiB resident per run")
    print(f"LANGGRAPH_RUN_KB={per_run:.2f}")


if __name__ == "__main__":
    main()
