# Minimal MCP server (agentry's test peer; from ../shared/interop) with add, echo, sleep, crash (mcp 2.x: FastMCP was renamed MCPServer).
# usage: python pyserver.py stdio | python pyserver.py http [port]
import os
import sys
from mcp.server.mcpserver import Context, MCPServer

if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
    # The SDK's own spans (one per request, continuing the trace named by the request's
    # `_meta.traceparent`) go to the collector agentry's tracing test runs; exported as each
    # span ends, so a server killed at the end loses none.
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create())
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)

mcp = MCPServer("proto-py", version="0.1.0")

@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

@mcp.tool()
def echo(message: str) -> str:
    """Echo a message back."""
    return message


@mcp.tool()
async def sleep(seconds: float) -> str:
    """Sleep, then answer (a slow server, for timeout and fan-out tests)."""
    import asyncio
    await asyncio.sleep(seconds)
    return "slept"


@mcp.tool()
async def grow(ctx: Context) -> str:
    """Add a tool named `extra` and tell the client its tool list changed."""
    def extra() -> str:
        """A tool that appeared at run time."""
        return "extra!"
    mcp.add_tool(extra)
    await ctx.session.send_tool_list_changed()
    return "grown"


@mcp.tool()
def crash() -> str:
    """Exit the process at once (a crashing server, for restart tests)."""
    import os
    os._exit(3)

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "http":
        port = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
        mcp.run("streamable-http", host="127.0.0.1", port=port)
    else:
        mcp.run("stdio")
