"""Independent validators of the provenance exports, run offline: the RO-Crate validator (``roc-validator``,
crs4) with its HTTP cache pre-loaded from the JSON-LD context ro-crate-py ships, ``runcrate report`` (in its own
environment: it pins ``prov==1.5.1``), and a JSON Schema of the PROV-JSON submission's rules."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

#: JSON Schema of the W3C PROV-JSON Member Submission (Huynh et al. 2013), written for aisac from that document.
PROV_JSON_SCHEMA = Path(__file__).parent / "schemas" / "prov-json.schema.json"
#: the RO-Crate JSON-LD contexts a crate may name, served from ro-crate-py's shipped context document (RO-Crate
#: 1.3's; no installed package ships 1.1's). For 1.1 the four Bioschemas terms take their RO-Crate 1.1 IRIs (the
#: IRIs roc-validator's 1.1-based profiles test); every other 1.1 term has the same IRI in 1.3, which also defines
#: terms 1.1 lacks (the crate declares its one such term, ``sha256``, itself).
RO_CRATE_11_BIOSCHEMAS = {
    "ComputationalWorkflow": "https://bioschemas.org/ComputationalWorkflow",
    "FormalParameter": "https://bioschemas.org/FormalParameter",
    "input": "https://bioschemas.org/ComputationalWorkflow#input",
    "output": "https://bioschemas.org/ComputationalWorkflow#output",
}
CONTEXT_URLS = ("https://w3id.org/ro/crate/1.1/context", "https://w3id.org/ro/crate/1.3/context")


def preload_context_cache(cache_dir: Path) -> str:
    """A requests-cache SQLite file (roc-validator's HTTP cache) holding the RO-Crate JSON-LD contexts, built
    from the copy in the installed ``rocrate`` package, so validation in offline mode never touches the network.
    Returns the cache path to pass as ``cache_path``."""
    import io

    import requests
    from requests_cache import CachedSession
    from rocrate import __file__ as rocrate_init
    from urllib3.response import HTTPResponse

    shipped = json.loads((Path(rocrate_init).parent / "data" / "ro-crate.jsonld").read_text(encoding="utf-8"))
    terms = dict(shipped["@context"])
    cache_path = str(cache_dir / "roc-validator-cache")
    session = CachedSession(cache_name=cache_path, backend="sqlite", expire_after=-1, allowable_codes=(200,))
    for url in CONTEXT_URLS:
        context = {"@context": {**terms, **(RO_CRATE_11_BIOSCHEMAS if "/1.1/" in url else {})}}
        resp = requests.Response()
        resp.status_code = 200
        resp.url = url
        body = json.dumps(context).encode("utf-8")
        resp._content = body
        resp.headers["Content-Type"] = "application/ld+json"
        resp.raw = HTTPResponse(
            body=io.BytesIO(body),
            headers={"Content-Type": "application/ld+json"},
            status=200,
            preload_content=False,
            request_url=url,
        )
        resp.encoding = "utf-8"
        resp.request = requests.Request(
            "GET", url, headers={"Accept": "application/ld+json, application/json"}
        ).prepare()
        session.cache.save_response(resp)
    session.close()
    return cache_path


#: roc-validator's check "The SoftwareApplication id SHOULD be an absolute URI" (Process Run Crate 0.5), which a
#: crate's own main workflow file fails whenever the crate is validated from a local folder: its relative id
#: resolves to the folder's file:// URI (an open validator issue, https://github.com/crs4/rocrate-validator/issues/51).
ABSOLUTE_ID_CHECK = "process-run-crate-0.5_5.1"


def roc_validate(crate: Path, profile: str, cache_path: str) -> dict[str, list[str]]:
    """Validate ``crate`` (a folder) against ``profile`` (roc-validator's profile identifier, e.g.
    ``workflow-run-crate-0.5``) offline at the RECOMMENDED level. Returns ``{REQUIRED: [...], RECOMMENDED:
    [...]}``: the messages of the failed checks of each severity (empty lists: valid). The one issue of
    ``ABSOLUTE_ID_CHECK`` on the crate's main workflow (``ro-crate-metadata.json``'s ``mainEntity``, a file inside
    the crate) is left out, as ``main_workflow_absolute_id`` (every other issue of that check is kept)."""
    from rocrate_validator import services
    from rocrate_validator.models import Severity, ValidationSettings

    settings = ValidationSettings(
        rocrate_uri=str(crate),
        profile_identifier=profile,
        requirement_severity=Severity.RECOMMENDED,
        offline=True,
        cache_path=cache_path,
        enable_profile_inheritance=True,
    )
    result = services.validate(settings)
    out: dict[str, list[str]] = {"REQUIRED": [], "RECOMMENDED": []}
    meta = json.loads((crate / "ro-crate-metadata.json").read_text(encoding="utf-8"))
    root = next(e for e in meta["@graph"] if e["@id"] == "./")
    main_uri = (crate.resolve() / root["mainEntity"]["@id"]).as_uri()
    for issue in result.get_issues():
        sev = issue.severity.name
        if issue.check.identifier == ABSOLUTE_ID_CHECK and str(issue.violatingPropertyValue) == main_uri:
            out.setdefault("main_workflow_absolute_id", []).append(str(issue.violatingPropertyValue))
            continue
        if sev in out:
            out[sev].append(f"[{issue.check.identifier}] {issue.message}")
    return out


#: where ``make install`` puts runcrate (an environment of its own beside the project's, see the Makefile)
RUNCRATE_VENV = Path(__file__).resolve().parents[1] / ".venv" / "tools" / "runcrate" / "bin" / "runcrate"


def runcrate_exe() -> str | None:
    """The ``runcrate`` command (env ``AISAC_RUNCRATE``, else the one ``make install`` puts in
    ``.venv/tools/runcrate``, else on PATH), or None. runcrate 0.6.2 pins ``prov==1.5.1`` and aisac needs
    ``prov>=2``: it lives in an environment of its own."""
    exe = os.environ.get("AISAC_RUNCRATE") or (
        str(RUNCRATE_VENV) if RUNCRATE_VENV.exists() else shutil.which("runcrate")
    )
    return exe if exe and Path(exe).exists() else None


def runcrate_report(crate: Path) -> str:
    """``runcrate report <crate>``'s output (raises CalledProcessError when it fails)."""
    exe = runcrate_exe()
    assert exe is not None
    return subprocess.run([exe, "report", str(crate)], check=True, capture_output=True, text=True, timeout=120).stdout


