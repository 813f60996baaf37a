"""OPTIMADE's reference server (optimade-python-tools, FastAPI + mongomock) started on loopback for the tests.

The data: the 17 test structures the ``optimade`` package bundles (``optimade/server/data/test_structures.json``,
Materials-Project-shaped documents), written out under their OPTIMADE names (``id``, ``chemical_formula_reduced``,
``chemical_formula_anonymous``) in the OPTIMADE JSON Lines format the server loads (``insert_from_jsonl``), plus
:data:`OWN_STRUCTURES`: five Li-M-P-O olivines with provider fields ``_exmpl_formation_energy_per_atom``,
``_exmpl_e_above_hull`` and ``_exmpl_band_gap`` (units declared in the server's config, served by
``/v1/info/structures``). Their values are test values of this fixture, not a database's.

``start(tmp)`` returns a :class:`RefServer` (``url``, ``stop()``); it skips the test when the package is missing.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

#: (id, formula, elements, nsites, formation energy eV/atom, energy above hull eV/atom, band gap eV): test values
OWN_STRUCTURES = [
    ("exmpl-olivine-1", "FeLiO4P", ["Fe", "Li", "O", "P"], 28, -2.531, 0.0, 3.69),
    ("exmpl-olivine-2", "LiMnO4P", ["Li", "Mn", "O", "P"], 28, -2.628, 0.0, 3.93),
    ("exmpl-olivine-3", "CoLiO4P", ["Co", "Li", "O", "P"], 28, -2.272, 0.012, 3.86),
    ("exmpl-olivine-4", "LiNiO4P", ["Li", "Ni", "O", "P"], 28, -2.214, 0.0, 4.12),
    ("exmpl-olivine-5", "FeLiO4P", ["Fe", "Li", "O", "P"], 28, -2.488, 0.043, 3.51),
]

CONFIG_FIELDS = [
    {
        "name": "formation_energy_per_atom",
        "unit": "eV/atom",
        "description": "formation energy per atom (test)",
        "type": "float",
    },
    {"name": "e_above_hull", "unit": "eV/atom", "description": "energy above the convex hull (test)", "type": "float"},
    {"name": "band_gap", "unit": "eV", "description": "band gap (test)", "type": "float"},
    {"name": "this_provider_field", "description": "the bundled test structures' provider field", "type": "string"},
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bundled() -> list[dict[str, Any]]:
    import optimade.server.data as data

    from aisac_core.literature.formula import formula_key

    out = []
    for doc in data.structures:
        attrs = {
            k: v
            for k, v in doc.items()
            if k not in ("_id", "task_id", "pretty_formula", "formula_anonymous", "chemsys", "relationships")
        }
        attrs["chemical_formula_reduced"] = formula_key(doc["pretty_formula"])
        attrs["chemical_formula_anonymous"] = doc["formula_anonymous"]
        lm = doc["last_modified"]
        attrs["last_modified"] = lm["$date"] if isinstance(lm, dict) else str(lm)
        attrs.pop("_exmpl_stability", None)
        if "_exmpl_this_provider_field" in attrs:  # the database holds a provider field without its prefix
            attrs["this_provider_field"] = attrs.pop("_exmpl_this_provider_field")
        out.append({"type": "structures", "id": doc["task_id"], "attributes": attrs})
    return out


def _own() -> list[dict[str, Any]]:
    out = []
    for sid, formula, els, nsites, ef, ehull, gap in OWN_STRUCTURES:
        attrs = {
            "chemical_formula_reduced": formula,
            "chemical_formula_anonymous": "A4BCD",
            "elements": els,
            "nelements": len(els),
            "elements_ratios": [1 / 7 if e != "O" else 4 / 7 for e in els],
            "nsites": nsites,
            "nperiodic_dimensions": 3,
            "dimension_types": [1, 1, 1],
            "lattice_vectors": [[10.3, 0.0, 0.0], [0.0, 6.0, 0.0], [0.0, 0.0, 4.7]],
            "cartesian_site_positions": [[0.0, 0.0, 0.0]] * nsites,
            "species": [{"name": e, "chemical_symbols": [e], "concentration": [1.0]} for e in els],
            "species_at_sites": (els * nsites)[:nsites],
            "structure_features": [],
            "last_modified": "2024-01-01T00:00:00",
            "formation_energy_per_atom": ef,
            "e_above_hull": ehull,
            "band_gap": gap,
        }
        out.append({"type": "structures", "id": sid, "attributes": attrs})
    return out


@dataclass
class RefServer:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def start(tmp: Path) -> RefServer:
    """Start the reference server on a free loopback port with the data above; wait until it answers (≤ 60 s)."""
    pytest.importorskip("optimade.server.main", reason="optimade[server] (the dev extra) is not installed")
    tmp.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    jsonl = tmp / "structures.jsonl"
    lines = [{"x-optimade": {"meta": {"api_version": "1.2.0"}}}, *_bundled(), *_own()]
    jsonl.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    config = {
        "database_backend": "mongomock",
        "insert_from_jsonl": str(jsonl),
        "insert_test_data": False,
        "base_url": url,
        "provider_fields": {"structures": CONFIG_FIELDS},
        "log_dir": str(tmp),
    }
    cfg = tmp / "optimade_config.json"
    cfg.write_text(json.dumps(config), encoding="utf-8")
    env = {**os.environ, "OPTIMADE_CONFIG_FILE": str(cfg)}
    log = tmp / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "optimade.server.main:app", "--host", "127.0.0.1", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tmp,
        )
    srv = RefServer(url, proc, log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the OPTIMADE reference server exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/v1/info", timeout=2).status_code == 200:
                return srv
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    srv.stop()
    raise RuntimeError(f"the OPTIMADE reference server did not answer within 60 s: {log.read_text()[-2000:]}")
