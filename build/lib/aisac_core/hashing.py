"""The hashes aisac takes: of files, of texts and of JSON values. Every sha256 in a manifest row, an evidence anchor
or a trace event comes from here, so two places never hash the same thing two ways.

All digests are SHA-256 (FIPS 180-4) as lower-case hex.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def dumps(obj: Any) -> str:
    """Canonical JSON (sorted keys, no spaces, UTF-8, non-JSON values through ``str``): the form every JSON hash in
    aisac is taken of, and the form trace rows store."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    """Hex sha256 of ``text`` encoded as UTF-8 (a chunk's text: the chunk half of an evidence anchor)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_json(obj: Any) -> str:
    """Hex sha256 of the canonical JSON of ``obj`` (:func:`dumps`)."""
    return sha256_text(dumps(obj))


def sha256_file(path: str | Path, bufsize: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes, read in ``bufsize`` blocks (memory stays flat for large files).

    Raises:
        OSError: the file cannot be read (``FileNotFoundError`` when it is gone).
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(bufsize):
            h.update(chunk)
    return h.hexdigest()
