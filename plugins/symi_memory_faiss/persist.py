"""Saving and loading the faiss index file beside the SQLite store.

One file, ``<store>.faiss``: a magic line, a JSON header line (dims, kind,
identity, generation, counts), for HNSW the position -> rowid and alive
arrays, then the faiss index itself. It is written to a temp file, fsynced
and renamed over the old one, so a crash mid-save leaves the previous file.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from .indexes import FaissIndex, set_query_params
from .settings import FaissSettings

__all__ = ["MAGIC", "index_path", "load_index", "save_index"]

log = logging.getLogger("symi_memory.faiss")

MAGIC = b"SYMI-FAISS 1\n"


def index_path(store_path: Path) -> Path:
    return store_path.with_name(store_path.name + ".faiss")


def save_index(path: Path, index: FaissIndex, header: dict[str, Any]) -> None:
    """Write atomically: temp file, fsync, rename, fsync the folder."""
    import faiss

    head = dict(header, dims=index.dims, kind=index.kind, trainedOn=index.trained_on, live=index.live,
                positions=0 if index.positions is None else int(index.positions.size))
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(MAGIC)
            fh.write(json.dumps(head, sort_keys=True).encode("utf-8") + b"\n")
            if index.kind == "hnsw":
                fh.write(index.positions.tobytes())
                fh.write(index.alive.astype("uint8").tobytes())
            writer = faiss.PyCallbackIOWriter(fh.write)  # type: ignore[attr-defined]
            faiss.write_index(index.index, writer)
            del writer
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:  # some platforms cannot fsync a folder; the rename is still atomic
        pass


def read_header(path: Path) -> dict[str, Any] | None:
    """The JSON header of an index file, or None when it is missing or not ours."""
    try:
        with open(path, "rb") as fh:
            if fh.read(len(MAGIC)) != MAGIC:
                return None
            header = json.loads(fh.readline().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return header if isinstance(header, dict) else None


def load_index(path: Path, settings: FaissSettings, expect: dict[str, Any]) -> FaissIndex | None:
    """The saved index when its header matches ``expect`` (every key equal), else None."""
    import faiss
    import numpy as np

    header = read_header(path)
    if header is None:
        return None
    wrong = {k: (header.get(k), v) for k, v in expect.items() if header.get(k) != v}
    if wrong:
        log.info("faiss index %s is out of date (%s); rebuilding from the SQLite vectors", path,
                 ", ".join(f"{k}: {a!r} != {b!r}" for k, (a, b) in sorted(wrong.items())))
        return None
    try:
        with open(path, "rb") as fh:
            fh.read(len(MAGIC))
            fh.readline()
            positions = alive = None
            n = int(header["positions"])
            if header["kind"] == "hnsw":
                positions = np.frombuffer(fh.read(8 * n), dtype=np.int64).copy()
                alive = np.frombuffer(fh.read(n), dtype=np.uint8).astype(bool)
                if positions.size != n or alive.size != n:
                    raise ValueError("truncated position arrays")
            reader = faiss.PyCallbackIOReader(fh.read)  # type: ignore[attr-defined]
            raw = faiss.read_index(reader)
            del reader
    except Exception as exc:  # a damaged file is rebuilt, never trusted
        log.warning("faiss index %s is unreadable (%s); rebuilding from the SQLite vectors", path, exc)
        return None
    index = FaissIndex(kind=header["kind"], dims=int(header["dims"]), index=raw, settings=settings,
                       trained_on=int(header["trainedOn"]), positions=positions, alive=alive)
    if raw.d != index.dims or index.live != int(header["live"]):
        log.warning("faiss index %s does not match its header; rebuilding", path)
        return None
    set_query_params(index)
    return index


def remove_stale_temps(path: Path) -> None:
    """Delete temp files left by a save that was killed (their writer process is gone)."""
    for tmp in path.parent.glob(path.name + ".tmp*"):
        pid = tmp.name.rsplit(".tmp", 1)[-1]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
