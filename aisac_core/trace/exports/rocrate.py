"""The Workflow Run RO-Crate export of a run (https://w3id.org/ro/wfrun/workflow/0.5 on RO-Crate 1.1), built with
``rocrate``; it satisfies every REQUIRED and RECOMMENDED check of the RO-Crate validator (``roc-validator``) for
the profiles it declares (``tests/test_trace_validators.py``)."""

from __future__ import annotations

import json
import mimetypes
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aisac_core.evidence.anchor import find_anchors
from aisac_core.trace.exports.bundle import BUNDLE_FORMAT, safe_name
from aisac_core.trace.exports.markdown import export_markdown
from aisac_core.trace.exports.prov import export_prov
from aisac_core.trace.exports.software import AISAC_URL, aisac_version, end_ms, iso_ms, software_pins, start_ms
from aisac_core.trace.lineage import data_lineage

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

#: the RO-Crate version the crate is written in: the Workflow Run Crate 0.5 profiles build on RO-Crate 1.1
#: (https://www.researchobject.org/workflow-run-crate/profiles/0.5/workflow_run_crate/), as Workflow RO-Crate 1.0 does.
ROCRATE_VERSION = "1.1"
#: the RO-Crate profiles the crate declares (Process Run, Workflow Run, Workflow RO-Crate), all on RO-Crate 1.1.
PROFILES = (
    "https://w3id.org/ro/wfrun/process/0.5",
    "https://w3id.org/ro/wfrun/workflow/0.5",
    "https://w3id.org/workflowhub/workflow-ro-crate/1.0",
)
#: the licence of the crate's content (SPDX) unless the caller names another.
DEFAULT_LICENSE = "https://spdx.org/licenses/CC-BY-4.0"
#: the crate's author (the person who ran aisac) and publisher, by default (aisac records neither).
DEFAULT_AUTHOR = "the person who ran aisac (not recorded by aisac)"
DEFAULT_PUBLISHER = "the organisation of the person who ran aisac (not recorded by aisac)"
#: the Bioschemas profile the main workflow conforms to (Workflow RO-Crate 1.0 recommends it).
BIOSCHEMAS_WORKFLOW = "https://bioschemas.org/profiles/ComputationalWorkflow/1.0-RELEASE"
#: the Process Run Crate's action statuses (schema.org ActionStatusType), written as plain IRIs.
COMPLETED, FAILED = "http://schema.org/CompletedActionStatus", "http://schema.org/FailedActionStatus"


#: event statuses without an outcome yet (a role step at work, or waiting for the client's sampling reply): their
#: actions carry no ``actionStatus`` (the Process Run Crate allows only Completed and Failed).
UNFINISHED = ("running", "input_required")


def _status_of(st: str) -> str:
    return COMPLETED if st == "ok" else FAILED


def _one(xs: list[Any]) -> Any:
    """A single value for a one-element list (RO-Crate 1.1 writes a single value, not a singleton array)."""
    return xs[0] if len(xs) == 1 else xs


