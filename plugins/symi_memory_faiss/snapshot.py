"""Reading every chunk vector of the SQLite index as one consistent snapshot."""

from __future__ import annotations

import uuid
from typing import Any

import attrs

from symi_memory.index.store import IndexStore

__all__ = ["Snapshot", "read_snapshot", "store_uid", "vector_stats"]

STORE_UID_KEY = "faiss_store_uid"


@attrs.frozen
class Snapshot:
    generation: int
    dims: int
    rowids: Any  # int64 array
    matrix: Any  # float32, unit rows


def store_uid(store: IndexStore) -> str:
    """A random id of this SQLite file, so an index saved for a deleted and recreated store is never reused."""
    uid = store.get_meta(STORE_UID_KEY)
    if uid is None:
        uid = uuid.uuid4().hex
        store.set_meta(STORE_UID_KEY, uid)
    return uid


def unit_rows(matrix: Any) -> Any:
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0] = 1.0
    matrix /= norms[:, None]
    return matrix


def read_snapshot(store: IndexStore) -> Snapshot:
    """Generation and vectors from one read transaction (WAL: a consistent view)."""
    import numpy as np

    conn = store.reader()
    with conn:
        row = conn.execute("SELECT value FROM meta WHERE key='generation'").fetchone()
        generation = int(row[0]) if row else 0
        first = conn.execute("SELECT length(embedding) FROM chunks WHERE embedding IS NOT NULL LIMIT 1").fetchone()
        dims = int(first[0]) // 4 if first else 0
        n = conn.execute("SELECT COUNT(*) FROM chunks WHERE length(embedding) = ?", (dims * 4,)).fetchone()[0] if dims else 0
        rowids = np.empty(n, dtype=np.int64)
        matrix = np.empty((n, dims), dtype=np.float32)
        i = 0
        # Rows of another width (a half-finished provider switch) cannot be compared; skip them.
        for rowid, blob in conn.execute(
            "SELECT rowid, embedding FROM chunks WHERE length(embedding) = ? ORDER BY rowid", (dims * 4,)
        ):
            if i >= n:
                break
            rowids[i] = rowid
            matrix[i] = np.frombuffer(blob, dtype=np.float32)
            i += 1
    return Snapshot(generation=generation, dims=dims, rowids=rowids[:i], matrix=unit_rows(matrix[:i]))


def vector_stats(store: IndexStore, dims: int) -> tuple[int, int]:
    """(count, sum of rowids) of the vectors of this width: a cheap fingerprint of the vector set."""
    row = store.reader().execute(
        "SELECT COUNT(*), COALESCE(SUM(rowid), 0) FROM chunks WHERE length(embedding) = ?", (dims * 4,)
    ).fetchone()
    return int(row[0]), int(row[1])