def prov_schema_errors(doc: dict[str, Any]) -> list[str]:
    """Every violation of ``PROV_JSON_SCHEMA`` in ``doc``, plus the submission's rule that every prefix used in a
    qualified name is declared (section 2.2, which a JSON Schema cannot express). Empty: valid."""
    import re

    from jsonschema import Draft7Validator

    schema = json.loads(PROV_JSON_SCHEMA.read_text(encoding="utf-8"))
    errors = []
    for e in Draft7Validator(schema).iter_errors(doc):
        # an anyOf (one record, or an array of records): the reasons of the branches whose type matched
        why = "; ".join(c.message for c in e.context or [] if c.validator != "type")
        errors.append(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" + (f" ({why})" if why else ""))
    declared = set((doc.get("prefix") or {}).keys()) | {"prov", "xsd", "_"}

    def check(qn: Any, where: str) -> None:
        if isinstance(qn, str):
            m = re.match(r"^([A-Za-z_][\w.-]*):", qn)
            if m and m.group(1) not in declared:
                errors.append(f"{where}: prefix {m.group(1)!r} of {qn!r} is not declared")

    for kind, recs in doc.items():
        if kind == "prefix" or not isinstance(recs, dict):
            continue
        for ident, rec in recs.items():
            check(ident, f"{kind}/{ident}")
            for key, val in (rec or {}).items() if isinstance(rec, dict) else []:
                check(key, f"{kind}/{ident}/{key}")
                if key.startswith("prov:") and isinstance(val, str) and key not in ("prov:label", "prov:location"):
                    if key not in ("prov:startTime", "prov:endTime", "prov:time", "prov:value"):
                        check(val, f"{kind}/{ident}/{key}")
    return errors
