"""Refusing decompression bombs among ZIP-based Office files (XLSX, XLSM, DOCX, PPTX, ODF) before a parser opens them.

An Office file is a ZIP archive of XML parts; openpyxl, python-docx/-pptx and docling unpack and parse those parts
whole, so a few hundred KB of deflated, repetitive sheet XML can take a server from hundreds of MB to gigabytes.
:func:`check_archive` reads only the archive's directory (the end-of-central-directory record and the central
directory, never a member's data) and refuses the file when:

- the central directory is larger than :data:`MAX_DIRECTORY_MB` or lists more than ``max_members`` members
  (:data:`MAX_MEMBERS` = 10,000; an Office file holds tens to a few thousand parts) - checked on the raw record
  before :mod:`zipfile` builds one object per entry;
- a member uses a compression method other than stored or deflated: OPC (ECMA-376 Part 2) and ODF packages use only
  these, and :mod:`zipfile` decompresses bzip2/LZMA without an output bound per read;
- two members' data overlap (or a member runs past the end of the file): the construction of David Fifield's
  non-recursive zip bomb ("A better zip bomb", USENIX WOOT 2019), where many entries share one compressed kernel;
- the members' declared uncompressed sizes sum to more than ``max_unpacked_mb`` (``settings.data.max_unpacked_mb``,
  default 512 MB), or - above :data:`RATIO_FLOOR_MB` = 16 MB unpacked - to more than ``max_ratio`` times the file's
  size (``settings.data.max_unpack_ratio``, default 100).

Sources of the thresholds: the ratio 100 is Apache POI's default for the same check on Office files
(``ZipSecureFile.setMinInflateRatio``, minimum inflate ratio 0.01, i.e. at most 100:1); the OWASP File Upload Cheat
Sheet asks for limits on the decompressed size and the compression ratio of archives; 512 MB total and the 16 MB
floor (ordinary workbooks of tens of MB stay below the ratio check; real XLSX/DOCX compress about 5-20:1) are
aisac's defaults, sized so one accepted file cannot take a server past about a gigabyte while parsing.

Why the *declared* sizes suffice (a member whose header lies): CPython's ``zipfile`` reads a member with
``ZipExtFile`` (checked in the installed CPython 3.11, Lib/zipfile.py ``ZipExtFile._read1``): the output is cut at
the central directory's declared ``file_size`` (``data = data[:self._left]``), the member counts as ended there and
its CRC-32 is checked (``BadZipFile: Bad CRC-32`` when the data differ), and deflate decompression is bounded per
read (``decompressor.decompress(data, max_length)``). A member therefore never yields more than its declared size,
so the sum of declared sizes bounds what any zipfile-based parser can unpack.
"""

from __future__ import annotations

import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from aisac_core.errors import AisacError

if TYPE_CHECKING:
    from aisac_core.settings import Settings

#: suffixes of ZIP-based Office files (OOXML and ODF) that :func:`check_archive` applies to
OFFICE_ZIP_SUFFIXES = frozenset({".xlsx", ".xlsm", ".docx", ".docm", ".pptx", ".pptm", ".ods", ".odt", ".odp"})
#: most members an accepted archive may list
MAX_MEMBERS = 10_000
#: largest central directory (MB) read; 10,000 entries with long names and extras stay far below it
MAX_DIRECTORY_MB = 32
#: below this many MB unpacked in total, the ratio is not checked (small files may compress very well)
RATIO_FLOOR_MB = 16.0
_MB = 1024 * 1024
_EOCD = b"PK\x05\x06"
_EOCD64_LOCATOR = b"PK\x06\x07"
_LOCAL_HEADER = 30  # fixed part of a local file header, before the name and the extra field


class ArchiveError(AisacError, ValueError):
    """A ZIP-based Office file refused before parsing (a possible decompression bomb, or not a valid archive)."""


@dataclass(frozen=True)
class ArchiveLimits:
    """Limits of :func:`check_archive`: MB unpacked in total, unpacked/packed ratio above ``ratio_floor_mb``,
    member count."""

    max_unpacked_mb: float = 512.0
    max_ratio: float = 100.0
    max_members: int = MAX_MEMBERS
    ratio_floor_mb: float = RATIO_FLOOR_MB

    @classmethod
    def from_settings(cls, settings: Settings) -> ArchiveLimits:
        """The limits of ``settings.data`` (``max_unpacked_mb``, ``max_unpack_ratio``)."""
        return cls(
            max_unpacked_mb=float(settings.data.max_unpacked_mb), max_ratio=float(settings.data.max_unpack_ratio)
        )


@dataclass(frozen=True)
class ArchiveReport:
    """What :func:`check_archive` read: member count, file size and declared unpacked size (bytes), their ratio."""

    members: int
    packed_bytes: int
    unpacked_bytes: int

    @property
    def ratio(self) -> float:
        """Declared unpacked bytes per byte of the file."""
        return self.unpacked_bytes / max(1, self.packed_bytes)


def is_office_zip(path: str | Path) -> bool:
    """Whether ``path``'s suffix is one of :data:`OFFICE_ZIP_SUFFIXES` (the files :func:`check_archive` is for)."""
    return Path(path).suffix.lower() in OFFICE_ZIP_SUFFIXES


