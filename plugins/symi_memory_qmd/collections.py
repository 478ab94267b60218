"""Which qmd collections an agent has, and bringing qmd in line with them.

Names follow behaviour §7: ``memory-root-<agent>`` (the workspace, mask
``MEMORY.md``), ``memory-alt-<agent>`` (``memory.md``), ``memory-dir-<agent>``
(``memory/``, ``**/*.md``), one per ``memory.qmd.paths[]`` entry, and
``sessions-<agent>`` for exported transcripts. Names are lower-case
``[a-z0-9-]``; clashes get ``-2``, ``-3``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from .runner import QmdFailed, QmdRunner

__all__ = ["CollectionSpec", "derive_collections", "reconcile_collections", "slug"]

log = logging.getLogger("symi_memory.qmd")

_LIST_LINE = re.compile(r"^(\S.*?) \(qmd://")
_SAME_PATH = re.compile(r"Name:\s*(\S+)\s*\(qmd://")


@attrs.frozen(kw_only=True)
class CollectionSpec:
    """One collection: ``path`` is an absolute directory, ``pattern`` a qmd glob."""

    name: str
    path: Path
    pattern: str
    source: str = "memory"
    #: The folder or ``.md`` file a ``memory.qmd.paths[]`` entry (or an extra path) names, resolved; None for the
    #: workspace's own collections and the transcripts'. While it is absent qmd keeps what it indexed from it.
    root: Path | None = None


def slug(text: str) -> str:
    """Lower-case ``[a-z0-9-]`` form of a name (``My Notes`` -> ``my-notes``)."""
    out = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return out or "collection"


def derive_collections(
    *,
    agent_id: str,
    workspace: Path,
    paths: Sequence[Mapping[str, Any] | str] = (),
    include_default_memory: bool = True,
    sessions_dir: Path | None = None,
) -> list[CollectionSpec]:
    """Build the collection list from the workspace, ``paths[]`` and sessions."""
    agent = slug(agent_id)
    wanted: list[tuple[str, Path, str, str, Path | None]] = []
    if include_default_memory:
        wanted += [
            (f"memory-root-{agent}", workspace, "MEMORY.md", "memory", None),
            (f"memory-alt-{agent}", workspace, "memory.md", "memory", None),
            (f"memory-dir-{agent}", workspace / "memory", "**/*.md", "memory", None),
        ]
    for i, entry in enumerate(paths):
        item = {"path": entry} if isinstance(entry, str) else dict(entry)
        raw = str(item.get("path") or "").strip()
        if not raw:
            raise ValueError(f"memory.qmd.paths[{i}].path is empty; give a directory or .md file")
        target = Path(raw).expanduser()
        root = target = (target if target.is_absolute() else workspace / target).resolve()
        pattern = str(item.get("pattern") or "**/*.md")
        if target.suffix == ".md" and not target.is_dir():
            # qmd indexes directories; a single file is its parent with the file as the mask.
            target, pattern = target.parent, target.name
        wanted.append((slug(str(item.get("name") or target.name)), target, pattern, "memory", root))
    if sessions_dir is not None:
        wanted.append((f"sessions-{agent}", sessions_dir, "**/*.md", "sessions", None))
    taken: set[str] = set()
    out = []
    for name, path, pattern, source, named in wanted:
        unique, n = name, 1
        while unique in taken:
            n += 1
            unique = f"{name}-{n}"
        taken.add(unique)
        out.append(CollectionSpec(name=unique, path=path, pattern=pattern, source=source, root=named))
    return out


def _existing(runner: QmdRunner, timeout_ms: int) -> set[str]:
    text = runner.run(["collection", "list"], timeout_ms=timeout_ms).stdout
    return {m.group(1) for line in text.splitlines() if (m := _LIST_LINE.match(line))}


def _shown(runner: QmdRunner, name: str, timeout_ms: int) -> tuple[str, str]:
    text = runner.run(["collection", "show", name], timeout_ms=timeout_ms).stdout
    fields = dict(re.findall(r"^\s+(Path|Pattern):\s+(.*?)\s*$", text, re.MULTILINE))
    return fields.get("Path", ""), fields.get("Pattern", "")


def _add(runner: QmdRunner, spec: CollectionSpec, timeout_ms: int) -> str:
    """Add the collection; return what qmd said (it indexes the collection's files as it adds it)."""
    args = ["collection", "add", str(spec.path), "--name", spec.name, "--mask", spec.pattern]
    try:
        return runner.run(args, timeout_ms=timeout_ms).stdout
    except QmdFailed as exc:
        said = exc.stderr + exc.stdout
        if f"'{spec.name}' already exists" in said:
            return ""
        other = _SAME_PATH.search(said)
        if other is None or other.group(1) == spec.name:
            raise
        # A stale collection (an old name) owns this path+pattern in our private home.
        runner.run(["collection", "remove", other.group(1)], timeout_ms=timeout_ms)
        return runner.run(args, timeout_ms=timeout_ms).stdout


def reconcile_collections(runner: QmdRunner, specs: Sequence[CollectionSpec], *, timeout_ms: int,
                          added: dict[str, str] | None = None, later: Collection[str] = ()) -> list[str]:
    """Add missing collections and re-add changed ones; return the names not yet creatable.

    ``added`` gets, per collection added, what ``qmd collection add`` said (the files it indexed). The collections
    named in ``later`` are not added now (pending): a folder in them cannot be read, which would fail the add.

    A collection whose directory does not exist yet (an agent without
    ``memory/``) is skipped and reported, so the caller can try again later;
    one qmd already has as this spec defines it stays (a folder away for a
    while: what qmd indexed from it is still searched).
    """
    existing = _existing(runner, timeout_ms)
    pending = []
    for spec in specs:
        if spec.name in existing:
            path, pattern = _shown(runner, spec.name, timeout_ms)
            if Path(path).resolve() == spec.path.resolve() and pattern == spec.pattern:
                continue
            if not spec.path.is_dir() or spec.name in later:
                pending.append(spec.name)  # changed while away: re-added once it is there (and can be read)
                continue
            log.info("qmd collection %s changed (%s %s -> %s %s); re-adding", spec.name, path, pattern, spec.path, spec.pattern)
            runner.run(["collection", "remove", spec.name], timeout_ms=timeout_ms)
        elif not spec.path.is_dir() or spec.name in later:
            pending.append(spec.name)
            continue
        said = _add(runner, spec, timeout_ms)
        if added is not None:
            added[spec.name] = said
    return pending
