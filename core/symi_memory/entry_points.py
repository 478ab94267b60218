"""Find the ``symi_memory`` entry points without importing :mod:`importlib.metadata`.

Every CLI call discovers the plugins first; ``importlib.metadata`` (with the
``email``, ``zipfile``, ``csv`` and ``importlib.resources`` modules it pulls
in) costs more than the rest of the discovery. The entry points are plain
``entry_points.txt`` files in the ``*.dist-info`` / ``*.egg-info`` folders on
``sys.path``; this reads only those, and the ``METADATA`` of the few
distributions that declare the group (for their name and version).

The answer is the one ``importlib.metadata.entry_points(group=...)`` gives:
distributions in ``sys.path`` order, the first one of each normalized name
wins. Where that cannot be promised (a zip or other non-folder entry on
``sys.path``, or an import finder that supplies distributions of its own),
:func:`find` asks ``importlib.metadata`` itself.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

__all__ = ["Distribution", "EntryPoint", "find"]


class Distribution:
    """The name and version of an installed distribution (what ``EntryPoint.dist`` offers)."""

    __slots__ = ("name", "version")

    def __init__(self, name: str, version: str) -> None:
        self.name = name
        self.version = version

    def __repr__(self) -> str:
        return f"Distribution({self.name!r}, {self.version!r})"


class EntryPoint:
    """One entry point: ``name = module:attr``; :meth:`load` imports it."""

    __slots__ = ("dist", "group", "name", "value")

    def __init__(self, name: str, value: str, group: str, dist: Distribution | None) -> None:
        self.name = name
        self.value = value
        self.group = group
        self.dist = dist

    def load(self) -> Any:
        import importlib

        target = self.value.split("[", 1)[0].strip()  # "[extras]" decide nothing at load time
        module_name, _, attr = target.partition(":")
        obj: Any = importlib.import_module(module_name.strip())
        for part in filter(None, attr.strip().split(".")):
            obj = getattr(obj, part)
        return obj

    def __repr__(self) -> str:
        return f"EntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def _section(text: str, group: str) -> list[tuple[str, str]]:
    """``(name, value)`` of each line in ``[group]`` of an ``entry_points.txt``."""
    out: list[tuple[str, str]] = []
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line[0] == "[" and line[-1] == "]":
            inside = line[1:-1].strip() == group
            continue
        if inside and "=" in line:
            name, _, value = line.partition("=")
            out.append((name.strip(), value.strip()))
    return out


def _headers(folder: str) -> tuple[str, str] | None:
    """``Name`` and ``Version`` from a distribution's ``METADATA`` (``PKG-INFO`` for eggs)."""
    for file in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(folder, file), encoding="utf-8", errors="replace") as fh:
                name = version = None
                for line in fh:
                    if not line.strip():
                        break  # the headers end at the first blank line
                    key, _, value = line.partition(":")
                    if key == "Name":
                        name = value.strip()
                    elif key == "Version":
                        version = value.strip()
                    if name is not None and version is not None:
                        break
                return (name, version or "") if name else None
        except OSError:
            continue
    return None


def _normalize(name: str) -> str:
    out = name.lower()
    for ch in "_.":
        out = out.replace(ch, "-")
    while "--" in out:
        out = out.replace("--", "-")
    return out


def _plain_paths() -> list[str] | None:
    """The ``sys.path`` folders to read, or None when ``importlib.metadata`` has to answer."""
    for finder in sys.meta_path:
        # The standard path finder is the only one of the interpreter's own that finds distributions.
        if hasattr(finder, "find_distributions") and getattr(finder, "__name__", "") != "PathFinder":
            return None
    paths = []
    for entry in sys.path:
        if not isinstance(entry, str):
            return None
        folder = entry or "."
        if os.path.isdir(folder):
            paths.append(folder)
        elif os.path.exists(folder):
            return None  # a zip on sys.path may hold distributions
    return paths


def _scan(paths: Iterable[str], group: str) -> list[EntryPoint]:
    seen: set[str] = set()
    out: list[EntryPoint] = []
    for folder in paths:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for entry in names:
            low = entry.lower()
            if not (low.endswith(".dist-info") or low.endswith(".egg-info")):
                continue
            key = _normalize(entry.rsplit(".", 1)[0].split("-", 1)[0])
            if key in seen:
                continue
            meta = os.path.join(folder, entry)
            if not os.path.isdir(meta):
                continue
            seen.add(key)
            try:
                with open(os.path.join(meta, "entry_points.txt"), encoding="utf-8") as fh:
                    text = fh.read()
            except OSError:
                continue
            if f"[{group}]" not in text.replace(" ", ""):
                continue
            found = _section(text, group)
            if not found:
                continue
            headers = _headers(meta)
            dist = Distribution(*headers) if headers else None
            out.extend(EntryPoint(name, value, group, dist) for name, value in found)
    return out


def find(group: str) -> list[Any]:
    """The entry points of ``group`` across the installed distributions."""
    paths = _plain_paths()
    if paths is None:
        from importlib import metadata

        return list(metadata.entry_points(group=group))
    return _scan(paths, group)
