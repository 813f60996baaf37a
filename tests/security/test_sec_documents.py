"""Documents stay inside the registered roots, and Office files cannot be decompression bombs.

Attacks found against the installed suite, replayed through a real in-process MCP client on the real suite (real
files, symlinks and ZIP archives on disk, a real SQLite store and vector store, real parsing): a symlink out of a
root was indexed and served, symlink loops crashed the tools, and a 338 KB XLSX unpacking to 86 MB of sheet XML took
the server past 1.7 GB. Every test checks that the attack is contained (nothing outside the roots read or returned,
the server still answering, the store intact) and that the error or skip reason says clearly what happened.
"""

from __future__ import annotations

import json
import sqlite3
import struct
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest
from conftest import make_settings
from fastmcp import Client

pytestmark = pytest.mark.anyio

SECRET = "ZEBRA-MANGO-SECRET-7731"  # the content of the file outside the root: must never come back


# -- helpers --------------------------------------------------------------------------------------------------
def _app(tmp_path: Path, models_dir: Path, shared_embedder, roots: list[Path], **kw):  # noqa: ANN001, ANN202
    """A fresh store serving ``roots`` (the shared embedder, so no model loads per test)."""
    from aisac_core.context import AppContext

    core = AppContext(
        make_settings(tmp_path / "store", models_dir, roots=roots, warm=False, **kw), embedder=shared_embedder
    )
    return core


def _suite(core):  # noqa: ANN001, ANN202
    from aisac_servers.serving.suite import build

    return build(app=core, lifespan=False)


def _text(res) -> str:  # noqa: ANN001
    """Everything a tool result carries as text (content blocks and structured content)."""
    parts = [getattr(x, "text", "") for x in (res.content or [])]
    if res.structured_content is not None:
        parts.append(json.dumps(res.structured_content))
    return "\n".join(parts)


def _integrity(core) -> None:  # noqa: ANN001
    with sqlite3.connect(core.settings.data_dir / "aisac.db") as con:
        assert con.execute("pragma integrity_check").fetchone()[0] == "ok"


async def _alive(c: Client) -> None:
    """The server still answers a normal call."""
    r = await c.call_tool("memory_start_session", {"title": "still serving"})
    assert r.structured_content["session_id"].startswith("ses-")


