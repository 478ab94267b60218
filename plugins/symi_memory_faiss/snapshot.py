"""Every chunk vector of the SQLite index as one consistent snapshot, through the store's public API."""

from __future__ import annotations

import uuid
from typing import Any

import attrs

from symi_memory.index.store import IndexStore

__all__ = ["Snapshot", "read_snapshot", "store_uid", "vector_stats"]

STORE_UID_KEY = "faiss_store_uid"
STORE_INDEX_KEY = "faiss_store_index"  # the index id the store id was claimed for


@attrs.frozen
class Snapshot:
    generation: int
    dims: int
    rowids: Any  # int64 array
    matrix: Any  # float32, unit rows
    index_id: str | None = None  # the store's meta index_id the snapshot was read from


def store_uid(store: IndexStore) -> tuple[str, str] | None:
    """``(store id, index id)``: a random id of this SQLite index (meta ``faiss_store_uid``), so an index saved for
    a deleted, recreated or rebuilt-in-place store is never reused, and the index id it belongs to.

    The id is bound to the index id (meta ``faiss_store_index``), read or claimed in one transaction with it
    (:meth:`~symi_memory.index.meta.MetaRows.claim_bound_meta`). None while it cannot be claimed (another process
    holds SQLite's write lock, a read-only index): the caller loads no saved file, saves none, and asks again.
    """
    return store.claim_bound_meta(STORE_UID_KEY, STORE_INDEX_KEY, uuid.uuid4().hex)


def unit_rows(matrix: Any) -> Any:
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0] = 1.0
    matrix /= norms[:, None]
    return matrix


def read_snapshot(store: IndexStore) -> Snapshot:
    """Generation and unit-length vectors from one read transaction (``IndexStore.read_vectors``)."""
    snap = store.read_vectors()
    return Snapshot(generation=snap.generation, dims=snap.dims, rowids=snap.rowids, matrix=unit_rows(snap.matrix),
                    index_id=snap.index_id)


def vector_stats(store: IndexStore, dims: int) -> tuple[int, int]:
    """(count, sum of rowids) of the vectors of this width: a cheap fingerprint of the vector set."""
    return store.vector_stats(dims)
