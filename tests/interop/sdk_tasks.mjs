// The TypeScript SDK client (@modelcontextprotocol/sdk) driving MCP tasks (the io.modelcontextprotocol/tasks
// extension, SEP-2663) of `aisac serve --transport http`.
//
// usage: node sdk_tasks.mjs <MCP URL> <folder to index> <bigger folder to index and cancel>
//
// The SDK's own task support (1.32) speaks the earlier draft (SEP-1686: tasks/result, tasks/list, a nested `task`),
// so the extension's requests go through the SDK client's generic request(), on protocol 2026-07-28 (stateless: no
// initialize; version, client info and the per-request extension opt-in ride in each request's _meta). Prints one
// JSON line per step; exit code 0 when every check held.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { Protocol } from "@modelcontextprotocol/sdk/shared/protocol.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { z } from "zod";

const [url, small, big] = process.argv.slice(2);
const VERSION = "2026-07-28";
const TASKS = "io.modelcontextprotocol/tasks";
const meta = {
  "io.modelcontextprotocol/protocolVersion": VERSION,
  "io.modelcontextprotocol/clientInfo": { name: "aisac-interop-ts-tasks", version: "1.0.0" },
  "io.modelcontextprotocol/clientCapabilities": { extensions: { [TASKS]: {} } },
};
const Any = z.object({}).passthrough();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let failed = false;
const check = (ok, what, data) => {
  console.log(JSON.stringify({ check: what, ok, data }));
  if (!ok) failed = true;
};

// 2026-07-28 routes on headers mirrored from the body (SEP-2243): Mcp-Method, and Mcp-Name for a tool call or task
const routed = (input, init) => {
  const body = typeof init?.body === "string" ? JSON.parse(init.body) : null;
  if (body?.method) {
    const headers = new Headers(init.headers);
    headers.set("mcp-method", body.method);
    const name = body.params?.name ?? body.params?.taskId;
    if (name) headers.set("mcp-name", name);
    init = { ...init, headers };
  }
  return fetch(input, init);
};
const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: routed });
const client = new Client({ name: "aisac-interop-ts-tasks", version: "1.0.0" });
await Protocol.prototype.connect.call(client, transport); // the transport without the legacy initialize handshake
transport.setProtocolVersion(VERSION);
const request = (method, params) => client.request({ method, params: { ...params, _meta: meta } }, Any);

async function runTask(path) {
  const created = await request("tools/call", { name: "rag_index", arguments: { path } });
  check(created.resultType === "task" && typeof created.taskId === "string" && created.status === "working",
    "tools/call answers a task handle", created);
  return created.taskId;
}

try {
  const listed = await request("tools/list", {});
  // 2026-07-28 lists no per-tool task support (the server decides per call); the tool is listed as usual
  check(listed.tools.some((t) => t.name === "rag_index"), "tools/list over 2026-07-28", listed.tools.length);

  let taskId = await runTask(small);
  const messages = [];
  let got;
  for (let i = 0; i < 600; i++) {
    got = await request("tasks/get", { taskId });
    if (got.status !== "working") break;
    if (got.statusMessage) messages.push(got.statusMessage);
    await sleep(200);
  }
  check(got.status === "completed" && got.result?.structuredContent?.status === "done",
    "tasks/get inlines the finished result", { status: got.status, job: got.result?.structuredContent?.status });
  check(messages.some((m) => m.includes("files")), "tasks/get reports progress in statusMessage", messages.slice(-3));

  taskId = await runTask(big);
  for (let i = 0; i < 3000; i++) {
    got = await request("tasks/get", { taskId });
    const m = got.statusMessage ?? "";
    if (got.status !== "working" || (m && !m.startsWith("queued") && !m.startsWith("running: 0/"))) break;
    await sleep(100);
  }
  await request("tasks/cancel", { taskId });
  for (let i = 0; i < 300; i++) {
    got = await request("tasks/get", { taskId });
    if (got.status !== "working") break;
    await sleep(200);
  }
  check(got.status === "cancelled", "tasks/cancel ends the task cancelled", got.status);
} catch (err) {
  check(false, "no protocol error", String(err));
} finally {
  await client.close();
}
process.exit(failed ? 1 : 0);
