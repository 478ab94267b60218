"""The exact vector side: an in-memory scan copy of the stored vectors, refreshed by generation.

sqlite-vec's brute-force KNN is exact but about 15x slower than one numpy
matrix product at 100k chunks, so searches scan an in-memory copy of the
vectors. While a large matrix (re)loads in the background, searches use the
sqlite-vec KNN query, so no search waits for the load.

The copy is float32 (numpy), or float16 (faiss's scalar quantizer, when
faiss is installed): half the memory and half the bytes read per query. A
float16 scan ranks ``RESCORE_FACTOR`` times more candidates than asked
for and rescores them against the stored float32 vectors, so the answer
and its scores are the float32 ones.

With unit vectors (``chunking.units``, ``store.vector.unitWeight`` above 0)
the scan copy holds each chunk's vector followed by its units' vectors; a
chunk scores :func:`combine_unit` of its own cosine and its best unit's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .store import IndexStore, pack_vector

__all__ = ["ExactVectors", "SYNC_LOAD_LIMIT", "combine_unit", "combined_cosines"]

log = logging.getLogger("symi_memory.index")

SYNC_LOAD_LIMIT = 20_000
HALF_AUTO_MIN = 50_000  # scan: auto uses float16 from this many vectors (below, the float32 scan is cheap anyway)
RESCORE_FACTOR = 4  # a float16 scan rescores this many times k candidates (at least RESCORE_MIN)
RESCORE_MIN = 64
LOAD_BLOCK = 65_536
# Below this many scan rows the product runs in numpy's own loop (einsum): BLAS splits a product this small
# across threads, and on a busy machine waking them cost 5-30 ms against about 1 ms for the product itself.
SMALL_SCAN_ROWS = 32_768
HALF_BLOCK = 8_192  # rows converted to float16 at a time (12 MB at 384-d): the load peaks near the half copy


def combine_unit(chunk: Any, best: Any, weight: float) -> Any:
    """A chunk's vector score from its own cosine and the best of (its cosine, its units' cosines).

    ``(1 - weight) * chunk + weight * best``: 0 is the chunk vector alone, 1 the better of chunk and line.
    Works on floats and numpy arrays alike.
    """
    return (1.0 - weight) * chunk + weight * best


def combined_cosines(store: IndexStore, query: Sequence[float], rowids: Sequence[int], weight: float, *,
                     blobs: Mapping[int, bytes | None] | None = None, units: bool = True) -> dict[int, float]:
    """Exact vector scores of these chunks from their stored vectors (chunk and units), as the scan scores them.

    ``blobs``: stored chunk vectors the caller has already read (the others are read here);
    ``units``: False when the index is known to hold no unit vectors (their read is skipped).
    """
    import numpy as np

    q = np.asarray(query, dtype=np.float32)
    qn = float(np.linalg.norm(q))
    if qn == 0.0 or not rowids:
        return {}
    q = q / qn
    if blobs is None:
        chunks = store.vectors_by_rowid(list(rowids))
    else:
        chunks = {r: b for r in rowids if (b := blobs.get(r)) is not None}
        unread = [r for r in rowids if r not in chunks]
        if unread:
            chunks.update(store.vectors_by_rowid(unread))
    got_units = store.unit_vectors_by_rowid(list(chunks)) if weight > 0 and units else {}
    width = q.shape[0] * 4
    kept: list[int] = []
    rows: list[bytes] = []
    starts: list[int] = []
    for rowid, blob in chunks.items():
        if len(blob) != width:
            continue
        kept.append(rowid)
        starts.append(len(rows))
        rows.append(blob)
        rows.extend(b for b in got_units.get(rowid, ()) if len(b) == width)
    if not kept:
        return {}
    m = np.frombuffer(b"".join(rows), dtype=np.float32).reshape(len(rows), q.shape[0])
    norms = np.linalg.norm(m, axis=1)
    norms[norms == 0] = np.inf  # a zero vector scores 0
    cos = (m @ q) / norms
    offsets = np.asarray(starts, dtype=np.int64)
    scores = combine_unit(cos[offsets], np.maximum.reduceat(cos, offsets), weight)
    return {r: float(v) for r, v in zip(kept, scores, strict=True)}


def faiss_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("faiss") is not None


@attrs.define
class ExactVectors:
    """Exact cosine top-k over the index's chunk vectors."""

    store: IndexStore
    scan: str = "auto"
    #: ``store.vector.unitWeight``: above 0, the scan holds unit vectors and scores chunks with them.
    unit_weight: float = 0.0
    _ids: Any = None  # the chunk rowid of each scan row
    _offsets: Any = None  # where each chunk's rows start (chunk row first), when the scan holds units
    _chunk_ids: Any = None  # the chunk rowid of each segment, when the scan holds units
    _matrix: Any = None
    _half: Any = None  # faiss IndexScalarQuantizer (fp16) when the scan copy is float16
    _generation: int = -1
    _loading: bool = False
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    _thread: threading.Thread | None = None
    # This thread's last scan: (query, chunk rowids, their scores), so rescoring a search's keyword
    # candidates reads the scores just computed instead of their vectors from SQLite.
    _last: threading.local = attrs.field(factory=threading.local)

    def _wants_half(self, n: int) -> bool:
        if self.scan == "float32" or not faiss_available():
            if self.scan == "float16" and not faiss_available():
                log.warning("store.vector.scan = float16 needs faiss (pip install symi-memory[faiss]); scanning float32")
            return False
        return self.scan == "float16" or n >= HALF_AUTO_MIN

    def _load(self, generation: int) -> None:
        import numpy as np

        # Rows go straight into the scan copy (a preallocated float32 matrix, or the float16 index
        # a block at a time): peak memory is the copy (plus one block), not the copy plus every
        # blob plus their concatenation.
        with_units = self.unit_weight > 0
        expected = self.store.vector_count() + (self.store.unit_count() if with_units else 0)
        index: Any = None
        buf: Any = None  # the float32 matrix, or the float16 path's block
        extra: list[Any] = []
        ids_list: list[int] = []
        starts: list[int] = []
        fill = dims = 0

        def add_block(rows: Any) -> None:
            _normalise(rows)
            index.add(rows)

        for rowid, is_unit, blob in self.store.iter_scan_rows(with_units):
            if buf is None:
                dims = len(blob) // 4
                if self._wants_half(expected):
                    import faiss

                    index = faiss.IndexScalarQuantizer(dims, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
                    buf = np.empty((min(max(expected, 1), HALF_BLOCK), dims), dtype=np.float32)
                else:
                    buf = np.empty((max(expected, 1), dims), dtype=np.float32)
            if len(blob) != dims * 4:
                continue  # another width (a half-finished provider switch) cannot be compared
            if is_unit and (not ids_list or ids_list[-1] != rowid):
                continue  # a unit of a chunk left out above
            row = np.frombuffer(blob, dtype=np.float32)
            if not is_unit:
                starts.append(len(ids_list))
            ids_list.append(rowid)
            if fill < buf.shape[0]:
                buf[fill] = row
                fill += 1
            else:
                extra.append(row)  # float32 only: rows written since the count
            if index is not None and fill == buf.shape[0]:
                add_block(buf)
                fill = 0
        matrix: Any = None
        if index is not None:
            if fill:
                add_block(buf[:fill])
        elif buf is None:
            matrix = np.zeros((0, 0), dtype=np.float32)
        else:
            matrix = np.vstack([buf, np.stack(extra)]) if extra else buf[:fill]
            for start in range(0, matrix.shape[0], LOAD_BLOCK):  # normalise in place, a block at a time
                _normalise(matrix[start : start + LOAD_BLOCK])
        ids = np.asarray(ids_list, dtype=np.int64)
        offsets = np.asarray(starts, dtype=np.int64)
        has_units = len(offsets) < len(ids)
        with self._lock:
            self._ids = ids
            self._offsets = offsets if has_units else None
            self._chunk_ids = ids[offsets] if has_units else None
            self._matrix = matrix
            self._half = index
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
            self._last.current = self._generation == generation
            if self._last.current:
                return True
            have_old = self._matrix is not None or self._half is not None
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
        return self.store.chunk_count()

    def search(self, query: Sequence[float], k: int) -> list[tuple[int, float]]:
        """``(rowid, cosine)`` best first, exact."""
        import numpy as np

        self._last.scan = self._last.exact = None
        if not self.ready():
            return self.store.vec_knn(pack_vector(query), k, self.unit_weight)
        with self._lock:
            ids, matrix, half = self._ids, self._matrix, self._half
            offsets, chunk_ids = self._offsets, self._chunk_ids
        q = np.asarray(query, dtype=np.float32)
        if half is not None:
            rows, dims = int(half.ntotal), int(half.d)
        elif matrix is not None:
            rows, dims = int(matrix.shape[0]), int(matrix.shape[1]) if matrix.ndim == 2 else 0
        else:
            return []
        if rows == 0 or k <= 0:
            return []
        if q.shape[0] != dims:
            log.warning("query vector has %d dims, index has %d: reindex needed", q.shape[0], dims)
            return []
        norm = float(np.linalg.norm(q))
        if norm == 0.0:
            return []
        q = q / norm
        if half is not None:
            return self._search_half(half, ids, q, k, chunks=None if offsets is None else len(offsets))
        scores = np.einsum("ij,j->i", matrix, q) if matrix.shape[0] < SMALL_SCAN_ROWS else matrix @ q
        if offsets is not None:
            # Each chunk's rows are contiguous, its own vector first: the best of the segment is
            # max(chunk, best unit).
            scores = combine_unit(scores[offsets], np.maximum.reduceat(scores, offsets), self.unit_weight)
            ids = chunk_ids
        # Without units a chunk's score is its own cosine (combine_unit of it with itself), as rescoring computes it.
        self._last.scan = (q, ids, scores)
        k = min(k, scores.shape[0])
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(ids[i]), float(scores[i])) for i in top]

    def rescore(self, query: Sequence[float], rowids: Sequence[int]) -> dict[int, float]:
        """The vector scores of these chunks as :meth:`search` computes them (chunk and units).

        Chunks this thread's last scan scored (or, after a float16 scan, rescored) take that score;
        the others are computed from their stored vectors; chunks without a vector are left out.
        """
        import numpy as np

        last: Any = getattr(self._last, "scan", None)
        exact: Any = getattr(self._last, "exact", None)
        # A scan copy of the index as it is now that holds no units: the index holds none either.
        units = not (getattr(self._last, "current", False) and self._offsets is None)
        seen = last if last is not None else exact
        if seen is not None and rowids:
            q = seen[0]
            qn = np.asarray(query, dtype=np.float32)
            norm = float(np.linalg.norm(qn))
            if norm and qn.shape == q.shape and np.array_equal(qn / norm, q):
                if last is None:
                    known = exact[1]
                    out = {r: known[r] for r in rowids if r in known}
                    missing = [r for r in rowids if r not in known]
                else:
                    ids, scores = last[1], last[2]
                    wanted = np.asarray(list(rowids), dtype=np.int64)
                    pos = np.searchsorted(ids, wanted)  # the scan's chunk rowids are in rowid order
                    pos[pos >= len(ids)] = 0
                    found = ids[pos] == wanted
                    out = {int(r): float(scores[p]) for r, p, ok in zip(wanted, pos, found, strict=True) if ok}
                    missing = [int(r) for r, ok in zip(wanted, found, strict=True) if not ok]
                if missing:  # written since the scan copy loaded, or beyond the float16 scan's candidates
                    out.update(combined_cosines(self.store, query, missing, self.unit_weight, units=units))
                return out
        return combined_cosines(self.store, query, rowids, self.unit_weight, units=units)

    def _search_half(self, half: Any, ids: Any, q: Any, k: int, *, chunks: int | None = None,
                     ) -> list[tuple[int, float]]:
        """float16 scan for candidates, then their exact float32 cosine from the stored vectors.

        With units (``chunks``: how many chunks the scan's rows belong to) a chunk can take several of
        the scan's places, so the scan looks further (up to 4x) and the rescoring takes units too.
        """
        spread = min(4.0, int(half.ntotal) / max(1, chunks)) if chunks else 1.0
        wide = min(int(half.ntotal), int(max(k * RESCORE_FACTOR, RESCORE_MIN) * spread))
        _, pos = half.search(q.reshape(1, -1), wide)
        rowids = list(dict.fromkeys(int(ids[p]) for p in pos[0] if p >= 0))
        if chunks:
            exact = combined_cosines(self.store, q, rowids, self.unit_weight)
        else:
            exact = self.cosine(q, dict(self.store.vectors_by_rowid(rowids)))
        self._last.exact = (q, exact)  # rescoring keyword candidates reads these (without units: the cosine)
        ordered = sorted(exact.items(), key=lambda kv: (-kv[1], kv[0]))
        return ordered[:k]

    def cosine(self, query: Sequence[float], blobs: dict[int, bytes | None]) -> dict[int, float]:
        """Exact cosine of the query with the given stored vectors (one matrix product)."""
        import numpy as np

        q = np.asarray(query, dtype=np.float32)
        qn = float(np.linalg.norm(q))
        keep = {r: b for r, b in blobs.items() if b and len(b) == q.shape[0] * 4}
        if not keep or qn == 0.0:
            return {}
        matrix = np.frombuffer(b"".join(keep.values()), dtype=np.float32).reshape(len(keep), q.shape[0])
        norms = np.linalg.norm(matrix, axis=1)
        norms[norms == 0] = np.inf  # a zero vector scores 0
        scores = (matrix @ q) / (norms * qn)
        return {r: float(s) for r, s in zip(keep, scores, strict=True)}

    def status(self) -> dict[str, Any]:
        """What the scan uses: ``scan`` is float32, float16+float32-rescoring, or none (nothing loaded yet)."""
        with self._lock:
            loaded = (self._matrix is not None or self._half is not None) and self._generation >= 0
            return {"loaded": loaded,
                    "rows": 0 if self._ids is None else int(len(self._ids)),
                    "units": 0 if self._offsets is None else int(len(self._ids) - len(self._offsets)),
                    "scan": ("float16+float32-rescoring" if self._half is not None else "float32") if loaded else "none"}


def _normalise(rows: Any) -> None:
    """Scale float32 rows to unit length in place (zero rows stay zero)."""
    import numpy as np

    norms = np.linalg.norm(rows, axis=1)
    norms[norms == 0] = 1.0
    rows /= norms[:, None]
