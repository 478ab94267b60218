"""Paths between qmd (``qmd://<collection>/<rel>``) and the memory tools.

A hit inside the workspace gets its workspace-relative path; anything else
becomes ``qmd/<collection>/<rel>``, which ``memory_get`` resolves inside the
collection's root, within its mask, through the core's
:class:`symi_memory.workspace.PathRules` like every backend. Transcript
collections (``sessions-<agent>``) are never read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from symi_memory.errors import PathRefused
from symi_memory.types import ReadResult
from symi_memory.workspace import PathRules, check_request_path

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


def _collection_rules(path: str, collections: Mapping[str, CollectionSpec]) -> tuple[PathRules, str]:
    text = check_request_path(path).replace("\\", "/")
    parts = text.split("/", 2)
    if len(parts) < 3 or parts[0] != "qmd" or not parts[1] or not parts[2].strip("/"):
        raise PathRefused("invalid qmd path")
    name, rel = parts[1], parts[2]
    spec = collections.get(name)
    if spec is None:
        raise PathRefused(f"unknown qmd collection: {name}")
    if spec.source != "memory":
        # Exported transcripts are searchable, never readable whole: the builtin refuses them too.
        raise PathRefused()
    if os.path.isabs(rel) or rel.startswith("~"):
        raise PathRefused("qmd path escapes collection")
    # The same rules as every backend: inside the root, within its mask, no symlink, no ignored directory.
    return PathRules.for_directory(spec.path, spec.pattern, escape_message="qmd path escapes collection"), rel


def resolve_qmd_path(path: str, collections: Mapping[str, CollectionSpec]) -> str:
    """Return the absolute file for ``qmd/<collection>/<rel>`` or raise :class:`PathRefused`."""
    rules, rel = _collection_rules(path, collections)
    return rules.resolve(rel)[0]


def read_qmd_path(
    path: str, collections: Mapping[str, CollectionSpec], *, from_line: int | None = None, lines: int | None = None
) -> ReadResult:
    """``memory_get`` for a ``qmd/`` path: a missing file gives empty text."""
    rules, rel = _collection_rules(path, collections)
    return rules.read(rel, from_line=from_line, lines=lines, shown=path.strip().replace("\\", "/"))
