// The TypeScript SDK client (@modelcontextprotocol/sdk) as a host that declares roots (MCP 2025-11-25, "Roots"),
// talking to `aisac serve` over stdio (through the store's owner).
//
// usage: node sdk_roots.mjs <path of the aisac script> <folder A> <folder B>
// Each folder holds <its name>.csv. The client declares the roots capability with folder A as its root, loads A's
// table, is refused B's; then changes its root to B (notifications/roots/list_changed), loads B's, is refused A's.
// It also starts a slow call (rag_index with wait=true on folder A) and cancels it (notifications/cancelled), and
// prints the run id the calls joined. One JSON line per check; exit code 0 when every check held.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { basename } from "node:path";
import { pathToFileURL } from "node:url";

const [aisac, a, b, big] = process.argv.slice(2);
let failed = false;
const check = (ok, what, data) => {
  console.log(JSON.stringify({ check: what, ok, data }));
  if (!ok) failed = true;
};
let roots = [{ uri: pathToFileURL(a).href, name: "A" }];
let asked = 0;
const transport = new StdioClientTransport({ command: aisac, args: ["serve"], env: process.env, stderr: "inherit" });
const client = new Client({ name: "aisac-interop-ts-roots", version: "1.0.0" }, { capabilities: { roots: { listChanged: true } } });
client.setRequestHandler(ListRootsRequestSchema, async () => {
  asked += 1;
  return { roots };
});
const load = async (dir) => {
  const name = basename(dir);
  const r = await client.callTool({ name: "data_load", arguments: { path: `${dir}/${name}.csv`, name } });
  return { isError: Boolean(r.isError), text: (r.content ?? []).map((c) => c.text ?? "").join(" ").slice(0, 300) };
};
try {
  await client.connect(transport);
  let r = await load(a);
  check(!r.isError && asked >= 1, "the host's root is honoured (roots/list asked)", { ...r, asked });
  r = await load(b);
  check(r.isError && /outside/i.test(r.text), "a folder outside the host's roots is refused", r);
  roots = [{ uri: pathToFileURL(b).href, name: "B" }];
  const before = asked;
  await client.sendRootsListChanged();
  for (let i = 0; i < 50 && asked === before; i++) await new Promise((res) => setTimeout(res, 100));
  r = await load(b);
  check(!r.isError && asked > before, "after roots/list_changed the new root is honoured", { ...r, asked });
  r = await load(a);
  check(r.isError && /outside/i.test(r.text), "the old root is no longer reachable", r);
  if (big) {
    roots = [{ uri: pathToFileURL(big).href, name: "big" }];
    await client.sendRootsListChanged();
    await new Promise((res) => setTimeout(res, 500));
    const ctl = new AbortController();
    let first = false;
    const call = client
      .callTool({ name: "rag_index", arguments: { path: big, wait: true }, _meta: { "aisac/run_id": "run-ts-cancelled" } }, undefined, {
        signal: ctl.signal,
        timeout: 600000,
        onprogress: (p) => {
          if (p.progress >= 1 && !first) {
            first = true;
            ctl.abort("the user stopped it"); // the SDK sends notifications/cancelled
          }
        },
      })
      .then(() => "completed", (e) => String(e));
    const outcome = await call;
    check(first && outcome !== "completed" && /abort|cancel|stopped it/i.test(outcome), "a call cancelled after its first file", outcome);
  }
} catch (err) {
  check(false, "no exception", String(err));
} finally {
  await client.close();
}
process.exit(failed ? 1 : 0);
