"""Exporting session transcripts as Markdown for the ``sessions-<agent>`` collection.

Each ``<stateDir>/agents/<id>/sessions/<name>.jsonl`` becomes ``<name>.md``
holding the redacted ``User: …`` / ``Assistant: …`` lines (behaviour §8), one
text line per line, so qmd's line numbers are the transcript's text lines.
A manifest remembers each source's size and mtime so unchanged transcripts
are not rewritten (a rewrite would make qmd re-index them).
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import attrs

from symi_memory.sessions import list_session_files, parse_session_file

__all__ = ["ExportReport", "export_sessions"]

log = logging.getLogger("symi_memory.qmd")

MANIFEST = ".symi-export.json"


@attrs.frozen(kw_only=True)
class ExportReport:
    """What one export pass did (file names of the exports)."""

    written: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unchanged: int = 0


def _load(path: Path) -> dict[str, dict[str, int]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def export_sessions(
    source_dir: Path, export_dir: Path, *, retention_days: float | None = None, now: float | None = None
) -> ExportReport:
    """Bring ``export_dir`` in line with the transcripts in ``source_dir``."""
    export_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = export_dir / MANIFEST
    manifest = _load(manifest_path)
    cutoff = None if retention_days is None else (now if now is not None else time.time()) - retention_days * 86400
    keep: dict[str, dict[str, int]] = {}
    written, unchanged = [], 0
    for src in list_session_files(source_dir):
        st = src.stat()
        if cutoff is not None and st.st_mtime < cutoff:
            continue
        name = src.stem + ".md"
        stamp = {"size": st.st_size, "mtimeNs": st.st_mtime_ns}
        target = export_dir / name
        if manifest.get(name) == stamp and target.is_file():
            keep[name] = stamp
            unchanged += 1
            continue
        try:
            doc = parse_session_file(src)
        except OSError as exc:
            log.warning("cannot export session transcript %s: %s", src, exc)
            continue
        tmp = target.with_suffix(".md.tmp")
        tmp.write_text(doc.text + ("\n" if doc.text else ""), encoding="utf-8")
        os.replace(tmp, target)
        keep[name] = stamp
        written.append(name)
    removed = []
    for old in sorted(export_dir.glob("*.md")):
        if old.name not in keep:
            old.unlink(missing_ok=True)
            removed.append(old.name)
    manifest_path.write_text(json.dumps(keep, sort_keys=True), encoding="utf-8")
    return ExportReport(written=tuple(written), removed=tuple(removed), unchanged=unchanged)
