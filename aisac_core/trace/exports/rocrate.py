"""The Workflow Run RO-Crate export of a run (https://w3id.org/ro/wfrun/workflow/0.5), built with ``rocrate``."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aisac_core.evidence.anchor import find_anchors
from aisac_core.trace.exports.bundle import BUNDLE_FORMAT, safe_name
from aisac_core.trace.exports.markdown import export_markdown
from aisac_core.trace.exports.prov import export_prov

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

#: the RO-Crate profiles the crate declares (Process Run, Workflow Run, Workflow RO-Crate).
PROFILES = (
    "https://w3id.org/ro/wfrun/process/0.5",
    "https://w3id.org/ro/wfrun/workflow/0.5",
    "https://w3id.org/workflowhub/workflow-ro-crate/1.0",
)


def _status_of(st: str) -> dict[str, str]:
    return {"@id": "http://schema.org/CompletedActionStatus" if st == "ok" else "http://schema.org/FailedActionStatus"}


def export_rocrate(engine: Engine, b: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """A Workflow Run RO-Crate of a run, from its JSON bundle ``b``
    (:func:`~aisac_core.trace.exports.bundle.export_bundle`).

    Written to ``<out_dir>/<run>-rocrate/`` (folder; the trace service passes ``<data dir>/trace_exports``) and
    ``<run>-rocrate.zip``. Content: the JSON bundle (``trace.json``, the run's machine-readable
    description, typed ``ComputationalWorkflow`` as the crate's main entity), ``trace.md`` and ``prov.json``; one
    ``CreateAction`` for the run (instrument: the bundle) and one per tool call / role step (instrument: a
    ``SoftwareApplication`` per tool; object: the cited documents and input files as ``File`` entities referenced
    by ``file://`` URI, not copied; result: a ``PropertyValue`` with the result's sha256; ``actionStatus``
    Completed/Failed). Returns ``{path, zip, summary: {events, actions, files, tools, conforms_to}}``. Raises
    TraceError for an unknown run."""
    from rocrate.model.contextentity import ContextEntity  # heavy imports, needed only for this export
    from rocrate.rocrate import ROCrate

    run_id = b["run"]["run_id"]
    base = out_dir / f"{safe_name(run_id)}-rocrate"
    profiles = list(PROFILES)
    work = Path(tempfile.mkdtemp(prefix="aisac-crate-"))
    try:
        (work / "trace.json").write_text(json.dumps(b, indent=1, ensure_ascii=False), encoding="utf-8")
        (work / "trace.md").write_text(export_markdown(engine, run_id), encoding="utf-8")
        (work / "prov.json").write_text(json.dumps(export_prov(b), indent=1), encoding="utf-8")
        crate = ROCrate()
        crate.name = f"aisac run {run_id}"
        crate.description = (
            f"Provenance of aisac run {run_id}: {b['run']['events']} events, "
            f"{b['run']['errors']} errors, servers {', '.join(b['run']['servers'])}"
        )
        for p in profiles:
            crate.add(
                ContextEntity(
                    crate,
                    p,
                    properties={"@type": "CreativeWork", "name": p.rsplit("/", 2)[-2], "version": p.rsplit("/", 1)[-1]},
                )
            )
        crate.root_dataset["conformsTo"] = [{"@id": p} for p in profiles]
        lang = crate.add(
            ContextEntity(
                crate,
                "https://aisac.invalid/trace-bundle",
                properties={"@type": "ComputerLanguage", "name": "aisac trace bundle", "alternateName": BUNDLE_FORMAT},
            )
        )
        wf = crate.add_file(
            work / "trace.json",
            "trace.json",
            properties={
                "@type": ["File", "SoftwareSourceCode", "ComputationalWorkflow"],
                "name": "aisac trace bundle",
                "encodingFormat": "application/json",
                "programmingLanguage": {"@id": lang.id},
            },
        )
        crate.mainEntity = wf
        crate.add_file(
            work / "trace.md", "trace.md", properties={"name": "human summary", "encodingFormat": "text/markdown"}
        )
        crate.add_file(
            work / "prov.json", "prov.json", properties={"name": "W3C PROV-JSON", "encodingFormat": "application/json"}
        )
        apps: dict[str, Any] = {}
        files: dict[str, Any] = {}

        def file_ent(path: str, sha: str | None) -> Any:
            if path not in files:
                uri = Path(path).resolve().as_uri() if path.startswith("/") else path
                files[path] = crate.add(
                    ContextEntity(
                        crate,
                        uri,
                        properties={"@type": "File", "name": Path(path).name, **({"sha256": sha} if sha else {})},
                    )
                )
                crate.root_dataset.append_to("hasPart", files[path])  # RO-Crate 1.2: data entities are parts
            return files[path]

        run = b["run"]
        crate.add_action(
            wf,
            identifier="#run",
            properties={
                "name": f"aisac run {run_id}",
                "startTime": run["started_at"],
                "endTime": run["last_event_at"],
                "actionStatus": _status_of(run["status"]),
            },
        )
        inputs_by_event: dict[int, list[dict[str, Any]]] = {}
        for i in b["inputs"]:
            inputs_by_event.setdefault(i["event_id"], []).append(i)
        for e in b["events"]:
            key = f"{e['kind']}:{e['tool']}"
            if key not in apps:
                apps[key] = crate.add(
                    ContextEntity(
                        crate,
                        f"#tool-{re.sub(r'[^A-Za-z0-9_.-]', '_', key)}",
                        properties={
                            "@type": "SoftwareApplication",
                            "name": e["tool"],
                            "description": f"aisac {e['kind']} ({e['server']})",
                        },
                    )
                )
            objs = [
                file_ent(a.get("path") or "", a.get("sha256")) for a in find_anchors(e.get("result")) if a.get("path")
            ]
            objs += [file_ent(i["path"], i["sha256"]) for i in inputs_by_event.get(e["id"], [])]
            objs = list({o.id: o for o in objs}.values())
            res = crate.add(
                ContextEntity(
                    crate,
                    f"#result-{e['id']}",
                    properties={
                        "@type": "PropertyValue",
                        "name": "result sha256",
                        "value": e["result_sha256"] or "",
                        "description": e["result_summary"][:300],
                    },
                )
            )
            props = {
                "name": f"{e['tool']} (event {e['id']})",
                "startTime": e["started_at"],
                "endTime": e["created_at"],
                "actionStatus": _status_of(e["status"]),
                "description": e["kind"],
            }
            if e["error"]:
                props["error"] = e["error"]
            if e["parent_id"] is not None:
                props["isPartOf"] = {"@id": f"#event-{e['parent_id']}"}
            crate.add_action(apps[key], identifier=f"#event-{e['id']}", object=objs, result=[res], properties=props)
        if base.exists():
            shutil.rmtree(base)
        crate.write(base)
        zip_path = crate.write_zip(str(base) + ".zip")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "path": str(base),
        "zip": str(zip_path),
        "summary": {
            "events": run["events"],
            "actions": run["events"] + 1,
            "files": len(files),
            "tools": len(apps),
            "conforms_to": profiles,
        },
    }
