"""Exporting session transcripts as Markdown for the ``sessions-<agent>`` collection.

Each ``<stateDir>/agents/<id>/sessions/<name>.jsonl`` becomes ``<name>.md``
holding the redacted ``User: …`` / ``Assistant: …`` lines (behaviour §8), one
text line per line, so qmd's line numbers are the transcript's text lines.
A manifest remembers each source's size and mtime so unchanged transcripts
are not rewritten (a rewrite would make qmd re-index them), and where each read stopped: a transcript that
only grew is read from there and its new lines appended to its export (:func:`~symi_memory.sessions.read_transcript`).

A transcript is read a line at a time and its newest messages are exported, up to
``memorySearch.sync.maxFileBytes`` of text, as builtin-sqlite indexes it: memory holds
that much at most, whatever the file's size, and qmd is handed that much per session.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import attrs

from symi_memory.sessions import SESSIONS_PREFIX, TranscriptMark, list_session_files, read_transcript
from symi_memory.workspace import printable_path, why_unlistable

__all__ = ["ExportReport", "export_sessions"]

log = logging.getLogger("symi_memory.qmd")

MANIFEST = ".symi-export.json"
#: ``memorySearch.sync.maxFileBytes``'s default: the most message text one export holds.
DEFAULT_MAX_BYTES = 10_000_000


@attrs.frozen(kw_only=True)
class ExportReport:
    """What one export pass did (file names of the exports)."""

    written: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unchanged: int = 0
    #: ``{"sessions/<name>.jsonl": why}`` of the transcripts exported in part (their messages exceed the limit).
    partial: dict[str, str] = attrs.field(factory=dict)


def _load(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def export_sessions(
    source_dir: Path, export_dir: Path, *, retention_days: float | None = None, now: float | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> ExportReport:
    """Bring ``export_dir`` in line with the transcripts in ``source_dir``.

    Each export holds the transcript's newest messages, up to ``max_bytes`` of text (``partial`` names the
    transcripts with older messages left out).

    One transcript that cannot be read or written (gone since the listing, swapped for a FIFO, no permission) is
    skipped with a warning, keeping its last export, and every export is kept while ``source_dir`` is there but
    cannot be listed; only a folder or manifest that cannot be written raises ``OSError``.
    """
    export_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = export_dir / MANIFEST
    manifest = _load(manifest_path)
    if why_unlistable(source_dir) is not None:
        # A transcripts folder that cannot be listed for a while (chmod 000) is not every transcript deleted: the
        # exports stay as they are (qmd keeps them indexed); the backend's warnings name the folder.
        kept = {f"{SESSIONS_PREFIX}/{name[:-3]}.jsonl": entry["partial"] for name, entry in manifest.items()
                if name.endswith(".md") and isinstance(entry, dict) and isinstance(entry.get("partial"), str)}
        return ExportReport(unchanged=len(manifest), partial=kept)
    cutoff = None if retention_days is None else (now if now is not None else time.time()) - retention_days * 86400
    keep: dict[str, dict[str, Any]] = {}
    written, unchanged = [], 0
    partial: dict[str, str] = {}
    for src in list_session_files(source_dir):
        if printable_path(src.name) != src.name:
            continue  # qmd could not read its export's name either: status lists it (skipped), as the builtin does
        name = src.stem + ".md"
        target = export_dir / name
        try:
            st = src.stat()
        except FileNotFoundError:
            continue  # gone since the listing: its export goes below
        except OSError as exc:
            _keep_last(keep, manifest, name, target, src, exc)
            continue
        if cutoff is not None and st.st_mtime < cutoff:
            continue
        stamp = {"size": st.st_size, "mtimeNs": st.st_mtime_ns, "maxBytes": max_bytes}
        before = manifest.get(name)
        if isinstance(before, dict) and {k: before.get(k) for k in stamp} == stamp and target.is_file():
            keep[name] = before
            if isinstance(before.get("partial"), str):
                partial[f"{SESSIONS_PREFIX}/{src.name}"] = before["partial"]
            unchanged += 1
            continue
        tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
        try:
            # Read like the indexer reads a listed file (no FIFO wait, no symlink followed), a line at a time; only
            # what was appended since the last export when the transcript only grew and the export is as written.
            since = _since(before, target)
            doc, st = read_transcript(str(src), max_bytes=max_bytes, since=since)
            text = doc.text + ("\n" if doc.text else "")
            if doc.since is not None:
                with target.open("a", encoding="utf-8") as fh:
                    fh.write(text)
                exported = int(before["exported"]) + len(text.encode("utf-8"))  # type: ignore[index]
            else:
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, target)
                exported = len(text.encode("utf-8"))
        except FileNotFoundError:
            tmp.unlink(missing_ok=True)
            continue
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            _keep_last(keep, manifest, name, target, src, exc)
            continue
        # The stamp of the bytes exported: a transcript that grew since the listing is exported again next time.
        keep[name] = {"size": doc.size, "mtimeNs": st.st_mtime_ns, "maxBytes": max_bytes, "exported": exported}
        if doc.mark is not None:
            keep[name]["mark"] = doc.mark.to_dict()
        why = doc.partial_reason(max_bytes)
        if why is not None:
            keep[name]["partial"] = partial[f"{SESSIONS_PREFIX}/{src.name}"] = why
        written.append(name)
    removed = []
    for old in sorted(export_dir.glob("*.md")):
        if old.name not in keep:
            try:
                old.unlink(missing_ok=True)
            except OSError as exc:
                log.warning("cannot remove the old session export %s: %s", old, exc)
                continue
            removed.append(old.name)
    tmp = manifest_path.with_name(f"{manifest_path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(json.dumps(keep, sort_keys=True), encoding="utf-8")
        os.replace(tmp, manifest_path)
    finally:
        tmp.unlink(missing_ok=True)
    return ExportReport(written=tuple(written), removed=tuple(removed), unchanged=unchanged, partial=partial)


def _since(before: Any, target: Path) -> TranscriptMark | None:
    """Where the last export of a transcript stopped reading it, when its export is still the one it wrote (its
    size as recorded: an export cut short or appended to twice by a killed run is written whole again)."""
    if not isinstance(before, dict) or not isinstance(before.get("exported"), int):
        return None
    mark = TranscriptMark.from_dict(before.get("mark"))
    try:
        return mark if mark is not None and target.stat().st_size == before["exported"] else None
    except OSError:
        return None


def _keep_last(keep: dict[str, dict[str, Any]], manifest: dict[str, dict[str, Any]], name: str, target: Path,
               src: Path, exc: OSError) -> None:
    """A transcript that cannot be exported now keeps the export it has (its stamp, so it is tried again)."""
    log.warning("cannot export session transcript %s: %s", src, exc.strerror or exc)
    if name in manifest and target.is_file():
        keep[name] = {"size": -1, "mtimeNs": -1}  # kept, and never taken for current