def _root_with_outside(tmp_path: Path) -> tuple[Path, Path]:
    """A registered root with one real note, and a folder outside it holding a secret."""
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "note.md").write_text("# Field notes\n\nThe kiln reached 1,250 degrees on the second firing.\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"private credentials {SECRET}\n")
    (outside / "sub").mkdir()
    (outside / "sub" / "more.md").write_text(f"# Private\n\n{SECRET} in a folder outside the root.\n")
    return root, outside


def _inflate_member(seed: Path, path: Path, member: str, head: bytes, unit: bytes, mb: int, tail: bytes) -> Path:
    """Copy the Office file ``seed`` to ``path`` with ``member`` replaced by ``head`` + ``unit`` repeated to ``mb`` MB +
    ``tail``, deflated (a zip bomb that is still a valid document); ``seed`` is removed."""
    with zipfile.ZipFile(seed) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for info in src.infolist():
            if info.filename != member:
                z.writestr(info.filename, src.read(info))
        with z.open(member, "w") as w:
            w.write(head)
            for _ in range(mb * 1024 * 1024 // len(unit)):
                w.write(unit)
            w.write(tail)
    seed.unlink()
    return path


def xlsx_bomb(path: Path, sheet_mb: int = 80) -> Path:
    """A valid XLSX whose sheet XML is ``sheet_mb`` MB of repetitive numeric cells, deflated (a few hundred KB)."""
    import openpyxl

    seed = path.with_suffix(".seed.xlsx")
    wb = openpyxl.Workbook()
    wb.active["A1"] = 1
    wb.save(seed)
    row = ("<row>" + '<c t="n"><v>1</v></c>' * 1000 + "</row>").encode()
    return _inflate_member(
        seed,
        path,
        "xl/worksheets/sheet1.xml",
        b'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/'
        b'spreadsheetml/2006/main"><sheetData>',
        row,
        sheet_mb,
        b"</sheetData></worksheet>",
    )


def docx_bomb(path: Path, body_mb: int = 40) -> Path:
    """A valid DOCX whose document.xml is ``body_mb`` MB of one repeated paragraph, deflated."""
    import docx

    seed = path.with_suffix(".seed.docx")
    d = docx.Document()
    d.add_paragraph("seed")
    d.save(seed)
    para = b"<w:p><w:r><w:t>the same sentence again and again</w:t></w:r></w:p>" * 100
    return _inflate_member(
        seed,
        path,
        "word/document.xml",
        b'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
        b'wordprocessingml/2006/main"><w:body>',
        para,
        body_mb,
        b"</w:body></w:document>",
    )


def declared_unpacked(path: Path) -> int:
    with zipfile.ZipFile(path) as z:
        return sum(i.file_size for i in z.infolist())


# -- symlinks -------------------------------------------------------------------------------------------------
async def test_symlinked_file_out_of_a_root_is_neither_indexed_nor_served(tmp_path, models_dir, shared_embedder):
    root, outside = _root_with_outside(tmp_path)
    (root / "docs" / "passwd.txt").symlink_to("/etc/passwd")
    (root / "docs" / "secret.txt").symlink_to(outside / "secret.txt")
    core = _app(tmp_path, models_dir, shared_embedder, [root])
    try:
        async with Client(_suite(core)) as c:
            job = (
                await c.call_tool("rag_index", {"path": str(root), "wait": True, "timeout_s": 300})
            ).structured_content
            assert job["status"] == "done" and job["counters"]["files_indexed"] == 1
            skipped = {Path(s["path"]).name: s["reason"] for s in job["skipped"]}
            assert set(skipped) == {"passwd.txt", "secret.txt"}
            assert all("outside the registered roots" in r for r in skipped.values())
            assert job["counters"]["paths_skipped"] == 2
            docs = (await c.call_tool("rag_list_documents", {})).structured_content["documents"]
            assert [Path(d["path"]).name for d in docs] == ["note.md"]
            leaked = []
            for q in ("root:x:0:0 daemon nologin bin bash", f"private credentials {SECRET}"):
                res = await c.call_tool("rag_search", {"query": q, "k": 10, "detail": "full"})
                leaked += [h["path"] for h in res.structured_content["hits"] if "note.md" not in h["path"]]
                assert SECRET not in _text(res) and "root:x:0:0" not in _text(res)
            assert not leaked
            # the document resource of the files the links point to does not exist
            from aisac_core.rag.indexer import doc_id_for

            note = await c.read_resource(f"aisac://rag/documents/{docs[0]['doc_id']}")
            assert "kiln" in note[0].text
            for target in (Path("/etc/passwd"), outside / "secret.txt", root / "docs" / "passwd.txt"):
                with pytest.raises(Exception, match="no indexed document"):
                    await c.read_resource(f"aisac://rag/documents/{doc_id_for(target)}")
            await _alive(c)
        _integrity(core)
    finally:
        core.close()


async def test_a_file_replaced_by_an_escaping_link_is_pruned(tmp_path, models_dir, shared_embedder):
    """A document indexed at a path that later became a symlink out of the root (the state a store indexed before
    links were confined is in): the next run skips the link and removes the old document and its chunks."""
    root, outside = _root_with_outside(tmp_path)
    report = root / "docs" / "report.md"
    report.write_text("# Report\n\nThe first firing cracked two of the twelve tiles.\n")
    core = _app(tmp_path, models_dir, shared_embedder, [root])
    try:
        async with Client(_suite(core)) as c:
            job = (await c.call_tool("rag_index", {"path": "docs", "wait": True})).structured_content
            assert job["status"] == "done" and job["counters"]["files_indexed"] == 2
            report.unlink()
            report.symlink_to(outside / "sub" / "more.md")
            job = (await c.call_tool("rag_index", {"path": "docs", "wait": True})).structured_content
            assert job["status"] == "done" and job["counters"]["files_pruned"] == 1
            assert [Path(s["path"]).name for s in job["skipped"]] == ["report.md"]
            docs = (await c.call_tool("rag_list_documents", {})).structured_content["documents"]
            assert [Path(d["path"]).name for d in docs] == ["note.md"]
            for q in ("first firing cracked tiles", f"{SECRET} in a folder outside the root"):
                res = await c.call_tool("rag_search", {"query": q, "k": 10})
                assert SECRET not in _text(res) and "cracked" not in _text(res)
        assert core.vectors().count("chunks") == sum(d["chunk_count"] for d in docs)
        _integrity(core)
    finally:
        core.close()


async def test_symlinked_folders_followed_inside_the_roots_only(tmp_path, models_dir, shared_embedder):
    root, outside = _root_with_outside(tmp_path)
    (root / "alias").symlink_to(root / "docs", target_is_directory=True)  # inside: walked once, no duplicate
    (root / "escape").symlink_to(outside / "sub", target_is_directory=True)  # outside: skipped
    core = _app(tmp_path, models_dir, shared_embedder, [root])
    try:
        async with Client(_suite(core)) as c:
            job = (await c.call_tool("rag_index", {"path": str(root), "wait": True})).structured_content
            assert job["status"] == "done"
            assert [(Path(s["path"]).name, "outside the registered roots" in s["reason"]) for s in job["skipped"]] == [
                ("escape", True)
            ]
            docs = (await c.call_tool("rag_list_documents", {})).structured_content["documents"]
            assert [d["path"] for d in docs] == [str((root / "docs" / "note.md").resolve())]
            assert SECRET not in _text(await c.call_tool("rag_search", {"query": SECRET, "k": 10}))
            await _alive(c)
    finally:
        core.close()


async def test_symlink_loops_are_skipped_with_a_reason_not_a_hang(tmp_path, models_dir, shared_embedder):
    root, _ = _root_with_outside(tmp_path)
    (root / "a.md").symlink_to(root / "b.md")
    (root / "b.md").symlink_to(root / "a.md")  # a -> b -> a
    (root / "self.md").symlink_to(root / "self.md")
    (root / "docs" / "up").symlink_to(root, target_is_directory=True)  # a folder linked to its own ancestor
    (root / "docs" / "dangling.md").symlink_to(root / "gone.md")
    core = _app(tmp_path, models_dir, shared_embedder, [root])
    try:
        async with Client(_suite(core)) as c:
            t0 = time.monotonic()
            job = (
                await c.call_tool("rag_index", {"path": str(root), "wait": True, "timeout_s": 120})
            ).structured_content
            assert job["status"] == "done" and time.monotonic() - t0 < 60
            reasons = {Path(s["path"]).name: s["reason"] for s in job["skipped"]}
            assert set(reasons) == {"a.md", "b.md", "self.md", "up", "dangling.md"}
            assert all("symlink loop" in reasons[n] for n in ("a.md", "b.md", "self.md", "up"))
            assert "does not exist" in reasons["dangling.md"]
            assert job["counters"]["files_indexed"] == 1 and job["failures"] == []
            # a loop given as the path itself: a clear tool error for rag_index and data_load
            for tool in ("rag_index", "data_load"):
                r = await c.call_tool(tool, {"path": str(root / "a.md")}, raise_on_error=False)
                assert r.is_error and "symlink loop" in r.content[0].text, r.content[0].text
                assert len(r.content[0].text) < 2000 and "internal error" not in r.content[0].text
            await _alive(c)
        _integrity(core)
    finally:
        core.close()


async def test_blank_empty_and_nul_paths_are_clear_errors_and_create_no_job(tmp_path, models_dir, shared_embedder):
    root, _ = _root_with_outside(tmp_path)
    core = _app(tmp_path, models_dir, shared_embedder, [root])
    try:
        async with Client(_suite(core)) as c:
            for bad in ("", "   ", [], [""]):
                r = await c.call_tool("rag_index", {"path": bad}, raise_on_error=False)
                msg = r.content[0].text
                assert r.is_error and "empty" in msg and "registered root's name" in msg and "omit path" in msg, msg
            for tool, args in (
                ("rag_index", {"path": "docs\x00/../../etc"}),
                ("data_load", {"path": "a\x00.csv"}),
                ("rag_remove", {"path": "/etc/passwd\x00"}),
                ("rag_catalog", {"root": "x\x00y"}),
            ):
                r = await c.call_tool(tool, args, raise_on_error=False)
                msg = r.content[0].text
                assert r.is_error and "NUL byte" in msg and "internal error" not in msg, (tool, msg)
            assert (await c.call_tool("rag_job_status", {})).structured_content["jobs"] == []
            await _alive(c)
    finally:
        core.close()


async def test_data_load_refuses_symlink_escapes_and_reads_nothing(tmp_path, models_dir, shared_embedder):
    root, outside = _root_with_outside(tmp_path)
    (outside / "private.csv").write_text(f"key,value\ntoken,{SECRET}\n")
    (root / "private.csv").symlink_to(outside / "private.csv")
    (root / "inner").symlink_to(outside, target_is_directory=True)
    (root / "ok.csv").write_text("a,b\n1,2\n")
    core = _app(tmp_path, models_dir, shared_embedder, [root])
    try:
        async with Client(_suite(core)) as c:
            for path in ("private.csv", str(root / "private.csv"), "inner/private.csv", "../outside/private.csv"):
                r = await c.call_tool("data_load", {"path": path}, raise_on_error=False)
                assert r.is_error and "outside the registered roots" in r.content[0].text, r.content[0].text
                assert SECRET not in r.content[0].text
            ok = await c.call_tool("data_load", {"path": "ok.csv"})
            assert ok.structured_content["frames"][0]["rows"] == 1
            listed = await c.call_tool("data_list", {})
            assert [f["name"] for f in listed.structured_content["frames"]] == ["ok"]
            assert SECRET not in _text(listed)
    finally:
        core.close()


# -- decompression bombs --------------------------------------------------------------------------------------
def test_xlsx_bomb_is_refused_before_parsing_in_a_fresh_process(tmp_path):
    """The attack's shape (a few hundred KB unpacking to 80 MB of sheet XML), loaded in a fresh interpreter that
    reports its peak memory (VmHWM) before and after: refused within seconds, the peak barely moves."""
    root = tmp_path / "root"
    root.mkdir()
    bomb = xlsx_bomb(root / "bomb.xlsx", sheet_mb=80)
    assert bomb.stat().st_size < 1_000_000 and declared_unpacked(bomb) > 80_000_000
    script = textwrap.dedent(f"""
        import json, sys, time
        from pathlib import Path
        from aisac_core.context import AppContext
        from aisac_core.data.errors import DataError
        from aisac_core.settings import Settings

        def hwm():
            for line in open("/proc/self/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024
        core = AppContext(Settings(data_dir=Path({str(tmp_path / "store")!r}), roots=[Path({str(root)!r})],
                                   warm=False))
        import openpyxl, pandas  # loaded before the first reading, so only the load itself is measured
        before = hwm()
        t0 = time.monotonic()
        try:
            core.frames.load("bomb.xlsx")
            msg = None
        except DataError as exc:
            msg = str(exc)
        print(json.dumps({{"before": before, "after": hwm(), "seconds": time.monotonic() - t0, "error": msg}}))
        core.close()
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["error"] and "refused before parsing" in got["error"] and "AISAC_DATA_MAX_UNPACK_RATIO" in got["error"]
    assert got["seconds"] < 5, got
    assert got["after"] - got["before"] < 50, got  # MB; parsing the sheet would take well over a gigabyte


async def test_xlsx_bomb_is_a_clear_tool_error_and_the_size_limit_applies(tmp_path, models_dir, shared_embedder):
    root = tmp_path / "root"
    root.mkdir()
    xlsx_bomb(root / "bomb.xlsx", sheet_mb=40)
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["n", "half", "label"])
    for i in range(1, 2000):  # an ordinary workbook of real numbers loads as before
        ws.append([i, i * 0.5, f"sample {i}"])
    wb.save(root / "fine.xlsx")
    core = _app(tmp_path, models_dir, shared_embedder, [root], data_max_unpacked_mb=30)
    try:
        async with Client(_suite(core)) as c:
            t0 = time.monotonic()
            r = await c.call_tool("data_load", {"path": "bomb.xlsx"}, raise_on_error=False)
            assert time.monotonic() - t0 < 5
            msg = r.content[0].text
            assert r.is_error and "bomb.xlsx refused before parsing" in msg and len(msg) < 2000
            assert "more than the 30 MB limit (AISAC_DATA_MAX_UNPACKED_MB)" in msg, msg
            ok = await c.call_tool("data_load", {"path": "fine.xlsx"})
            assert ok.structured_content["frames"][0]["rows"] == 1999
            assert [f["name"] for f in (await c.call_tool("data_list", {})).structured_content["frames"]] == ["fine"]
    finally:
        core.close()


async def test_office_bombs_are_skipped_by_the_indexer_with_the_reason(tmp_path, models_dir, shared_embedder):
    root = tmp_path / "root"
    root.mkdir()
    (root / "note.md").write_text("# Notes\n\nThe glaze crazed after the third firing.\n")
    docx_bomb(root / "report.docx", body_mb=40)
    xlsx_bomb(root / "sheet.xlsx", sheet_mb=40)
    cat = tmp_path / "tables"
    cat.mkdir()
    xlsx_bomb(cat / "big.xlsx", sheet_mb=40)
    core = _app(tmp_path, models_dir, shared_embedder, [root], catalog_roots=[cat])
    try:
        async with Client(_suite(core)) as c:
            t0 = time.monotonic()
            job = (
                await c.call_tool("rag_index", {"path": str(root), "wait": True, "timeout_s": 300})
            ).structured_content
            assert job["status"] == "done" and time.monotonic() - t0 < 60
            fails = {Path(f["path"]).name: f["error"] for f in job["failures"]}
            assert set(fails) == {"report.docx", "sheet.xlsx"}
            assert all("refused before parsing" in e and "skipped" in e for e in fails.values()), fails
            assert job["counters"]["files_indexed"] == 1 and job["counters"]["files_failed"] == 2
            failed = (await c.call_tool("rag_list_documents", {"status": "failed"})).structured_content["documents"]
            assert sorted(Path(d["path"]).name for d in failed) == ["report.docx", "sheet.xlsx"]
            listed = (await c.call_tool("rag_catalog", {"refresh": True})).structured_content["entries"]
            big = [e for e in listed if e["path"].endswith("big.xlsx")]
            assert big and "refused before parsing" in big[0]["meta"]["metadata_error"]
            await _alive(c)
        _integrity(core)
    finally:
        core.close()


def _crafted(tmp_path: Path) -> dict[str, Path]:
    """ZIP files that lie: overlapping members (Fifield's construction), a bzip2 member, too many members, and a
    member whose central directory declares fewer bytes than its data holds."""
    out = {}
    # overlapping: a second central directory entry pointing at the first member's data
    base = tmp_path / "one.zip"
    with zipfile.ZipFile(base, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("xl/a.xml", b"<a>" + b"x" * 100_000 + b"</a>")
    raw = base.read_bytes()
    eocd = raw.rfind(b"PK\x05\x06")
    _, _, _, n_disk, n_total, cd_size, cd_off, _ = struct.unpack("<IHHHHIIH", raw[eocd : eocd + 22])
    entry = raw[cd_off : cd_off + cd_size]
    twin = entry.replace(b"xl/a.xml", b"xl/b.xml")
    body = raw[:cd_off] + entry + twin
    out["overlap"] = tmp_path / "overlap.xlsx"
    out["overlap"].write_bytes(body + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 2, 2, 2 * cd_size, cd_off, 0))
    out["bzip2"] = tmp_path / "bzip2.docx"
    with zipfile.ZipFile(out["bzip2"], "w", zipfile.ZIP_BZIP2) as z:
        z.writestr("word/document.xml", b"<w/>" * 1000)
    out["many"] = tmp_path / "many.pptx"
    with zipfile.ZipFile(out["many"], "w", zipfile.ZIP_STORED) as z:
        for i in range(10_001):
            z.writestr(f"ppt/s{i}.xml", b"")
    # a lying size: the member's real data is 50 MB of zeros, the central directory says 1,000 bytes
    out["liar"] = tmp_path / "liar.xlsx"
    with zipfile.ZipFile(out["liar"], "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("xl/sharedStrings.xml", b"\0" * 50_000_000)
    raw = bytearray(out["liar"].read_bytes())
    cd = raw.rfind(b"PK\x01\x02")
    raw[cd + 24 : cd + 28] = struct.pack("<I", 1000)  # uncompressed size field of the central directory entry
    out["liar"].write_bytes(bytes(raw))
    return out


def test_archive_checks_refuse_crafted_headers_and_zipfile_enforces_declared_sizes(tmp_path):
    from aisac_core.archives import ArchiveError, check_archive

    files = _crafted(tmp_path)
    for kind, expected in (
        ("overlap", "members overlap"),
        ("bzip2", "only stored or deflated"),
        ("many", "10,001 archive members"),
    ):
        with pytest.raises(ArchiveError, match=expected):
            check_archive(files[kind])
    # the liar passes the check on its declared 1,000 bytes, but zipfile yields no more than those 1,000 bytes and
    # then fails the CRC: a parser cannot unpack more than the declared sizes the check summed
    report = check_archive(files["liar"])
    assert report.unpacked_bytes == 1000
    total = 0
    with zipfile.ZipFile(files["liar"]) as z, z.open("xl/sharedStrings.xml") as member:
        with pytest.raises(zipfile.BadZipFile, match="CRC"):
            while chunk := member.read(100):
                total += len(chunk)
    assert total <= 1000  # of the 50,000,000 bytes the member really holds
    # and an ordinary Office file passes
    import docx

    d = docx.Document()
    d.add_paragraph("an ordinary report")
    d.save(tmp_path / "ok.docx")
    assert check_archive(tmp_path / "ok.docx").members > 5
