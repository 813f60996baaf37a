// An outside MCP client: the official TypeScript SDK (@modelcontextprotocol/sdk) talking to `aisac serve` over stdio.
//
// usage: node sdk_client.mjs <path of the aisac script> '<JSON plan>'
//   plan: [{"server": "rag", "tool": "rag_search", "arguments": {...}}, ...]
// For each entry it starts `aisac serve <server>` (environment inherited: AISAC_DATA_DIR etc.), lists the tools,
// calls the tool, and prints one JSON line {server, tool, tools, isError, text, structured}. Exit code 0 when
// every call returned a result that is not an error, 1 otherwise.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [aisac, planJson] = process.argv.slice(2);
const plan = JSON.parse(planJson);
let failed = false;
for (const step of plan) {
  const transport = new StdioClientTransport({ command: aisac, args: ["serve", step.server], env: process.env, stderr: "inherit" });
  const client = new Client({ name: "aisac-interop-ts", version: "1.0.0" });
  try {
    await client.connect(transport);
    const { tools } = await client.listTools();
    const result = await client.callTool({ name: step.tool, arguments: step.arguments ?? {} });
    const text = (result.content ?? []).map((c) => c.text ?? "").join(" ");
    console.log(JSON.stringify({ server: step.server, tool: step.tool, tools: tools.map((t) => t.name),
      isError: Boolean(result.isError), text: text.slice(0, 500), structured: result.structuredContent ?? null }));
    if (result.isError) failed = true;
  } catch (err) {
    console.log(JSON.stringify({ server: step.server, tool: step.tool, error: String(err) }));
    failed = true;
  } finally {
    await client.close();
  }
}
process.exit(failed ? 1 : 0);
