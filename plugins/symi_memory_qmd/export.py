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

from symi_memory.sessions import list_session_files, parse_session_bytes
from symi_memory.workspace import read_regular

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
    """Bring ``export_dir`` in line with the transcripts in ``source_dir``.

    One transcript that cannot be read or written (gone since the listing, swapped for a FIFO, no permission) is
    skipped with a warning, keeping its last export; only a folder or manifest that cannot be written raises
    ``OSError``.
    """
    export_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = export_dir / MANIFEST
    manifest = _load(manifest_path)
    cutoff = None if retention_days is None else (now if now is not None else time.time()) - retention_days * 86400
    keep: dict[str, dict[str, int]] = {}
    written, unchanged = [], 0
    for src in list_session_files(source_dir):
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
        stamp = {"size": st.st_size, "mtimeNs": st.st_mtime_ns}
        if manifest.get(name) == stamp and target.is_file():
            keep[name] = stamp
            unchanged += 1
            continue
        tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
        try:
            # Read like the indexer reads a listed file: no FIFO wait, no symlink followed.
            data, st = read_regular(str(src))
            doc = parse_session_bytes(data, src.name)
            tmp.write_text(doc.text + ("\n" if doc.text else ""), encoding="utf-8")
            os.replace(tmp, target)
        except FileNotFoundError:
            tmp.unlink(missing_ok=True)
            continue
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            _keep_last(keep, manifest, name, target, src, exc)
            continue
        # The stamp of the bytes exported: a transcript that grew since the listing is exported again next time.
        keep[name] = {"size": len(data), "mtimeNs": st.st_mtime_ns}
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
    return ExportReport(written=tuple(written), removed=tuple(removed), unchanged=unchanged)


def _keep_last(keep: dict[str, dict[str, int]], manifest: dict[str, dict[str, int]], name: str, target: Path,
               src: Path, exc: OSError) -> None:
    """A transcript that cannot be exported now keeps the export it has (its stamp, so it is tried again)."""
    log.warning("cannot export session transcript %s: %s", src, exc.strerror or exc)
    if name in manifest and target.is_file():
        keep[name] = {"size": -1, "mtimeNs": -1}  # kept, and never taken for current
