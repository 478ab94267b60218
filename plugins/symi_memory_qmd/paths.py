"""Paths between qmd (``qmd://<collection>/<rel>``) and the memory tools.

A hit inside the workspace gets its workspace-relative path; anything else
becomes ``qmd/<collection>/<rel>``, which ``memory_get`` resolves inside the
collection's root and nowhere else.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from symi_memory.errors import PathRefused
from symi_memory.types import ReadResult
from symi_memory.workspace import decode_text, read_lines

from .collections import CollectionSpec

__all__ = ["QMD_PREFIX", "display_path", "is_qmd_path", "read_qmd_path", "resolve_qmd_path"]

QMD_PREFIX = "qmd/"


def is_qmd_path(path: str) -> bool:
    """Tell whether ``memory_get`` should resolve this path inside a qmd collection."""
    return isinstance(path, str) and path.strip().replace("\\", "/").startswith(QMD_PREFIX)


def display_path(spec: CollectionSpec | None, collection: str, rel: str, workspace: Path) -> str:
    """The path a search hit shows: workspace-relative, or ``qmd/<collection>/<rel>``."""
    if spec is not None:
        target = os.path.normpath(os.path.join(spec.path, rel))
        ws = os.path.normpath(str(workspace))
        if os.path.commonpath([ws, target]) == ws:
            return os.path.relpath(target, ws).replace(os.sep, "/")
    return f"{QMD_PREFIX}{collection}/{rel}"


def resolve_qmd_path(path: str, collections: Mapping[str, CollectionSpec]) -> str:
    """Return the absolute file for ``qmd/<collection>/<rel>`` or raise :class:`PathRefused`."""
    parts = path.strip().replace("\\", "/").split("/", 2)
    if len(parts) < 3 or parts[0] != "qmd" or not parts[1] or not parts[2].strip("/"):
        raise PathRefused("invalid qmd path")
    name, rel = parts[1], parts[2]
    spec = collections.get(name)
    if spec is None:
        raise PathRefused(f"unknown qmd collection: {name}")
    root = os.path.realpath(spec.path)
    target = os.path.normpath(os.path.join(root, rel))
    if os.path.isabs(rel) or os.path.commonpath([root, target]) != root:
        raise PathRefused("qmd path escapes collection")
    if os.path.realpath(target) != target:
        # A symlink inside the collection could point anywhere.
        raise PathRefused("qmd path escapes collection")
    if not target.endswith(".md"):
        raise PathRefused()
    return target


def read_qmd_path(
    path: str, collections: Mapping[str, CollectionSpec], *, from_line: int | None = None, lines: int | None = None
) -> ReadResult:
    """``memory_get`` for a ``qmd/`` path: a missing file gives empty text."""
    target = resolve_qmd_path(path, collections)
    shown = path.strip().replace("\\", "/")
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return ReadResult(path=shown, text="")
    if not stat.S_ISREG(st.st_mode):
        raise PathRefused()
    with open(target, "rb") as fh:
        text, _ = decode_text(fh.read())
    return ReadResult(path=shown, text=read_lines(text, from_line, lines))
