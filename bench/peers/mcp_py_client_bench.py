"""tools/call round trips with the official Python SDK client (PyPI mcp 2.x) against npm
server-everything over stdio and Streamable HTTP, as agentry's mcp_roundtrip example does.

    python mcp_py_client_bench.py PATH/TO/server-everything/dist/index.js
"""
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time

from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters


async def rounds(target, n=300):
    async with Client(target) as c:
        for _ in range(20):
            await c.call_tool("echo", {"message": "hi"})
        v = []
        for _ in range(n):
            t = time.perf_counter()
            await c.call_tool("echo", {"message": "hi"})
            v.append((time.perf_counter() - t) * 1e6)
        return statistics.median(v)


def main():
    js = sys.argv[1]
    stdio = asyncio.run(rounds(StdioServerParameters(command="node", args=[js, "stdio"])))
    print(f"python SDK stdio tools/call: median {stdio:.0f} µs")
    print(f"PY_STDIO_US={stdio:.1f}")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    p = subprocess.Popen(["node", js, "streamableHttp"], env={**os.environ, "PORT": str(port)},
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        http = asyncio.run(rounds(f"http://127.0.0.1:{port}/mcp"))
        print(f"python SDK HTTP tools/call: median {http:.0f} µs")
        print(f"PY_HTTP_US={http:.1f}")
    finally:
        p.kill()


main()
