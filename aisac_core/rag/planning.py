"""Planning an indexing run: which files a list of paths stands for (documents to index, data files to catalogue,
folders whose vanished files are pruned) and which were skipped, with the reason.

Symlinks are followed only into the store's registered roots; FIFOs, sockets and devices are never opened (reading
one could block for ever). Used by :class:`aisac_core.rag.indexer.Indexer`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aisac_core.errors import (
    AisacError,
    BadPathError,
    check_path_text,
    expand_user,
    inside_roots,
    quote_path,
    resolve_link,
)
from aisac_core.hashing import not_regular_reason
from aisac_core.rag.formats import CATALOG_TYPES, DOCUMENT_TYPES

_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".venv", "node_modules", ".ipynb_checkpoints"}


class IndexingError(AisacError, ValueError):
    """Bad input to the indexer (missing path, nothing indexable); the message says what to do."""


@dataclass
class Plan:
    """Files to index and to catalogue, the folders whose vanished files are pruned, and the paths skipped while
    walking (``(path, reason)``: symlinks leading out of the registered roots, symlink loops, unreadable folders)."""

    documents: list[Path] = field(default_factory=list)
    catalog: list[tuple[Path, Path]] = field(default_factory=list)  # (file, root)
    folders: list[Path] = field(default_factory=list)
    ignored: int = 0
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def _link_target(link: Path, allowed: list[Path] | None, skipped: list[tuple[Path, str]]) -> Path | None:
    """The resolved target of the symlink ``link`` met while walking, or None (and a skip reason) when it is a loop,
    broken, or leads out of the ``allowed`` roots."""
    try:
        target = resolve_link(link, what="symlink")
    except BadPathError as exc:
        skipped.append((link, str(exc)))
        return None
    if allowed is not None and not inside_roots(target, allowed):
        skipped.append(
            (
                link,
                f"symlink to {target}, which is outside the registered roots: not followed (links may "
                "only lead to files and folders inside a registered root)",
            )
        )
        return None
    return target


def _walk(top: Path, allowed: list[Path] | None, skipped: list[tuple[Path, str]]) -> Iterable[Path]:
    """Files under the resolved folder ``top``, depth first in name order (hidden entries, ``~$`` lock files and
    :data:`_SKIP_DIRS` left out). A symlinked file yields its resolved target when ``allowed`` is None (no roots
    registered) or the target lies inside ``allowed``; a symlinked folder is walked only when it lies inside
    ``allowed`` and was not walked yet. Loops, broken links, links out of the roots and unreadable folders are
    appended to ``skipped`` as ``(path, reason)``; nothing here raises."""
    visited = {top}
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            skipped.append((folder, f"folder cannot be read ({exc.strerror or exc})"))
            continue
        subdirs: list[Path] = []
        for e in entries:
            name = e.name
            if name.startswith("."):
                continue
            p = Path(e.path)
            try:
                if e.is_symlink():
                    target = _link_target(p, allowed, skipped)
                    if target is None:
                        continue
                    if target.is_dir():
                        if name in _SKIP_DIRS:
                            continue
                        if allowed is None:
                            skipped.append(
                                (
                                    p,
                                    "symlinked folder not followed: no registered roots to check its "
                                    f"target {target} against; index the target itself",
                                )
                            )
                        elif target in visited or folder.is_relative_to(target):
                            skipped.append((p, f"symlink loop: leads back to {target}, a folder already walked"))
                        else:
                            visited.add(target)
                            subdirs.append(target)
                    elif not name.startswith("~$"):
                        mode = target.stat().st_mode
                        if stat.S_ISREG(mode):
                            yield target
                        else:
                            skipped.append((p, not_regular_reason(target, mode)))
                elif e.is_dir(follow_symlinks=False):
                    if name not in _SKIP_DIRS and p not in visited:
                        visited.add(p)
                        subdirs.append(p)
                elif e.is_file(follow_symlinks=False):
                    if not name.startswith("~$"):
                        yield p
                else:  # a FIFO, socket or device: reading it could block for ever
                    skipped.append((p, not_regular_reason(p, e.stat(follow_symlinks=False).st_mode)))
            except OSError as exc:
                skipped.append((p, f"cannot be read ({exc.strerror or exc})"))
        stack.extend(reversed(subdirs))


def allowed_roots(settings: Any) -> list[Path] | None:
    """The resolved registered roots (indexed + catalog-only) symlinks met while walking must stay inside, or None
    when no root is registered (unrestricted use: symlinked files are followed, symlinked folders are not)."""
    roots = list(settings.rag.roots) + list(settings.rag.catalog_roots)
    return [Path(r).expanduser().resolve() for r in roots] or None


def plan_paths(paths: list[Path], catalog_only: bool = False, roots: list[Path] | None = None) -> Plan:
    """Expand files and folders into a :class:`Plan`.

    Document types (:data:`~aisac_core.rag.formats.DOCUMENT_TYPES`) are indexed, except under
    ``catalog_only``; tabular and binary data types (:data:`~aisac_core.rag.formats.CATALOG_TYPES`) are
    catalogued. ``roots`` (resolved; see :func:`allowed_roots`) confines symlinks met inside folders: a link whose
    target is outside them, a loop or a broken link is listed in ``Plan.skipped`` with the reason. Each file is
    planned once, by its resolved path.

    Raises:
        IndexingError: a given path does not exist or cannot be read.
        BadPathError: a given path is empty, holds a NUL byte or is a symlink loop.
    """
    plan = Plan()
    seen: set[Path] = set()
    for raw in paths:
        check_path_text(raw)
        p = expand_user(raw)
        try:
            exists = p.exists()
            if not exists and p.is_symlink():
                resolve_link(p)  # raises: a loop or a dangling link, with the reason
        except OSError as exc:
            raise IndexingError(f"path {quote_path(raw)} cannot be read ({exc.strerror or exc})") from exc
        if not exists:
            hint = (
                ""
                if Path(str(raw)).expanduser().is_absolute()
                else f"; relative paths are resolved against {Path.cwd()}"
            )
            raise IndexingError(f"path not found: {quote_path(raw)} (give an existing file or folder{hint})")
        p = resolve_link(p)
        files: Iterable[Path]
        mode = p.stat().st_mode
        if not stat.S_ISDIR(mode) and not stat.S_ISREG(mode):  # a FIFO, socket or device: never opened
            plan.skipped.append((p, not_regular_reason(p, mode)))
            continue
        if p.is_dir():
            plan.folders.append(p)
            files = _walk(p, roots, plan.skipped)
            root = p
        else:
            files = [p]
            root = p.parent
        for f in files:
            if f in seen:
                continue
            seen.add(f)
            suf = f.suffix.lower()
            if not catalog_only and suf in DOCUMENT_TYPES:
                plan.documents.append(f)
            elif suf in CATALOG_TYPES or catalog_only:
                plan.catalog.append((f, root))
            else:
                plan.ignored += 1
    return plan
