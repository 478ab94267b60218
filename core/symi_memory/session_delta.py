"""Which session transcripts grew enough to be worth reindexing (behaviour §8).

Transcripts are append-only and change every turn, so reindexing on every
write would be wasteful. The tracker compares each file with the baseline
recorded when it was last indexed and reports the files that crossed
``deltaBytes`` or ``deltaMessages`` (JSONL lines), or that were truncated,
rewritten or deleted.

State: the tracker keeps ``{path: {size, newlines, head}}``. Pass
``state_path`` (the manager uses a JSON file next to the index, e.g.
``<dbPath>.sessions.json``) to persist it across runs; without it the
state lives in memory and the caller may store ``state`` itself.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import attrs

from .sessions import HEAD_BYTES, SessionDocument, head_hash

__all__ = ["SessionDelta", "SessionDeltaTracker"]

log = logging.getLogger("symi_memory.sessions")

DeltaReason = Literal["bytes", "messages", "truncated", "rewritten", "deleted"]


@attrs.frozen(kw_only=True)
class SessionDelta:
    """A transcript that needs reindexing, and why."""

    path: str
    bytes_added: int
    messages_added: int
    reason: DeltaReason

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "bytesAdded": self.bytes_added,
            "messagesAdded": self.messages_added,
            "reason": self.reason,
        }


@attrs.define
class SessionDeltaTracker:
    """Reports transcripts whose growth since the last index crossed a threshold."""

    delta_bytes: int = 100_000
    delta_messages: int = 50
    state_path: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    state: dict[str, dict[str, Any]] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        if self.state_path is not None and self.state_path.exists() and not self.state:
            try:
                loaded = json.loads(self.state_path.read_text(encoding="utf-8"))
                self.state = {k: v for k, v in loaded.get("files", {}).items() if isinstance(v, dict)}
            except (OSError, ValueError, AttributeError) as exc:
                # Losing the baseline only costs one extra reindex, so start fresh.
                log.warning("session delta state %s unreadable (%s); starting fresh", self.state_path, exc)
                self.state = {}

    def _delta(self, path: Path) -> SessionDelta | None:
        key = str(path)
        base = self.state.get(key, {"size": 0, "newlines": 0, "head": ""})
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return SessionDelta(path=key, bytes_added=0, messages_added=0, reason="deleted")
        old_size = int(base.get("size", 0))
        if size < old_size:
            return SessionDelta(path=key, bytes_added=0, messages_added=0, reason="truncated")
        if size == old_size:
            return None
        with path.open("rb") as fh:
            head = fh.read(min(HEAD_BYTES, old_size))
            if old_size and base.get("head") and head_hash(head) != base["head"]:
                return SessionDelta(path=key, bytes_added=size, messages_added=0, reason="rewritten")
            fh.seek(old_size)
            added = fh.read(size - old_size)
        grown, lines = len(added), added.count(b"\n")
        if self.delta_bytes > 0 and grown >= self.delta_bytes:
            return SessionDelta(path=key, bytes_added=grown, messages_added=lines, reason="bytes")
        if self.delta_messages > 0 and lines >= self.delta_messages:
            return SessionDelta(path=key, bytes_added=grown, messages_added=lines, reason="messages")
        return None

    def due(self, files: Iterable[str | Path]) -> list[SessionDelta]:
        """Return the deltas of ``files`` (plus known files now missing) that need reindexing."""
        seen: set[str] = set()
        out: list[SessionDelta] = []
        for f in files:
            p = Path(f)
            seen.add(str(p))
            delta = self._delta(p)
            if delta is not None:
                out.append(delta)
        for key in sorted(set(self.state) - seen):
            if not Path(key).exists():
                out.append(SessionDelta(path=key, bytes_added=0, messages_added=0, reason="deleted"))
        return out

    def mark_indexed(self, path: str | Path, document: SessionDocument | None = None) -> None:
        """Record ``path`` as indexed up to what was parsed (``document``), or forget it (``None``).

        Pass the ``SessionDocument`` produced from the same read, so bytes
        appended after parsing still count as new next time.
        """
        key = str(Path(path))
        if document is None:
            self.state.pop(key, None)
            return
        self.state[key] = {"size": document.size, "newlines": document.newlines, "head": document.head_hash}

    def save(self) -> None:
        """Write the state atomically to ``state_path`` (no-op without one)."""
        if self.state_path is None:
            return
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(
            prefix=self.state_path.name + ".", suffix=".tmp", dir=self.state_path.parent
        )
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"version": 1, "files": self.state}, fh, indent=1, sort_keys=True)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.state_path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
