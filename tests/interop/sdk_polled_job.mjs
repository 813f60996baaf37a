// The TypeScript SDK client (@modelcontextprotocol/sdk 1.32) at protocol 2025-11-25 running index jobs of
// `aisac serve` (stdio, through the store's owner) the way that version allows: no tasks, so a polled job.
//
// usage: node sdk_polled_job.mjs <path of the aisac script> <folder to index as a polled job> <folder to index with wait>
//
// The SDK asks for its LATEST_PROTOCOL_VERSION, 2025-11-25, in `initialize`, and accepts any version of its
// SUPPORTED_PROTOCOL_VERSIONS in the answer; the version the server chose is what the client hands to the transport's
// setProtocolVersion (defined here on the stdio transport to read it), and the run fails unless it is 2025-11-25.
// Steps: tools/list (no tool lists execution.taskSupport at this version, no tasks capability), rag_index without
// wait returns a job, rag_job_status is polled until the job ends (its `done` count never goes back), then rag_index
// with wait=true and a progress token: the progress notifications (one or more) strictly increase, up to the job's
// `done`.
// Prints one JSON line per check; exit code 0 when every check held.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [aisac, polled, waited] = process.argv.slice(2);
const VERSION = "2025-11-25";
const ENDED = new Set(["done", "failed", "interrupted", "cancelled"]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let failed = false;
const check = (ok, what, data) => {
  console.log(JSON.stringify({ check: what, ok: Boolean(ok), data }));
  if (!ok) failed = true;
};

const transport = new StdioClientTransport({ command: aisac, args: ["serve"], env: process.env, stderr: "inherit" });
let negotiated = null;
transport.setProtocolVersion = (v) => {
  negotiated = v;
};
const client = new Client({ name: "aisac-interop-ts-polled", version: "1.0.0" });
const call = async (name, args, options) => {
  const r = await client.callTool({ name, arguments: args }, undefined, options);
  if (r.isError) throw new Error(`${name} failed: ${JSON.stringify(r.content).slice(0, 500)}`);
  return r.structuredContent;
};

try {
  await client.connect(transport);
  check(negotiated === VERSION, "the server answers protocol 2025-11-25", negotiated);
  check(!client.getServerCapabilities()?.tasks, "no tasks capability at 2025-11-25", client.getServerCapabilities());
  const { tools } = await client.listTools();
  const withTasks = tools.filter((t) => t.execution?.taskSupport).map((t) => t.name);
  check(tools.some((t) => t.name === "rag_job_status") && withTasks.length === 0,
    "tools/list: the poll-style job tools, no taskSupport", { tools: tools.length, withTasks });

  // a polled job: rag_index answers at once with the job, rag_job_status follows it to its end
  const job = await call("rag_index", { path: polled });
  check(typeof job.job_id === "string" && typeof job.status === "string",
    "rag_index answers with a job to poll", { job_id: job.job_id, status: job.status });
  const polls = [];
  let st = job;
  for (let i = 0; i < 600 && !ENDED.has(st.status); i++) {
    await sleep(100);
    st = await call("rag_job_status", { job_id: job.job_id });
    polls.push([st.status, st.done, st.total]);
  }
  const dones = polls.map((p) => p[1] ?? 0);
  check(st.status === "done" && st.done === st.total && st.total > 0 && st.counters?.files_indexed === st.total,
    "rag_job_status polled until done, every file indexed", { status: st.status, done: st.done, total: st.total,
      counters: st.counters, polls: polls.length });
  check(dones.every((d, i) => i === 0 || d >= dones[i - 1]), "polled done counts never go back", dones);

  // the same version's foreground form: wait=true streams progress notifications on the call's token
  const progress = [];
  const res = await call("rag_index", { path: waited, wait: true, timeout_s: 300 }, {
    onprogress: (p) => progress.push(p.progress),
    timeout: 300000,
  });
  check(res.status === "done" && res.done === res.total && res.total > 0 && res.counters?.files_indexed === res.total,
    "rag_index wait=true ends done, every file indexed", { status: res.status, done: res.done, total: res.total,
      counters: res.counters });
  // at least one notification, each above the last and none above the job's `done`: a job of three small files may
  // end before the server's first look at it (one notification, already `done`), and a notification sent as the
  // job ends may reach the client after the result, which then no longer listens for it (seen: [0] for a job of 3;
  // MCP 2025-11-25 "Progress" requires increasing values, not a last notification at completion)
  check(progress.length >= 1 && progress.every((v, i) => (i === 0 || v > progress[i - 1]) && v <= res.done),
    "progress notifications strictly increase, up to done", progress);
} catch (err) {
  check(false, "no protocol error", String(err));
} finally {
  await client.close();
}
process.exit(failed ? 1 : 0);
