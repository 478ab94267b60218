"""The json-index backend: the memory files' chunks in one JSON file, searched by keyword overlap."""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from symi_memory.chunking import chunk_text
from symi_memory.errors import BackendError
from symi_memory.specs import BackendContext
from symi_memory.types import BackendResult, Candidate, ReadResult, SearchQuery, SyncProgress, SyncReport
from symi_memory.workspace import PathRules, absent_roots, decode_text, list_memory_files, read_regular

from .hooks import PLUGIN_ID

__all__ = ["JsonIndexBackend"]

log = logging.getLogger("symi_memory.json_index")

WORD_RE = re.compile(r"\w+")
FORMAT = 1


def _terms(text: str) -> Counter[str]:
    return Counter(w.lower() for w in WORD_RE.findall(text))


@attrs.define
class JsonIndexBackend:
    """Follows :class:`symi_memory.specs.MemoryBackend` and :class:`~symi_memory.specs.StalenessAware`."""

    workspace: Path
    extra_paths: tuple[str, ...]
    index_path: Path
    tokens: int
    overlap: int
    max_chunks: int
    files: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    @classmethod
    def from_context(cls, ctx: BackendContext) -> JsonIndexBackend:
        """Read the settings this backend needs from the core's context and load the index file."""
        agent = ctx.agent
        settings = ctx.plugin_settings  # plugins.entries.json-index, defaults filled in
        chunking = agent.memory_search["chunking"]
        backend = cls(workspace=agent.workspace, extra_paths=tuple(agent.memory_search.get("extraPaths") or ()),
                      index_path=agent.state_dir / "agents" / agent.id / settings["fileName"],
                      tokens=chunking["tokens"], overlap=chunking["overlap"], max_chunks=settings["maxChunks"])
        backend.files = backend._load()
        return backend

    # ------------------------------------------------------------- the file

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.index_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            # A damaged index is rebuilt by the next sync; the Markdown files are the truth.
            log.warning("%s: unreadable (%s); the next sync rebuilds it", self.index_path, exc)
            return {}
        return data.get("files", {}) if isinstance(data, dict) and data.get("format") == FORMAT else {}

    def _save(self) -> None:
        self.index_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.index_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"format": FORMAT, "files": self.files}), encoding="utf-8")
        os.replace(tmp, self.index_path)  # readers in other processes see the old or the new file, whole

    # ------------------------------------------------------------------ sync

    def is_stale(self, *, retry_pending: bool = True) -> bool:
        """Whether a memory file was added, changed or removed since the last sync."""
        absent = absent_roots(self.workspace, self.extra_paths)
        listed = {f.path: (f.mtime, f.size) for f in list_memory_files(self.workspace, self.extra_paths)}
        kept = {p for p in self.files if p not in listed and any(root.holds(p) for root in absent)}
        return listed != {p: (e["mtime"], e["size"]) for p, e in self.files.items() if p not in kept}

    def sync(self, *, reason: str = "manual", force: bool = False,
             progress: Callable[[SyncProgress], None] | None = None) -> SyncReport:
        """Re-chunk the files whose mtime or size changed, drop the removed ones, write the file once."""
        started = time.monotonic()
        with self._lock:
            # A workspace or extra folder away for a while (renamed, unmounted): its files are not deleted ones.
            absent = absent_roots(self.workspace, self.extra_paths)
            listed = list_memory_files(self.workspace, self.extra_paths)
            fresh: dict[str, dict[str, Any]] = {
                p: e for p, e in self.files.items() if any(root.holds(p) for root in absent)}
            indexed = 0
            for i, f in enumerate(listed):
                old = self.files.get(f.path)
                if old is not None and not force and (old["mtime"], old["size"]) == (f.mtime, f.size):
                    fresh[f.path] = old
                    continue
                try:
                    data, _ = read_regular(f.abs_path)  # never a symlink's target, never waits on a FIFO
                except OSError as exc:  # swapped for either since the listing, or gone: left out
                    log.warning("%s: not indexed (%s)", f.path, exc.strerror or exc)
                    continue
                text, _ = decode_text(data)
                chunks = [[c.start_line, c.end_line, c.text] for c in chunk_text(text, self.tokens, self.overlap)]
                fresh[f.path] = {"mtime": f.mtime, "size": f.size, "chunks": chunks}
                indexed += 1
                if progress is not None:
                    progress(SyncProgress(phase="index", done=i + 1, total=len(listed), path=f.path))
            total = sum(len(e["chunks"]) for e in fresh.values())
            if total > self.max_chunks:
                raise BackendError(f"{total} chunks exceed plugins.entries.{PLUGIN_ID}.maxChunks = {self.max_chunks}; "
                                   f"raise it or index fewer files")
            removed = len(set(self.files) - set(fresh))
            self.files = fresh
            self._save()
        return SyncReport(reason=reason, full=force, files_scanned=len(listed), files_indexed=indexed,
                          files_removed=removed, chunks_written=total, seconds=time.monotonic() - started)

    # ---------------------------------------------------------------- search

    def search(self, query: SearchQuery) -> BackendResult:
        """Score each chunk by the share of query terms it holds, damped by how often; never waits for sync."""
        wanted = set(_terms(query.text))
        if not wanted or "memory" not in query.sources:
            return BackendResult(candidates=(), mode="fts-only", provider="none")
        found = []
        for path, entry in self.files.items():
            for start, end, text in entry["chunks"]:
                have = _terms(text)
                matched = wanted & set(have)
                if not matched:
                    continue
                count = sum(have[w] for w in matched)
                # In 0..1 and below 1: the core's minScore cuts these scores like any backend's.
                score = len(matched) / len(wanted) * count / (count + 1)
                found.append(Candidate(id=f"{path}#{start}-{end}", path=path, start_line=start, end_line=end,
                                       score=score, text=text, text_score=score, mtime=entry["mtime"]))
        found.sort(key=lambda c: -c.score)
        return BackendResult(candidates=tuple(found[: query.candidate_limit]), mode="fts-only", provider="none")

    # ------------------------------------------------------ memory_get, status

    def read_file(self, path: str, *, from_line: int | None = None, lines: int | None = None) -> ReadResult:
        """``memory_get`` under the core's path rules (memory files only, no symlinks, no escapes)."""
        return PathRules.from_workspace(self.workspace, self.extra_paths).read(path, from_line=from_line, lines=lines)

    def status(self) -> dict[str, Any]:
        """The core adds ``backend`` (the spec's short name, ``json``) and ``plugin``."""
        return {"files": len(self.files), "chunks": sum(len(e["chunks"]) for e in self.files.values()),
                "dirty": self.is_stale(), "workspaceDir": str(self.workspace), "indexPath": str(self.index_path),
                "provider": "none", "model": None}

    def close(self) -> None:
        """Nothing to release: the file is written whole by each sync."""
