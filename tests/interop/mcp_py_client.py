#!/usr/bin/env python3
"""Drives an MCP server with the official Python SDK client (PyPI mcp 2.x).

    python mcp_py_client.py stdio COMMAND [ARGS...]   |   python mcp_py_client.py http URL

Lists the tools, calls `calculate` with "(2 + 3) * 4" and with a bad argument, and prints one
JSON line: {"tools": [...], "protocol": ..., "result": ..., "bad": {"isError": ...}}.
"""
import asyncio
import json
import sys

from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters


async def main():
    if sys.argv[1] == "stdio":
        target = StdioServerParameters(command=sys.argv[2], args=sys.argv[3:])
    else:
        target = sys.argv[2]
    async with Client(target) as client:
        tools = await client.list_tools()
        ok = await client.call_tool("calculate", {"expression": "(2 + 3) * 4"})
        bad = await client.call_tool("calculate", {"expression": 5})
        out = {
            "tools": sorted(t.name for t in tools.tools),
            "result": [c.text for c in ok.content if getattr(c, "type", "") == "text"],
            "structured": ok.structured_content,
            "bad": {"isError": bad.is_error, "text": [c.text for c in bad.content if getattr(c, "type", "") == "text"]},
        }
        print(json.dumps(out))


asyncio.run(main())