def export_rocrate(
    engine: Engine,
    b: dict[str, Any],
    out_dir: Path,
    *,
    license: str = DEFAULT_LICENSE,
    author: str = DEFAULT_AUTHOR,
    publisher: str = DEFAULT_PUBLISHER,
    publisher_url: str = AISAC_URL,
) -> dict[str, Any]:
    """A Workflow Run RO-Crate (RO-Crate 1.1; profiles ``PROFILES``) of a run, from its JSON bundle ``b``
    (:func:`~aisac_core.trace.exports.bundle.export_bundle`).

    Written to ``<out_dir>/<run>-rocrate/`` (folder; the trace service passes ``<data dir>/trace_exports``) and
    ``<run>-rocrate.zip``. Content: the JSON bundle (``trace.json``, the run's machine-readable description, typed
    ``ComputationalWorkflow`` as the crate's main entity), ``README.md`` (the Markdown export, about the crate) and
    ``prov.json``; one ``CreateAction`` for the run (instrument: the bundle) and one per tool call / role step /
    model call (instrument: a ``SoftwareApplication`` per tool with aisac's ``version`` and ``url``; agent: the
    person who ran aisac; object: the cited documents, input files and the files of the frames it used, as
    ``File`` entities referenced by ``file://`` URI, not copied; result: a ``PropertyValue`` with the result's
    sha256 and the files a cell wrote; start and end time in milliseconds; ``actionStatus``
    ``http://schema.org/CompletedActionStatus`` or ``FailedActionStatus`` with ``error``; none for a step still
    running or waiting for the client), each listed from the root by ``mentions``. ``license``: the licence of
    the crate (an SPDX URI); ``author`` (a ``Person``, also each action's ``agent``) and ``publisher`` (an
    ``Organization``, the author's affiliation, at ``publisher_url``): names (aisac records neither: the defaults
    say so). Returns ``{path, zip, summary: {events, actions, files, tools, conforms_to}}``. Raises TraceError
    for an unknown run."""
    # long function: one JSON-LD graph, each entity's properties listed in place as the RO-Crate profiles name them
    from rocrate.model.contextentity import ContextEntity  # heavy imports, needed only for this export
    from rocrate.rocrate import ROCrate

    run_id = b["run"]["run_id"]
    base = out_dir / f"{safe_name(run_id)}-rocrate"
    profiles = list(PROFILES)
    version = aisac_version(b)
    lineage = data_lineage(b["events"])
    work = Path(tempfile.mkdtemp(prefix="aisac-crate-"))
    try:
        (work / "trace.json").write_text(json.dumps(b, indent=1, ensure_ascii=False), encoding="utf-8")
        (work / "README.md").write_text(export_markdown(engine, run_id), encoding="utf-8")
        (work / "prov.json").write_text(json.dumps(export_prov(b), indent=1), encoding="utf-8")
        crate = ROCrate(version=ROCRATE_VERSION)
        crate.name = f"aisac run {run_id}"
        crate.description = (
            f"Provenance of aisac run {run_id}: {b['run']['events']} events, "
            f"{b['run']['errors']} errors, servers {', '.join(b['run']['servers'])}"
        )
        # a term RO-Crate 1.1's context lacks (it was added in 1.2), declared as the specification advises
        crate.metadata.extra_terms = {"sha256": "http://schema.org/sha256"}
        crate.root_dataset["datePublished"] = iso_ms(end_ms(b["exported_at"]))
        lic = crate.add(
            ContextEntity(crate, license, properties={"@type": "CreativeWork", "name": license.rsplit("/", 1)[-1]})
        )
        crate.root_dataset["license"] = {"@id": lic.id}
        for p in profiles:
            crate.add(
                ContextEntity(
                    crate,
                    p,
                    properties={"@type": "CreativeWork", "name": p.rsplit("/", 2)[-2], "version": p.rsplit("/", 1)[-1]},
                )
            )
        crate.root_dataset["conformsTo"] = [{"@id": p} for p in profiles]
        crate.metadata["conformsTo"] = [
            {"@id": f"https://w3id.org/ro/crate/{ROCRATE_VERSION}"},
            {"@id": "https://w3id.org/workflowhub/workflow-ro-crate/1.0"},
        ]
        software = crate.add(
            ContextEntity(
                crate,
                AISAC_URL,
                properties={"@type": "SoftwareApplication", "name": "aisac", "url": AISAC_URL, "version": version},
            )
        )
        pins = [
            crate.add(ContextEntity(crate, f"#pin-{k}", properties={"@type": "PropertyValue", "name": k, "value": v}))
            for k, v in software_pins(b).items()
        ]
        if pins:  # the models and parser revision that shaped the run
            software["additionalProperty"] = _one([{"@id": p.id} for p in pins])
        lang = crate.add(
            ContextEntity(
                crate,
                f"{AISAC_URL}trace-bundle",
                properties={
                    "@type": "ComputerLanguage",
                    "name": "aisac trace bundle",
                    "alternateName": BUNDLE_FORMAT,
                    "url": {"@id": f"{AISAC_URL}trace-bundle"},
                    "version": BUNDLE_FORMAT.rsplit("/", 1)[-1],
                },
            )
        )
        operator = crate.add(ContextEntity(crate, "#operator", properties={"@type": "Person", "name": author}))
        org = crate.add(
            ContextEntity(
                crate, "#publisher", properties={"@type": "Organization", "name": publisher, "url": publisher_url}
            )
        )
        operator["affiliation"] = {"@id": org.id}
        crate.root_dataset["author"] = {"@id": operator.id}
        crate.root_dataset["publisher"] = {"@id": org.id}
        crate.add(
            ContextEntity(
                crate,
                BIOSCHEMAS_WORKFLOW,
                properties={"@type": "CreativeWork", "name": "Bioschemas ComputationalWorkflow", "version": "1.0"},
            )
        )
        wf = crate.add_file(
            work / "trace.json",
            "trace.json",
            properties={
                "@type": ["File", "SoftwareSourceCode", "ComputationalWorkflow"],
                "name": "aisac trace bundle: the run's steps",
                "encodingFormat": "application/json",
                "programmingLanguage": {"@id": lang.id},
                "version": version,
                "url": AISAC_URL,
                "creator": {"@id": software.id},
                "conformsTo": {"@id": BIOSCHEMAS_WORKFLOW},
            },
        )
        crate.mainEntity = wf
        crate.add_file(
            work / "README.md",
            "README.md",
            properties={
                "name": "human summary",
                "encodingFormat": "text/markdown",
                "about": {"@id": crate.root_dataset.id},
            },
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
                        properties={
                            "@type": "File",
                            "name": Path(path).name,
                            "encodingFormat": mimetypes.guess_type(path)[0] or "application/octet-stream",
                            **({"sha256": sha} if sha else {}),
                        },
                    )
                )
                crate.root_dataset.append_to("hasPart", files[path])  # data entities are parts of the crate
            return files[path]

        run = b["run"]
        run_action = crate.add_action(
            wf,
            identifier="#run",
            properties={
                "name": f"aisac run {run_id}",
                "description": f"the run's {run['events']} events (tool calls, role steps, model calls)",
                "startTime": iso_ms(start_ms(run["started_at"])),
                "endTime": iso_ms(end_ms(run["last_event_at"])),
                "actionStatus": _status_of(run["status"]),
                "agent": {"@id": operator.id},
            },
        )
        if run["status"] != "ok":
            run_action["error"] = f"{run['errors']} of the run's events failed"
        crate.root_dataset.append_to("mentions", run_action)
        top_results: list[Any] = []  # the results of the run's top-level events: the run action's result
        inputs_by_event: dict[int, list[dict[str, Any]]] = {}
        for i in b["inputs"]:
            inputs_by_event.setdefault(i["event_id"], []).append(i)
        for e in b["events"]:
            key = f"{e['kind']}:{e['tool']}"
            if key not in apps:
                apps[key] = crate.add(
                    ContextEntity(
                        crate,
                        f"{AISAC_URL}{e['kind']}/{re.sub(r'[^A-Za-z0-9_.-]', '_', e['tool'])}",
                        properties={
                            "@type": "SoftwareApplication",
                            "name": e["tool"],
                            "description": f"aisac {e['kind']} ({e['server']})",
                            "url": AISAC_URL,
                            "version": version,
                            "isPartOf": {"@id": software.id},
                        },
                    )
                )
            lin = lineage.get(e["id"])
            objs = [
                file_ent(a.get("path") or "", a.get("sha256")) for a in find_anchors(e.get("result")) if a.get("path")
            ]
            objs += [file_ent(i["path"], i["sha256"]) for i in inputs_by_event.get(e["id"], [])]
            if lin is not None:
                objs += [file_ent(f["path"], f.get("sha256")) for f in lin.files_used]
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
            results = [res]
            if lin is not None:
                results += [file_ent(f["path"], f.get("sha256")) for f in lin.files_generated]
            props: dict[str, Any] = {
                "name": f"{e['tool']} (event {e['id']})",
                "startTime": iso_ms(start_ms(e["started_at"])),
                "endTime": iso_ms(end_ms(e["created_at"])),
                "description": f"{e['kind']} {e['tool']}: {e['status']}",
                "agent": {"@id": operator.id},
            }
            if e["status"] not in UNFINISHED:  # a step still running (or waiting for the client) has no outcome yet
                props["actionStatus"] = _status_of(e["status"])
                if e["status"] != "ok":
                    props["error"] = e["error"] or e["status"]
            if e["parent_id"] is not None:
                props["isPartOf"] = {"@id": f"#event-{e['parent_id']}"}
            act = crate.add_action(apps[key], identifier=f"#event-{e['id']}", properties=props)
            if objs:
                act["object"] = _one(objs)
            act["result"] = _one(results)
            if e["parent_id"] is None:
                top_results.append(res)
            crate.root_dataset.append_to("mentions", act)
        if top_results:
            run_action["result"] = _one(top_results)
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