def _directory_record(f: BinaryIO, size: int) -> tuple[int, int]:
    """(declared entry count, central directory bytes) from the end-of-central-directory record (ZIP64 aware);
    (-1, -1) when no record is found (zipfile then reports the damage)."""
    tail = min(size, 22 + 65535)
    f.seek(size - tail)
    data = f.read(tail)
    at = data.rfind(_EOCD)
    if at < 0 or len(data) - at < 22:
        return -1, -1
    entries, cd_size = struct.unpack("<10xHL", data[at : at + 16])
    loc = at - 20
    if (entries == 0xFFFF or cd_size == 0xFFFFFFFF) and loc >= 0 and data[loc : loc + 4] == _EOCD64_LOCATOR:
        (offset,) = struct.unpack("<8xQ", data[loc : loc + 16])
        if 0 <= offset <= size - 56:
            f.seek(offset)
            rec = f.read(56)
            if rec[:4] == b"PK\x06\x06":
                entries, cd_size = struct.unpack("<32xQ Q", rec[:48])
    return entries, cd_size


def check_archive(path: str | Path, limits: ArchiveLimits | Settings | None = None) -> ArchiveReport:
    """Refuse a ZIP-based Office file before parsing when it could unpack to too much (see the module docstring).

    Args:
        path: an existing file (XLSX/XLSM/DOCX/PPTX/ODF; any ZIP archive works).
        limits: an :class:`ArchiveLimits`, a :class:`~aisac_core.settings.Settings` (its ``data`` limits), or None
            for the defaults (512 MB, ratio 100, 10,000 members).

    Returns:
        an :class:`ArchiveReport` (members, packed and declared unpacked bytes) of an accepted file.

    Raises:
        ArchiveError: not a readable ZIP archive; more than ``max_members`` members or an oversized central
            directory; a compression method other than stored/deflated; overlapping members; declared unpacked
            size over ``max_unpacked_mb``; ratio over ``max_ratio`` above 16 MB unpacked. The message names the
            file, the measured value and the limit with its setting.
        OSError: the file cannot be opened or read.
    """
    lim = (
        limits
        if isinstance(limits, ArchiveLimits)
        else ArchiveLimits()
        if limits is None
        else ArchiveLimits.from_settings(limits)
    )
    p = Path(path)
    name = p.name
    size = p.stat().st_size
    with open(p, "rb") as f:
        entries, cd_size = _directory_record(f, size)
        if entries > lim.max_members:
            raise ArchiveError(
                f"{name} refused before parsing: it lists {entries:,} archive members, more than the "
                f"{lim.max_members:,} an Office file may hold (a possible decompression bomb)"
            )
        if cd_size > MAX_DIRECTORY_MB * _MB:
            raise ArchiveError(
                f"{name} refused before parsing: its archive directory is {cd_size / _MB:,.0f} MB, "
                f"more than {MAX_DIRECTORY_MB} MB (a crafted or damaged file)"
            )
        try:
            with zipfile.ZipFile(f) as zf:
                infos = zf.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, ValueError, EOFError) as exc:
            raise ArchiveError(
                f"{name} could not be parsed: it is not a readable ZIP archive ({type(exc).__name__}: "
                f"{str(exc)[:120]}), which every {p.suffix or 'Office'} file is; the file is damaged, "
                "truncated or another type renamed"
            ) from exc
    if len(infos) > lim.max_members:
        raise ArchiveError(
            f"{name} refused before parsing: it holds {len(infos):,} archive members, more than the "
            f"{lim.max_members:,} an Office file may hold (a possible decompression bomb)"
        )
    odd = [i for i in infos if i.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)]
    if odd:
        raise ArchiveError(
            f"{name} refused before parsing: member {odd[0].filename[:80]!r} uses compression method "
            f"{odd[0].compress_type}; Office files use only stored or deflated members"
        )
    end = 0
    for i in sorted(infos, key=lambda z: z.header_offset):
        start = i.header_offset
        if start < end:
            raise ArchiveError(
                f"{name} refused before parsing: archive members overlap (member "
                f"{i.filename[:80]!r} starts inside the previous one), the construction of a "
                "non-recursive zip bomb"
            )
        nbytes = len(i.filename.encode("utf-8")) if i.flag_bits & 0x800 else len(i.orig_filename)
        end = start + _LOCAL_HEADER + nbytes + i.compress_size
        if end > size:
            raise ArchiveError(
                f"{name} refused before parsing: member {i.filename[:80]!r} runs past the end of the "
                "file (truncated or crafted)"
            )
    unpacked = sum(i.file_size for i in infos)
    report = ArchiveReport(members=len(infos), packed_bytes=size, unpacked_bytes=unpacked)
    if unpacked > lim.max_unpacked_mb * _MB:
        raise ArchiveError(
            f"{name} refused before parsing: its {len(infos):,} archive members unpack to "
            f"{unpacked / _MB:,.0f} MB, more than the {lim.max_unpacked_mb:g} MB limit "
            "(AISAC_DATA_MAX_UNPACKED_MB); this guards against decompression bombs - split the file, "
            "or raise the limit if you trust it"
        )
    if unpacked > lim.ratio_floor_mb * _MB and report.ratio > lim.max_ratio:
        raise ArchiveError(
            f"{name} refused before parsing: its {size / _MB:,.1f} MB unpack to "
            f"{unpacked / _MB:,.0f} MB, {report.ratio:,.0f} times its size, more than the ratio limit "
            f"{lim.max_ratio:g} (AISAC_DATA_MAX_UNPACK_RATIO) for files over {lim.ratio_floor_mb:g} MB "
            "unpacked; such compression is typical of a decompression bomb - raise the limit if you "
            "trust the file"
        )
    return report
