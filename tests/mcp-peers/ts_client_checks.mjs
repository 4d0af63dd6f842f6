// Drives an MCP server with the official TypeScript SDK client (@modelcontextprotocol/sdk).
//   node ts_client_checks.mjs stdio COMMAND [ARGS...]  |  node ts_client_checks.mjs http URL
// Prints one JSON line: tools, the calculate result, and the bad-argument result.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, ...rest] = process.argv.slice(2);
const transport = mode === "stdio"
  ? new StdioClientTransport({ command: rest[0], args: rest.slice(1), stderr: "ignore" })
  : new StreamableHTTPClientTransport(new URL(rest[0]));
const client = new Client({ name: "ts-checks", version: "1.0.0" });
await client.connect(transport);
const tools = await client.listTools();
const ok = await client.callTool({ name: "calculate", arguments: { expression: "(2 + 3) * 4" } });
const bad = await client.callTool({ name: "calculate", arguments: { expression: 5 } });
console.log(JSON.stringify({
  protocol: client.getServerVersion()?.name,
  tools: tools.tools.map((t) => t.name).sort(),
  result: ok.content.filter((c) => c.type === "text").map((c) => c.text),
  structured: ok.structuredContent ?? null,
  bad: { isError: bad.isError ?? false, text: bad.content.filter((c) => c.type === "text").map((c) => c.text) },
}));
await client.close();
