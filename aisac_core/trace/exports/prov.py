"""The W3C PROV-JSON export of a run (https://www.w3.org/Submission/prov-json/), built with the ``prov`` package."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from aisac_core.evidence.anchor import find_anchors
from aisac_core.hashing import sha256_text
from aisac_core.trace.exports.bundle import safe_name


def export_prov(b: dict[str, Any]) -> dict[str, Any]:
    """W3C PROV-JSON of a run, from its JSON bundle ``b`` (:func:`~aisac_core.trace.exports.bundle.export_bundle`).

    Tool calls, role steps and model calls are activities (start/end times, status); servers and roles are
    agents (``wasAssociatedWith``); the run is a bundle-level activity that ``wasInformedBy`` nothing and
    each top-level step ``wasInformedBy`` its parent step; each result is an entity (``wasGeneratedBy``,
    attribute ``aisac:sha256``); each cited document is an entity (``aisac:sha256`` of the file) that the
    result ``wasDerivedFrom`` and the activity ``used``; pinned input files likewise. Returns the PROV-JSON
    document as a dict."""
    from prov.model import ProvDocument  # a heavy import, needed only for this export (start-up time)

    run_id = b["run"]["run_id"]
    doc = ProvDocument()
    doc.set_default_namespace("https://aisac.invalid/")
    doc.add_namespace("aisac", "https://aisac.invalid/ns#")
    run_act = doc.activity(
        f"run/{safe_name(run_id)}",
        datetime.fromisoformat(b["run"]["started_at"]),
        datetime.fromisoformat(b["run"]["last_event_at"]),
        {"prov:type": "aisac:Run", "aisac:run_id": run_id},
    )
    agents: dict[str, Any] = {}
    docs: dict[str, Any] = {}

    def agent(name: str, kind: str) -> Any:
        key = f"{kind}/{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}"
        if key not in agents:
            agents[key] = doc.agent(key, {"prov:type": "prov:SoftwareAgent", "aisac:kind": kind, "aisac:name": name})
        return agents[key]

    def document(path: str, sha: str | None) -> Any:
        key = f"file/{sha or sha256_text(path)}"
        if key not in docs:
            docs[key] = doc.entity(
                key, {"prov:type": "aisac:Document", "prov:location": path, "aisac:sha256": sha or ""}
            )
        return docs[key]

    acts: dict[int, Any] = {}
    for e in b["events"]:
        act = doc.activity(
            f"event/{e['id']}",
            datetime.fromisoformat(e["started_at"]),
            datetime.fromisoformat(e["created_at"]),
            {
                "prov:type": f"aisac:{e['kind']}",
                "prov:label": e["tool"],
                "aisac:tool": e["tool"],
                "aisac:status": e["status"],
                "aisac:latency_ms": e["latency_ms"],
                "aisac:arguments_sha256": e["arguments_sha256"],
            },
        )
        acts[e["id"]] = act
        who = agent(e["tool"], "role") if e["kind"] == "role_step" else agent(e["server"], "server")
        doc.wasAssociatedWith(act, who)
        parent = acts.get(e["parent_id"]) if e["parent_id"] is not None else None
        doc.wasInformedBy(act, parent if parent is not None else run_act)
        if e["result_sha256"]:
            res = doc.entity(
                f"result/{e['id']}",
                {
                    "prov:type": "aisac:Result",
                    "aisac:sha256": e["result_sha256"],
                    "prov:label": e["result_summary"][:200],
                },
            )
            doc.wasGeneratedBy(res, act)
            for a in find_anchors(e["result"]):
                d = document(a.get("path") or "", a.get("sha256"))
                doc.used(act, d)
                doc.wasDerivedFrom(res, d)
    for i in b["inputs"]:
        user = acts.get(i["event_id"])
        if user is not None:
            doc.used(user, document(i["path"], i["sha256"]))
    text = doc.serialize(format="json")
    assert text is not None  # serialize returns the text when given no destination
    out: dict[str, Any] = json.loads(text)
    return out
