"""Session transcripts as searchable documents (behaviour §8).

Transcripts live in ``<stateDir>/agents/<id>/sessions/*.jsonl``. Each line is
a JSON record; only ``{"type": "message"}`` records from the user or the
assistant count. A transcript becomes one text document whose lines read
``User: …`` / ``Assistant: …``, plus a map back to the JSONL line numbers so
hits can name the line they came from. Secrets are redacted here, before
the text goes anywhere else.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import attrs

from .redact import redact

__all__ = [
    "SESSIONS_PREFIX",
    "SessionDocument",
    "HEAD_BYTES",
    "extract_message_text",
    "head_hash",
    "list_session_files",
    "parse_session_bytes",
    "parse_session_file",
    "sessions_dir",
]

log = logging.getLogger("symi_memory.sessions")

SESSIONS_PREFIX = "sessions"
_ROLE_LABELS = {"user": "User", "assistant": "Assistant"}
HEAD_BYTES = 1024


def head_hash(data: bytes) -> str:
    """Short hash of the first ``HEAD_BYTES`` bytes; tells a rewritten transcript from a grown one."""
    return hashlib.sha256(data[:HEAD_BYTES]).hexdigest()[:16]


@attrs.frozen(kw_only=True)
class SessionDocument:
    """One transcript, ready for chunking.

    ``path`` is the stored path (``sessions/<file>.jsonl``). ``line_map[i]``
    is the 1-based JSONL line of text line ``i + 1``. ``size`` and
    ``newlines`` describe the bytes that were parsed (the delta tracker's
    baseline); ``content_hash`` is the sha256 of those bytes and
    ``head_hash`` that of their first ``HEAD_BYTES``.
    """

    path: str
    text: str
    line_map: tuple[int, ...]
    size: int = 0
    newlines: int = 0
    content_hash: str = ""
    head_hash: str = ""

    def jsonl_lines(self, start_line: int, end_line: int) -> tuple[int, int]:
        """Map an inclusive 1-based text line range to JSONL line numbers."""
        if not self.line_map:
            return (start_line, end_line)
        last = len(self.line_map)
        start = self.line_map[min(max(start_line, 1), last) - 1]
        end = self.line_map[min(max(end_line, 1), last) - 1]
        return (start, end)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "text": self.text, "lineMap": list(self.line_map)}


def sessions_dir(state_dir: str | Path, agent_id: str = "main") -> Path:
    """Return ``<stateDir>/agents/<agentId>/sessions``."""
    return Path(state_dir).expanduser() / "agents" / agent_id / "sessions"


def list_session_files(directory: str | Path) -> list[Path]:
    """List the regular ``*.jsonl`` files of a sessions directory, sorted; symlinks are skipped."""
    root = Path(directory)
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("*.jsonl") if p.is_file() and not p.is_symlink())


def extract_message_text(content: Any) -> str:
    """Return the text of a message's content: a string, or the ``{"type": "text"}`` parts.

    Whitespace is collapsed to single spaces; anything else yields ``""``.
    """
    if isinstance(content, str):
        pieces = [content]
    elif isinstance(content, list):
        pieces = [
            part["text"]
            for part in content
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        ]
    else:
        return ""
    return " ".join(" ".join(pieces).split())


def _message_line(raw: str) -> str | None:
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("type") != "message":
        return None
    message = record.get("message")
    if not isinstance(message, dict):
        return None
    role = message.get("role")
    label = _ROLE_LABELS.get(role) if isinstance(role, str) else None
    if label is None:
        return None
    text = extract_message_text(message.get("content"))
    if not text:
        return None
    # Redacting the single line keeps the line map exact: redact() never adds newlines.
    line = f"{label}: {redact(text)}"
    # JSON may carry lone surrogates ("\\ud800"), which no UTF-8 store or provider accepts.
    return line.encode("utf-8", "replace").decode("utf-8")


def parse_session_bytes(data: bytes, name: str) -> SessionDocument:
    """Parse transcript bytes; ``name`` is the file name (``abc.jsonl``)."""
    lines: list[str] = []
    line_map: list[int] = []
    skipped = 0
    for number, raw in enumerate(data.decode("utf-8", errors="replace").split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            line = _message_line(raw)
        except Exception as exc:  # one odd record must never cost the rest of the transcript
            log.warning("%s line %d: skipped (%s: %s)", name, number, type(exc).__name__, exc)
            line = None
        if line is None:
            skipped += 1
            continue
        lines.append(line)
        line_map.append(number)
    if skipped:
        log.debug("%s: skipped %d non-message or invalid lines", name, skipped)
    return SessionDocument(
        path=f"{SESSIONS_PREFIX}/{name}",
        text="\n".join(lines),
        line_map=tuple(line_map),
        size=len(data),
        newlines=data.count(b"\n"),
        content_hash=hashlib.sha256(data).hexdigest(),
        head_hash=head_hash(data),
    )


def parse_session_file(path: str | Path) -> SessionDocument:
    """Read and parse one transcript file (read once, so size and text agree)."""
    p = Path(path)
    return parse_session_bytes(p.read_bytes(), p.name)


#: The times a message may carry (epoch seconds): days every ``datetime`` can show, in any time zone.
_FIRST_STAMP = -62_135_510_400.0  # 0001-01-02T00:00:00Z
_LAST_STAMP = 253_402_128_000.0  # 9999-12-30T00:00:00Z


def epoch_seconds(value: float) -> float:
    """An epoch timestamp in seconds, from seconds, milliseconds, microseconds or nanoseconds.

    The unit is told by the size (any date from 1973 to 5138 reads right): above 1e17 nanoseconds,
    above 1e14 microseconds, above 1e11 milliseconds, else seconds.
    """
    if value > 1e17:
        return value / 1e9
    if value > 1e14:
        return value / 1e6
    if value > 1e11:
        return value / 1e3
    return float(value)


def message_times(directory: str | Path, path: str, start_line: int, end_line: int) -> tuple[float, float] | None:
    """``(first, last)`` ``timestamp`` of the transcript records on JSONL lines ``start_line..end_line``.

    ``path`` is the stored ``sessions/<file>.jsonl``. Timestamps are ISO
    datetimes (``2026-03-01T10:00:00Z``) or epoch seconds, milliseconds, microseconds or
    nanoseconds (:func:`epoch_seconds`);
    None when no record in the range has one.
    """
    from datetime import UTC, datetime

    name = path[len(SESSIONS_PREFIX) + 1:] if path.startswith(SESSIONS_PREFIX + "/") else None
    if not name or "/" in name:
        return None
    stamps: list[float] = []
    try:
        # Opened as the indexer reads it: a transcript swapped for a FIFO since the sync must not hang the search,
        # nor one swapped for a symlink be read through it.
        fd = os.open(Path(directory) / name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with open(fd, encoding="utf-8", errors="replace") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            for number, raw in enumerate(fh, start=1):
                if number < start_line:
                    continue
                if number > end_line:
                    break
                try:
                    value = json.loads(raw).get("timestamp")
                except Exception:  # any line (nested too deep for the decoder, not an object) is only skipped
                    continue
                seconds: float | None = None
                if isinstance(value, int | float) and not isinstance(value, bool):
                    try:
                        seconds = epoch_seconds(value)
                    except OverflowError:  # an integer of hundreds of digits: no clock wrote it
                        continue
                elif isinstance(value, str):
                    try:
                        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
                    except ValueError:
                        continue
                    seconds = (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
                # NaN, infinity and times outside the calendar (which no date can show) are left out.
                if seconds is not None and _FIRST_STAMP <= seconds <= _LAST_STAMP:
                    stamps.append(seconds)
    except OSError:
        return None
    return (min(stamps), max(stamps)) if stamps else None
