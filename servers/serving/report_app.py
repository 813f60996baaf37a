"""The run report as an MCP Apps view (the ``io.modelcontextprotocol/ui`` extension, SEP-1865, stable 2026-01-26).

``trace_get_run`` and ``roles_run`` name the UI resource ``ui://trace/run-report`` in their tool ``_meta.ui``. A
host that supports MCP Apps renders that resource in a sandboxed iframe and passes it the tool's result; the view
reads the run's report resource (``report_uri`` in the result, :func:`aisac_servers.adapters.trace.run_report_page`) back
through the host (``resources/read``) and shows it: the same page as the dashboard's run page and the HTML export.
Hosts without the extension show the tool result as usual and can read ``report_uri`` themselves.

The view speaks the extension's JSON-RPC over ``postMessage`` itself (about 40 lines below: ``ui/initialize``,
``ui/notifications/initialized``, ``ui/notifications/tool-result``, ``resources/read``,
``ui/notifications/size-changed``): no library, no network, no external resource.
"""

from __future__ import annotations

#: the UI resource as the suite mounts it (the trace server registers ``ui://run-report`` under ``trace``)
VIEW_URI = "ui://trace/run-report"
#: MIME type of an MCP Apps HTML view
VIEW_MIME = "text/html;profile=mcp-app"
#: the extension revision the view speaks
PROTOCOL_VERSION = "2026-01-26"

VIEW_HTML = """<!doctype html><html lang=en><head><meta charset=utf-8><title>aisac run report</title>
<meta name=viewport content='width=device-width,initial-scale=1'>
<style>body{font:14px/1.5 system-ui,sans-serif;margin:0;padding:1em;color:#57606a}</style></head>
<body><p id=status>Loading the run report…</p>
<script>
(() => {
  const pending = new Map(); let next = 1;
  const send = (msg) => window.parent.postMessage(msg, '*');
  const request = (method, params) => new Promise((resolve, reject) => {
    const id = next++; pending.set(id, {resolve, reject}); send({jsonrpc: '2.0', id, method, params});
  });
  const notify = (method, params) => send({jsonrpc: '2.0', method, params: params || {}});
  const status = document.getElementById('status');
  const size = () => notify('ui/notifications/size-changed',
    {width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight});
  async function show(result) {
    const sc = (result && result.structuredContent) || {};
    const answer = sc.answer && sc.answer.text;
    if (!sc.report_uri) { status.textContent = 'This result names no run report.'; size(); return; }
    try {
      const res = await request('resources/read', {uri: sc.report_uri});
      const html = res && res.contents && res.contents[0] && res.contents[0].text;
      if (!html) throw new Error('the report is empty');
      const doc = new DOMParser().parseFromString(html, 'text/html');
      document.head.replaceChildren(...doc.head.childNodes);
      document.body.replaceChildren(...doc.body.childNodes);
    } catch (err) {
      status.textContent = 'The run report could not be loaded (' + ((err && err.message) || err) + ').'
        + (answer ? ' Answer: ' + answer : '');
    }
    size();
  }
  window.addEventListener('message', (e) => {
    const m = e.data;
    if (e.source !== window.parent || !m || m.jsonrpc !== '2.0') return;
    if (!m.method && pending.has(m.id)) {
      const p = pending.get(m.id); pending.delete(m.id);
      if (m.error) p.reject(new Error(m.error.message)); else p.resolve(m.result);
    } else if (m.method === 'ui/notifications/tool-result') {
      show(m.params);
    } else if (m.method && m.id !== undefined) {
      send({jsonrpc: '2.0', id: m.id, result: {}});  // e.g. ui/resource-teardown: nothing to clean up
    }
  });
  request('ui/initialize', {protocolVersion: '__VERSION__', appInfo: {name: 'aisac-run-report', version: '1'},
                            appCapabilities: {}})
    .then(() => notify('ui/notifications/initialized'))
    .catch((err) => { status.textContent = 'The host did not start this view: ' + err.message; });
})();
</script></body></html>
""".replace("__VERSION__", PROTOCOL_VERSION)
