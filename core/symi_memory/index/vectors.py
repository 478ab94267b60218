"""The exact vector side: a float32 matrix in numpy, refreshed by generation.

sqlite-vec's brute-force KNN is exact but about 15x slower than one numpy
matrix product at 100k chunks, so searches scan an in-memory copy of the
vectors. While a large matrix (re)loads in the background, searches use the
sqlite-vec KNN query, so no search waits for the load.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import attrs

from .store import IndexStore, pack_vector

__all__ = ["ExactVectors", "SYNC_LOAD_LIMIT"]

log = logging.getLogger("symi_memory.index")

SYNC_LOAD_LIMIT = 20_000


@attrs.define
class ExactVectors:
    """Exact cosine top-k over the index's chunk vectors."""

    store: IndexStore
    _ids: Any = None
    _matrix: Any = None
    _generation: int = -1
    _loading: bool = False
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    _thread: threading.Thread | None = None

    def _load(self, generation: int) -> None:
        import numpy as np

        # Rows go straight into a preallocated matrix: peak memory is the matrix, not the matrix
        # plus every blob plus their concatenation (3x at 100k chunks).
        expected = self.store.vector_count()
        ids_list: list[int] = []
        matrix: Any = None
        extra: list[Any] = []
        n = 0
        for rowid, blob in self.store.iter_vectors():
            if matrix is None:
                matrix = np.empty((max(expected, 1), len(blob) // 4), dtype=np.float32)
            if len(blob) != matrix.shape[1] * 4:
                continue  # another width (a half-finished provider switch) cannot be compared
            row = np.frombuffer(blob, dtype=np.float32)
            if n < matrix.shape[0]:
                matrix[n] = row
            else:  # rows written since the count
                extra.append(row)
            ids_list.append(rowid)
            n += 1
        if matrix is None:
            matrix = np.zeros((0, 0), dtype=np.float32)
        else:
            matrix = np.vstack([matrix, np.stack(extra)]) if extra else matrix[:n]
            for start in range(0, n, 65536):  # normalise in place, a block at a time
                block = matrix[start : start + 65536]
                norms = np.linalg.norm(block, axis=1)
                norms[norms == 0] = 1.0
                block /= norms[:, None]
        ids = ids_list
        with self._lock:
            self._ids = np.asarray(ids, dtype=np.int64)
            self._matrix = matrix
            self._generation = generation
            self._loading = False

    def _background(self, generation: int) -> None:
        try:
            self._load(generation)
        except Exception:  # the next search retries; never kill the thread silently
            log.exception("loading vectors failed")
            with self._lock:
                self._loading = False

    def ready(self) -> bool:
        """True when a matrix can serve this search; (re)loads it when the index changed.

        A small index loads at once. A large one reloads in the background:
        meanwhile the previous matrix keeps serving (rows deleted since are
        dropped later, when their chunk rows are not found), or, on a cold
        start, sqlite-vec's exact KNN does. Without sqlite-vec the load is
        synchronous, since there is nothing else exact to answer with.
        """
        generation = self.store.generation()
        with self._lock:
            if self._generation == generation:
                return True
            have_old = self._matrix is not None
            if self._loading:
                return have_old or not self.store.vec_dims
            count = self._chunk_count()  # the index's size now, not the old matrix's
            background = count > SYNC_LOAD_LIMIT and (have_old or bool(self.store.vec_dims))
            self._loading = True
        if background:
            self._thread = threading.Thread(target=self._background, args=(generation,), daemon=True, name="symi-vectors")
            self._thread.start()
            return have_old
        try:
            self._load(generation)
        except Exception:
            with self._lock:
                self._loading = False
            raise
        return True

    def _chunk_count(self) -> int:
        return int(self.store._read("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def search(self, query: Sequence[float], k: int) -> list[tuple[int, float]]:
        """``(rowid, cosine)`` best first, exact."""
        import numpy as np

        if not self.ready():
            return self.store.vec_knn(pack_vector(query), k)
        with self._lock:
            ids, matrix = self._ids, self._matrix
        if matrix is None or matrix.shape[0] == 0:
            return []
        q = np.asarray(query, dtype=np.float32)
        if q.shape[0] != matrix.shape[1]:
            log.warning("query vector has %d dims, index has %d: reindex needed", q.shape[0], matrix.shape[1])
            return []
        norm = float(np.linalg.norm(q))
        if norm == 0.0:
            return []
        scores = matrix @ (q / norm)
        k = min(k, scores.shape[0])
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(ids[i]), float(scores[i])) for i in top]

    def cosine(self, query: Sequence[float], blobs: dict[int, bytes | None]) -> dict[int, float]:
        """Exact cosine of the query with the given stored vectors."""
        import numpy as np

        q = np.asarray(query, dtype=np.float32)
        qn = float(np.linalg.norm(q))
        out: dict[int, float] = {}
        for rowid, blob in blobs.items():
            if not blob or qn == 0.0 or len(blob) != q.shape[0] * 4:
                continue
            v = np.frombuffer(blob, dtype=np.float32)
            vn = float(np.linalg.norm(v))
            out[rowid] = float(v @ q) / (qn * vn) if vn else 0.0
        return out

    def status(self) -> dict[str, Any]:
        with self._lock:
            return {"loaded": self._matrix is not None and self._generation >= 0,
                    "rows": 0 if self._ids is None else int(len(self._ids))}
