"""Workbooks of the project's own making for the sheet tests and the ``sheets`` benchmark: the extent and merge bombs
(a few KB each) and one workbook per layout pattern of issue 29. Written with openpyxl at test time."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any


def _table(ws: Any, top: int = 1, left: int = 1) -> None:
    rows = [("site", "depth_m", "temp_C"), ("A", 1.5, 12.1), ("B", 2.0, 11.4), ("C", 2.5, 10.9)]
    for i, row in enumerate(rows):
        for j, v in enumerate(row):
            ws.cell(top + i, left + j, v)


def write_extent_bomb(path: Path) -> Path:
    """A small table at A1:C4 and one cell at ALL20000: the declared dimension A1:ALL20000 (20 million cells)."""
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "data"
    _table(ws)
    ws["ALL20000"] = "x"
    wb.save(path)
    return path


def write_merge_bomb(path: Path, ref: str = "A2:CV20000") -> Path:
    """A title in A2 merged over ``ref`` (2 million cells), written as a small merge then widened in the XML (openpyxl
    itself would create one object per merged cell)."""
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "merged"
    ws["A2"] = "one title merged over a huge area"
    ws.merge_cells("A2:B3")
    wb.save(path)
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    sheet = "xl/worksheets/sheet1.xml"
    xml = members[sheet].decode()
    xml = xml.replace('ref="A2:B3"', f'ref="{ref}"')
    xml = re.sub(r'<dimension ref="[^"]*"/>', f'<dimension ref="{ref.replace("A2", "A1")}"/>', xml)
    members[sheet] = xml.encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n, b in members.items():
            z.writestr(n, b)
    return path
