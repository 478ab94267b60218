"""The exact vector side: an in-memory scan copy of the stored vectors, refreshed by generation.

sqlite-vec's brute-force KNN is exact but about 15x slower than one numpy
matrix product at 100k chunks, so searches scan an in-memory copy of the
vectors. While a large matrix (re)loads in the background, searches use the
sqlite-vec KNN query, so no search waits for the load.

The copy is float32 (numpy), or, when faiss is installed, int8 (faiss's
scalar quantizer, a quarter of the memory and bytes read per query) or
float16. A quantized scan only picks candidates: the load records how far
the copy is from the stored vectors (per dimension), which bounds how far any
row's scan score can be from its float32 one for a given query. Every chunk
whose scan score comes within twice that bound of the k-th best is rescored
against the stored float32 vectors (read as blobs by their stored id), so the
answer and its scores are the float32 scan's, not an approximation. An int8
copy of 50,000 to 262,144 rows also keeps each row's code error as a second
int8 code: the chunks the scan returns are scored from both codes in memory
(within about 1/250 of the int8 bound), and only those that can still be in
the top k are read from SQLite. A large quantized copy can be held in two
parts searched at once on two threads (``store.vector.scanThreads``).

With unit vectors (``chunking.units``, ``store.vector.unitWeight`` above 0)
the scan copy holds each chunk's vector followed by its units' vectors; a
chunk scores :func:`combine_unit` of its own cosine and its best unit's.
"""

from __future__ import annotations

import array
import logging
import math
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .. import forking
from .meta import NO_GENERATION, Generation
from .store import IndexStore, pack_vector

__all__ = ["ExactVectors", "SYNC_LOAD_LIMIT", "combine_unit", "combined_cosines"]

log = logging.getLogger("symi_memory.index")

SYNC_LOAD_LIMIT = 20_000
HALF_AUTO_MIN = 50_000  # scan: auto uses int8 from this many vectors, rescored from the stored vectors
# scan: auto uses int8 from this many vectors up to HALF_AUTO_MIN too, rescored from a float32 copy it keeps in
# memory beside the codes (1.25x the float32 scan's memory; a 10k-row 384-d index: 15 MB + 4 MB). At 10k rows
# faiss's int8 scan takes about 0.5 ms against 2-2.5 ms for the float32 einsum, and the band's rows are then
# gathered from memory (about 0.05 ms for 150 rows) instead of read from SQLite (which made the int8 path
# slower than the float32 scan there). Below this, the float32 scan costs under a millisecond.
KEPT_INT8_MIN = 8_192
# A quantized scan first asks faiss for this many times k rows (at least this many), and looks 4x further
# (another scan) while the rescoring band reaches past them. int8's band is wider (its error bound is about
# 40x float16's): at 100k, about 200 rows for k = 10 and 350 for k = 80; asking faiss for 1,024 rows
# instead of 64 costs about 0.8 ms, a second scan 7 ms. An int8 copy whose float32 rows are kept in memory
# ("kept", under HALF_AUTO_MIN) asks for less: its band (about 140 rows at 10k for k = 80) is remembered in
# _reach, and a second scan of 10k rows costs about 0.5 ms (vectors.search 1.9 -> 1.55 ms at 10k, k = 80).
RESCORE_WIDE = {"float16": (4, 64), "int8": (8, 512), "kept": (2, 128)}
# Added to the quantization bound: float32 rounding of the scan's and the rescoring's dot products
# (384 terms: under 3e-5 each) and of the scan copy's normalisation. At least this; for wide vectors
# the worst case of a d-term float32 dot product on each side (see slack()).
BOUND_SLACK = 1e-4


def slack(dims: int) -> float:
    """The rounding margin of the bound for ``dims``-dimensional vectors: the worst-case error of a
    float32 dot product of ``dims`` terms (about ``dims * 2**-24``) on each of the two sides, three
    times over (scan, rescoring, normalisation), and never under :data:`BOUND_SLACK`."""
    return max(BOUND_SLACK, 3 * dims * 2.0 ** -24)
INT8_MAX = 127.0
# int8 codes span this many times the first block's largest value of each dimension: 8k rows of 384-d
# vectors miss the largest of 100k by up to 1.36x (synthetic clusters; p99 1.3x), and clipped rows widen
# the rescoring band for every query.
INT8_HEADROOM = 1.5
QUANTIZED = {"int8": "int8+float32-rescoring", "float16": "float16+float32-rescoring"}
LOAD_BLOCK = 65_536
# Below this many scan rows the product runs in numpy's own loop (einsum): BLAS splits a product this small
# across threads, and on a busy machine waking them cost 5-30 ms against about 1 ms for the product itself.
SMALL_SCAN_ROWS = 32_768
HALF_BLOCK = 8_192  # rows quantized at a time (12 MB at 384-d): the load peaks near the quantized copy
# An int8 copy that does not keep the float32 rows (from HALF_AUTO_MIN vectors) keeps a second int8 code per
# value up to this many scan rows: each row's code error, quantized with the row's own scale (a float32 a row).
# Codes plus residual give scores within about 1/250 of the int8 bound, computed from memory for the rows the
# scan returns, so only the chunks that can still be in the top k (k and a few) are read from SQLite for their
# float32 scores, instead of every chunk in the int8 bound's band (about 330 reads at 100k for k = 80, 2 ms of
# a 10 ms vectors.search). Memory: the codes' size again (38 MB at 100k x 384-d). Above this many rows the
# scan (60 ms at 1M) dwarfs the reads, and the residual would cost 384 MB at 1M: not kept.
FINE_MAX_ROWS = 262_144
# A quantized copy of at least this many rows is held in ``scan_threads`` consecutive parts (store.vector.
# scanThreads), searched at once on the calling thread and a worker thread (faiss releases the GIL), each on one
# OpenMP thread. At 100k x 384-d int8 a part takes about 3 ms against 6 for the whole; the worker's hand-off
# costs about 0.1 ms. Below this the scan takes about a millisecond: not split.
SPLIT_MIN_ROWS = HALF_AUTO_MIN
# A loaded scan copy of at least this many rows is searched on the backend's scan worker while the searching
# thread runs the keyword side (:meth:`ExactVectors.worth_another_thread`). At 100k int8 rows the scan takes
# about 6 ms with the GIL released (faiss), and a hybrid search's wall time fell by about a fifth; at 10k (about
# a millisecond, half of it numpy work holding the GIL) the hand-off saved no wall time and cost 0.2-1.5 ms CPU.
HAND_OFF_MIN_ROWS = HALF_AUTO_MIN


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
    qn = _vnorm(q)
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


def usable_cpus(cgroup_root: str = "/sys/fs/cgroup", proc_cgroup: str = "/proc/self/cgroup") -> int:
    """How many CPUs this process may run on: its affinity mask (the machine's count where there is none), and no
    more than its cgroup's CPU quota allows (:func:`cgroup_cpu_limit`; a container given 1 CPU of a 64-core host
    sees all 64 in its affinity mask)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    limit = cgroup_cpu_limit(cgroup_root, proc_cgroup)
    return max(1, min(cpus, limit)) if limit is not None else cpus


def cgroup_cpu_limit(cgroup_root: str = "/sys/fs/cgroup", proc_cgroup: str = "/proc/self/cgroup") -> int | None:
    """The CPUs this process's cgroup quota amounts to (quota / period, rounded up), or None when no quota is set
    or none can be read (not Linux, no cgroup file system).

    cgroup v2: ``cpu.max`` (``"<quota> <period>"``, or ``"max <period>"``) of the process's own cgroup, as
    ``/proc/self/cgroup`` names it, and of every cgroup above it (the tightest one holds); in a container the
    process's cgroup is the root of the file system it sees. cgroup v1: ``cpu.cfs_quota_us`` (-1: none) over
    ``cpu.cfs_period_us``, of the cpu controller's cgroup and every one above it likewise.
    """
    try:
        with open(proc_cgroup, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    limits: list[int] = []
    for line in lines:
        hier, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hier == "0" and controllers == "":  # v2: every cgroup from the process's up to the root
            parts = [p for p in path.split("/") if p and p not in (".", "..")]
            for depth in range(len(parts), -1, -1):
                got = _quota_cpus(os.path.join(cgroup_root, *parts[:depth], "cpu.max"), None)
                if got is not None:
                    limits.append(got)
        elif "cpu" in controllers.split(","):  # v1: the cpu controller's own hierarchy, where it is mounted
            parts = [p for p in path.split("/") if p and p not in (".", "..")]
            base = next((b for m in (controllers, "cpu", "cpu,cpuacct")
                         if os.path.isdir(b := os.path.join(cgroup_root, m))), None)
            # Every cgroup from the process's up to the mount's root, as in v2 (a systemd slice's CPUQuota holds
            # for the scopes below it); in a container the mount's root is its own cgroup, and the host's path
            # /proc/self/cgroup names is not there.
            if base is None:
                continue
            for depth in range(len(parts), -1, -1):
                where = os.path.join(base, *parts[:depth])
                got = _quota_cpus(os.path.join(where, "cpu.cfs_quota_us"), os.path.join(where, "cpu.cfs_period_us"))
                if got is not None:
                    limits.append(got)
    return min(limits) if limits else None


def _quota_cpus(quota_file: str, period_file: str | None) -> int | None:
    """The CPUs one cgroup's quota amounts to; None when it sets none, or its files are missing or unreadable."""
    try:
        with open(quota_file, encoding="ascii") as f:
            fields = f.read().split()
        if period_file is not None:
            with open(period_file, encoding="ascii") as f:
                fields = fields[:1] + f.read().split()[:1]
        if len(fields) < 2 or fields[0] in ("max", "-1"):
            return None
        quota, period = int(fields[0]), int(fields[1])
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if quota <= 0 or period <= 0:
        return None
    return max(1, -(-quota // period))


@attrs.frozen
class _Quantized:
    """A quantized scan copy and what its rescoring needs, swapped in as one piece (a search holds one)."""

    index: _Parts  # the faiss IndexScalarQuantizer(s) holding the codes
    kind: str  # int8 or float16
    generation: Generation  # (index id, generation) the copy was loaded from: the stored ids below are valid for it
    ids: Any  # the chunk rowid of each scan row
    offsets: Any  # where each chunk's rows start, when the scan holds units (else None)
    chunk_ids: Any  # the chunk rowid of each chunk (segment)
    vids: Any  # the stored vector id (embedding_cache) of each scan row
    scale: Any  # int8: per-dimension scale of the codes (code = round(x * scale)); float16: None
    err_dim: Any  # largest |stored - scan copy| of each dimension over all rows (normalised vectors)
    err_row: float  # largest norm of a row's (stored x scale - code): code units for int8
    code_row: float  # int8: largest norm of a row's codes (bounds what rounding the query costs)
    #: The normalised float32 rows of the scan (in scan order) when kept in memory for the rescoring
    #: (below ``HALF_AUTO_MIN``); None: the rescoring reads the stored vectors.
    rows: Any = None
    #: int8 codes of each row's code error (code units) with a per-row scale ``fine_scale`` (NaN for a
    #: non-finite stored vector), when kept (:data:`FINE_MAX_ROWS`): ``codes + fine * fine_scale`` is the
    #: row times ``scale`` within ``fine_err_dim`` / ``fine_err_row`` (same units as ``err_dim`` / ``err_row``).
    fine: Any = None
    fine_scale: Any = None
    fine_err_dim: Any = None
    fine_err_row: float = 0.0

    def codes(self, rows: Any) -> Any:
        """The int8 codes of these scan rows (a copy: uint8, each a signed code plus 128, as faiss stores them)."""
        return self.index.codes(rows)


class _Parts:
    """A quantized scan copy as one faiss index, or as consecutive parts searched on two threads at once."""

    def __init__(self, parts: list[Any], sizes: list[int]) -> None:
        self.parts = parts
        self._sizes = sizes  # how many rows each part takes (the last takes the rest)
        self._views: list[Any] = []
        self._starts: Any = None
        self._shape: tuple[int, int] | None = None  # (rows, dimensions) once sealed: read by every search

    @property
    def ntotal(self) -> int:
        if self._shape is not None:
            return self._shape[0]
        return sum(int(p.ntotal) for p in self.parts)

    @property
    def d(self) -> int:
        return int(self.parts[0].d) if self._shape is None else self._shape[1]

    def add(self, x: Any) -> None:
        """Append rows, filling each part up to its size (the last part takes the rest)."""
        start = 0
        for i, part in enumerate(self.parts):
            room = len(x) - start if i == len(self.parts) - 1 else self._sizes[i] - int(part.ntotal)
            if room > 0 and start < len(x):
                part.add(x[start : start + room])
                start += min(room, len(x) - start)

    def sealed(self) -> _Parts:
        """Done adding: numpy views of the parts' codes (no copy) for :meth:`codes`."""
        import faiss
        import numpy as np

        self.parts = [p for p in self.parts if p.ntotal] or self.parts[:1]  # rows deleted since the count
        self._views = [faiss.rev_swig_ptr(p.codes.data(), int(p.ntotal) * int(p.code_size)).reshape(
            int(p.ntotal), int(p.code_size)) if p.ntotal else np.zeros((0, int(p.code_size)), np.uint8)
            for p in self.parts]
        self._starts = np.cumsum([0] + [int(p.ntotal) for p in self.parts])
        self._shape = (int(self._starts[-1]), int(self.parts[0].d))
        return self

    def codes(self, rows: Any) -> Any:
        import numpy as np

        if len(self._views) == 1:
            return self._views[0][rows]
        out = np.empty((len(rows), self._views[0].shape[1]), dtype=np.uint8)
        part = np.searchsorted(self._starts, rows, side="right") - 1
        for i, view in enumerate(self._views):
            mask = part == i
            if mask.any():
                out[mask] = view[rows[mask] - self._starts[i]]
        return out

    def search(self, probe: Any, k: int) -> tuple[Any, Any]:
        """(scores, scan rows) of the k best rows, best first: one search per part, each on one thread."""
        import numpy as np

        if len(self.parts) == 1:
            return _one_thread_search(self.parts[0], probe, k)  # type: ignore[no-any-return]
        asks = [min(k, int(p.ntotal)) for p in self.parts]
        got: list[Any] = [None] * len(self.parts)
        if _WORKER_FREE.acquire(blocking=False):  # one worker: a concurrent search scans its parts itself
            try:
                try:
                    later = _worker().submit(_one_thread_search, self.parts[1], probe, asks[1])
                except RuntimeError:  # the interpreter is exiting (a thread still searching): no new work
                    later = None
                got[0] = _one_thread_search(self.parts[0], probe, asks[0])
                if later is not None:
                    got[1] = later.result()
            finally:
                _WORKER_FREE.release()
        for i, part in enumerate(self.parts):
            if got[i] is None:
                got[i] = _one_thread_search(part, probe, asks[i])
        dist = np.concatenate([g[0][0] for g in got])
        pos = np.concatenate([np.where(g[1][0] >= 0, g[1][0] + self._starts[i], -1) for i, g in enumerate(got)])
        # Best first; a row that no part returned scores at most the k-th best here (each part returned k rows
        # at least as good as any it left out).
        order = np.argsort(-dist, kind="stable")[:k]
        return dist[order][None, :], pos[order][None, :]


_WORKER_FREE = threading.Lock()
_WORKER_FREE_INIT = threading.Lock()
_WORKER_POOL: Any = None


def _worker() -> Any:
    """The one worker thread that searches a split scan copy's second part."""
    global _WORKER_POOL
    if _WORKER_POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        with _WORKER_FREE_INIT:
            if _WORKER_POOL is None:
                _WORKER_POOL = ThreadPoolExecutor(1, thread_name_prefix="symi-scan")
    return _WORKER_POOL


def _forget_worker() -> None:
    """In a forked child: the parent's worker thread does not exist there (work handed to it would wait forever),
    and a lock another parent thread held stays held: a new worker and new locks when one is needed."""
    global _WORKER_POOL, _WORKER_FREE, _WORKER_FREE_INIT
    _WORKER_POOL = None
    _WORKER_FREE, _WORKER_FREE_INIT = threading.Lock(), threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_worker)


@attrs.define
class ExactVectors:
    """Exact cosine top-k over the index's chunk vectors."""

    store: IndexStore
    scan: str = "auto"
    #: ``store.vector.unitWeight``: above 0, the scan holds unit vectors and scores chunks with them.
    unit_weight: float = 0.0
    #: ``store.vector.scanThreads``: a quantized copy of ``SPLIT_MIN_ROWS`` rows or more is split in this many
    #: parts searched at once (1 or 2; never more than the CPUs this process may run on).
    scan_threads: int = 1
    _ids: Any = None  # the chunk rowid of each scan row
    _offsets: Any = None  # where each chunk's rows start (chunk row first), when the scan holds units
    _chunk_ids: Any = None  # the chunk rowid of each segment, when the scan holds units
    _matrix: Any = None
    _quant: _Quantized | None = None  # when the scan copy is quantized
    _generation: Generation = NO_GENERATION
    _loading: bool = False
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    _thread: threading.Thread | None = None
    # Rows the last quantized search's band reached (per k): the next one asks faiss for 1.5x that at once
    # (1.25x for a kept copy: _search_kept), since a band reaching past the rows asked for costs a second scan
    # (60 ms at 1M rows).
    _reach: dict[int, int] = attrs.field(factory=dict)
    # This thread's last scan: (query, chunk rowids, their scores), so rescoring a search's keyword
    # candidates reads the scores just computed instead of their vectors from SQLite.
    _last: threading.local = attrs.field(factory=threading.local)

    def __attrs_post_init__(self) -> None:
        forking.track(self)

    def _after_fork_in_child(self) -> None:
        """In a forked child: a load of the scan copy the parent was running is not running here (``_loading``
        would keep every search from starting one), and its lock may be held."""
        self._lock = threading.Lock()
        self._loading, self._thread = False, None
        self._last = threading.local()

    def _quantized_kind(self, n: int) -> str | None:
        """int8 or float16 when the scan copy of ``n`` rows is quantized, None for float32."""
        if self.scan == "float32":
            return None
        if not faiss_available():
            if self.scan in QUANTIZED:
                log.warning("store.vector.scan = %s needs faiss (pip install symi-memory[faiss]); scanning float32",
                            self.scan)
            return None
        if self.scan in QUANTIZED:
            return self.scan
        return "int8" if n >= min(KEPT_INT8_MIN, HALF_AUTO_MIN) else None

    def _keeps_rows(self, n: int) -> bool:
        """True when the int8 copy of ``n`` rows keeps the float32 rows in memory for its rescoring."""
        return self.scan == "auto" and n < HALF_AUTO_MIN

    def _parts(self, n: int) -> int:
        """How many parts a quantized copy of ``n`` rows is held in (each searched on its own thread)."""
        if n < SPLIT_MIN_ROWS or self.scan_threads < 2:
            return 1
        return max(1, min(2, self.scan_threads, usable_cpus()))

    def _keeps_fine(self, n: int) -> bool:
        """True when the int8 copy of ``n`` rows keeps its rows' residual codes (it does not keep float32 rows)."""
        return not self._keeps_rows(n) and n <= FINE_MAX_ROWS

    def _load(self, generation: Generation) -> None:
        import numpy as np

        # Rows go straight into the scan copy (a preallocated float32 matrix, or the quantized index
        # a block at a time): peak memory is the copy (plus one block), not the copy plus every
        # blob plus their concatenation.
        with_units = self.unit_weight > 0
        expected = self.store.vector_count() + (self.store.unit_count() if with_units else 0)
        index: Any = None
        kind = "float32"
        buf: Any = None  # the float32 matrix, or the quantized path's block
        extra: list[Any] = []
        # 8 bytes a row (a list of ints takes about 36: 70 MB more at the peak of a 1M-row load)
        ids_list = array.array("q")
        vids_list = array.array("q")
        starts = array.array("q")
        fill = dims = 0
        scale: Any = None
        err_dim: Any = None
        err_row = code_row = 0.0

        kept: Any = None  # the float32 rows kept for the rescoring (below HALF_AUTO_MIN)
        kept_fill = 0
        fine: Any = None  # residual codes (int8, per-row scale) kept to narrow the rescoring (up to FINE_MAX_ROWS)
        fine_scale: Any = None
        fine_err_dim: Any = None
        fine_err_row = 0.0
        fine_fill = 0

        def add_block(rows: Any) -> None:
            nonlocal scale, err_dim, err_row, code_row, kept, kept_fill
            nonlocal fine, fine_scale, fine_err_dim, fine_err_row, fine_fill
            _normalise(rows)
            if kept is not None:
                # As the float32 scan holds them (a non-finite row stays NaN there, and ranks last when rescored).
                if kept_fill + len(rows) > kept.shape[0]:  # rows written since the count
                    kept = np.concatenate([kept[:kept_fill], rows])
                else:
                    kept[kept_fill : kept_fill + len(rows)] = rows
                kept_fill += len(rows)
            # A stored vector with NaN or inf (a provider's bad output) scores NaN in the float32 scan, so it
            # never ranks; in the copy it would make the codes' scale and the recorded error NaN, and a NaN
            # bound rescored no more than the first k chunks of every search. It scans as a zero row.
            bad = ~np.isfinite(rows).all(axis=1)
            if bad.any():
                rows[bad] = 0.0
            if kind == "int8" and scale is None:
                # Per-dimension scale from the first block, with headroom for later rows; a row beyond
                # it is clipped, and the error recorded below (what the rescoring bound uses) includes
                # that, so clipping widens the rescoring, never the answer.
                top = np.abs(rows).max(axis=0) * INT8_HEADROOM
                top[top == 0] = 1.0
                scale = (INT8_MAX / top).astype(np.float32)
            # Two block-sized temporaries at most (the load's peak is the copy plus a few blocks).
            if kind == "int8":
                x = rows * scale
                np.rint(x, out=x)
                np.clip(x, -INT8_MAX, INT8_MAX, out=x)
                err = rows * scale
                err -= x  # the code error, in code units
                err_dim_block = np.abs(err).max(axis=0) / scale
                code_row = max(code_row, float(np.sqrt(np.einsum("ij,ij->i", x, x).max())))
                if fine is not None:
                    err_row = max(err_row, float(np.sqrt(np.einsum("ij,ij->i", err, err).max())))
                    err = self._add_residual(err, scale, bad, fine, fine_scale, fine_fill)
                    if err is None:  # rows written since the count: grow the arrays (rare)
                        fine = np.concatenate([fine, np.empty((len(rows), dims), dtype=np.int8)])
                        fine_scale = np.concatenate([fine_scale, np.empty(len(rows), dtype=np.float32)])
                        err = rows * scale
                        err -= x
                        err = self._add_residual(err, scale, bad, fine, fine_scale, fine_fill)
                    block_err_dim, block_err_row = err
                    fine_err_dim = block_err_dim if fine_err_dim is None else np.maximum(fine_err_dim, block_err_dim)
                    fine_err_row = max(fine_err_row, block_err_row)
                    fine_fill += len(rows)
                    err = None
            else:
                x = rows
                err = index.parts[0].sa_decode(index.parts[0].sa_encode(rows))
                np.subtract(rows, err, out=err)
                err_dim_block = np.abs(err).max(axis=0)
            err_dim = err_dim_block if err_dim is None else np.maximum(err_dim, err_dim_block)
            if err is not None:  # else recorded with the residual
                err_row = max(err_row, float(np.sqrt(np.einsum("ij,ij->i", err, err).max())))
            del err
            index.add(x)

        for rowid, is_unit, vid, blob in self.store.iter_scan_rows(with_units):
            if buf is None:
                dims = len(blob) // 4
                wanted = self._quantized_kind(expected)
                if wanted is not None:
                    import faiss

                    kind = wanted
                    qtype = (faiss.ScalarQuantizer.QT_8bit_direct_signed if kind == "int8"
                             else faiss.ScalarQuantizer.QT_fp16)
                    count = self._parts(expected)
                    index = _Parts([faiss.IndexScalarQuantizer(dims, qtype, faiss.METRIC_INNER_PRODUCT)
                                    for _ in range(count)], [-(-max(expected, 1) // count)] * count)
                    buf = np.empty((min(max(expected, 1), HALF_BLOCK), dims), dtype=np.float32)
                    if kind == "int8" and self._keeps_rows(expected):
                        kept = np.empty((max(expected, 1), dims), dtype=np.float32)
                    elif kind == "int8" and self._keeps_fine(expected):
                        fine = np.empty((max(expected, 1), dims), dtype=np.int8)
                        fine_scale = np.empty(max(expected, 1), dtype=np.float32)
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
            vids_list.append(vid)
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
        ids = np.frombuffer(ids_list, dtype=np.int64) if ids_list else np.empty(0, dtype=np.int64)
        offsets = np.asarray(starts, dtype=np.int64)
        has_units = len(offsets) < len(ids)
        quant = None if index is None else _Quantized(
            index=index, kind=kind, generation=generation, ids=ids, offsets=offsets if has_units else None,
            chunk_ids=ids[offsets], vids=np.frombuffer(vids_list, dtype=np.int64), scale=scale,
            err_dim=np.zeros(dims, dtype=np.float32) if err_dim is None else err_dim, err_row=err_row,
            code_row=code_row, rows=None if kept is None else kept[:kept_fill],
            **({} if fine is None or index.ntotal != fine_fill else _fine_fields(
                fine[:fine_fill], fine_scale[:fine_fill], fine_err_dim, fine_err_row, dims)))
        if index is not None:
            index.sealed()
        with self._lock:
            self._ids = ids
            self._offsets = offsets if has_units else None
            self._chunk_ids = ids[offsets] if has_units else None
            self._matrix = matrix
            self._quant = quant
            self._generation = generation
            self._loading = False

    @staticmethod
    def _add_residual(err: Any, scale: Any, bad: Any, fine: Any, fine_scale: Any, at: int) -> Any:
        """Write the residual codes of a block's code error ``err`` (code units; overwritten) at row ``at``.

        Each row's error is coded again in int8 on the row's own scale (at most half a code unit, more for a
        clipped row), so what is left is about 1/254 of it. Returns (largest leftover of each dimension, in
        the normalised vectors' units; largest leftover row norm, in code units), or None when the arrays
        have no room for the block. One block-sized temporary.
        """
        import numpy as np

        if at + len(err) > len(fine):
            return None
        top = np.maximum(err.max(axis=1), -err.min(axis=1))
        top[top == 0] = 1.0
        step = (top / INT8_MAX).astype(np.float32)
        y = err / step[:, None]
        np.rint(y, out=y)
        fine[at : at + len(err)] = y
        y *= step[:, None]
        err -= y  # what the residual leaves
        del y
        err_dim = np.maximum(err.max(axis=0), -err.min(axis=0)) / scale
        err_row = float(np.sqrt(np.einsum("ij,ij->i", err, err).max()))
        step[bad] = np.nan  # scanned as a zero row, scored as NaN: a refined score says nothing
        fine_scale[at : at + len(err)] = step
        return err_dim, err_row

    def _background(self, generation: Generation) -> None:
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
        generation = self.store.generation_key()
        with self._lock:
            self._last.current = self._generation == generation
            if self._last.current:
                return True
            have_old = self._matrix is not None or self._quant is not None
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
        # The copy just loaded is this generation's: its stored ids serve this search (else the first search
        # after every synchronous load was rescored by chunk, its candidates alone, without the band).
        self._last.current = True
        return True

    def _chunk_count(self) -> int:
        return self.store.chunk_count()

    def search(self, query: Sequence[float], k: int) -> list[tuple[int, float]]:
        """``(rowid, cosine)`` best first, exact."""
        import numpy as np

        self._last.scan = self._last.exact = self._last.asked = None
        self._last.scored, self._last.by_row = None, False  # what scanned_generation tells of this search
        if not self.ready():
            self._last.by_row = True
            return self.store.vec_knn(pack_vector(query), k, self.unit_weight)
        with self._lock:
            ids, matrix, quant = self._ids, self._matrix, self._quant
            offsets, chunk_ids, loaded = self._offsets, self._chunk_ids, self._generation
        q = np.asarray(query, dtype=np.float32)
        if quant is not None:
            rows, dims = int(quant.index.ntotal), int(quant.index.d)
        elif matrix is not None:
            rows, dims = int(matrix.shape[0]), int(matrix.shape[1]) if matrix.ndim == 2 else 0
        else:
            return []
        if rows == 0 or k <= 0:
            return []
        if q.shape[0] != dims:
            log.warning("query vector has %d dims, index has %d: reindex needed", q.shape[0], dims)
            return []
        norm = _vnorm(q)
        if norm == 0.0:
            return []
        q = q / norm
        if type(query) is list and type(query[0]) is float and math.isfinite(norm):
            # The query as asked (its float objects, a few microseconds to copy): :meth:`rescore` of the same list
            # holding the same floats need not convert it again (about 15 us) to know it asks about this scan.
            # Floats only (as providers and tolist() give; the first is checked): a value changed in the list is
            # another object, while an element changed in place (a 0-d numpy array) is the same object.
            self._last.asked = (query, tuple(query))
        if quant is not None:
            return self._search_quantized(quant, q, k)
        self._note(loaded)
        scores = np.einsum("ij,j->i", matrix, q) if matrix.shape[0] < SMALL_SCAN_ROWS else matrix @ q
        if offsets is not None:
            # Each chunk's rows are contiguous, its own vector first: the best of the segment is
            # max(chunk, best unit).
            scores = combine_unit(scores[offsets], np.maximum.reduceat(scores, offsets), self.unit_weight)
            ids = chunk_ids
        if not getattr(self._last, "current", False):
            # A copy older than the index (a large one reloading in the background): a row may be a deleted
            # chunk's, and a rowid written since may be another chunk's now (SQLite gives the rowids of the last
            # rows deleted again). Its best rows only name candidates, scored from the chunks' stored vectors;
            # twice as many as asked for, so that deleted ones leave k.
            wide = min(2 * k, scores.shape[0])
            best = np.argpartition(-scores, wide - 1)[:wide]
            return self._fallback(offsets is not None, q, k, [int(r) for r in ids[best]])
        # Without units a chunk's score is its own cosine (combine_unit of it with itself), as rescoring computes it.
        self._last.scan = (q, ids, scores)
        k = min(k, scores.shape[0])
        part = np.argpartition(-scores, k - 1)
        # Ties by rowid, as the quantized scan breaks them (the scan's rows are in rowid order): every row
        # scoring the k-th best score takes part, not those argpartition happened to put first (two copies
        # of a note answered with the later one, and a different one once the index grew to the int8 scan).
        top = np.flatnonzero(scores >= scores[part[k - 1]])
        if len(top) < k:  # NaN scores (a stored vector with NaN) among the k
            top = part[:k]
        top = top[np.argsort(-scores[top], kind="stable")][:k]
        return [(int(ids[i]), float(scores[i])) for i in top]

    def worth_another_thread(self) -> bool:
        """True when a search now would scan a loaded copy of :data:`HAND_OFF_MIN_ROWS` rows or more: long enough,
        mostly outside the GIL, to run beside the keyword side (:class:`~symi_memory.specs.SearchesOnAnyThread`)."""
        ids = self._ids
        return ids is not None and len(ids) >= HAND_OFF_MIN_ROWS

    def search_state(self) -> tuple[Any, Any, bool, Any, Any, bool]:
        """What this thread's last :meth:`search` left for :meth:`rescore` (its scan's or rescoring's scores, and
        whether the copy it scanned was the index's current one) and for :meth:`scanned_generation`, for the thread
        whose search it served (:class:`~symi_memory.specs.SearchesOnAnyThread`)."""
        last = self._last
        return (getattr(last, "scan", None), getattr(last, "exact", None), bool(getattr(last, "current", False)),
                getattr(last, "asked", None), getattr(last, "scored", None), bool(getattr(last, "by_row", False)))

    def adopt_search_state(self, state: tuple[Any, Any, bool, Any, Any, bool]) -> None:
        """Make ``state`` (:meth:`search_state` of the thread that searched) this thread's last search."""
        (self._last.scan, self._last.exact, self._last.current, self._last.asked, self._last.scored,
         self._last.by_row) = state

    def scanned_generation(self) -> Generation | None:
        """The index generation of the scan copy this thread's last :meth:`search` scored its chunks from, and its
        :meth:`rescore` since, when every score came from that one copy (its rows, or its stored vectors read by
        the ids it holds, checked to be of its generation); ``NO_GENERATION`` when they came from copies of two
        generations (another thread loaded a newer one meanwhile); None when a score was read by chunk rowid
        from the index (at the snapshot the reading connection saw) or none was scored. A search whose rows are
        of another generation than the scores (a rowid SQLite gave a new chunk, scored by the deleted chunk's
        vector) reads them again."""
        if getattr(self._last, "by_row", False):
            return None
        return getattr(self._last, "scored", None)  # type: ignore[no-any-return]

    def _note(self, generation: Generation) -> None:
        """This thread's search scored chunks from a scan copy of ``generation`` (:meth:`scanned_generation`)."""
        seen = getattr(self._last, "scored", None)
        self._last.scored = generation if seen is None or seen == generation else NO_GENERATION

    def rescore(self, query: Sequence[float], rowids: Sequence[int]) -> dict[int, float]:
        """The vector scores of these chunks as :meth:`search` computes them (chunk and units).

        Chunks this thread's last scan scored (or, after a quantized scan, rescored) take that score, as does
        every chunk an int8 copy that keeps its float32 rows holds (from its row, while that copy is the loaded
        one); the others are computed from their stored vectors; chunks without a vector are left out.
        """
        import numpy as np

        last: Any = getattr(self._last, "scan", None)
        exact: Any = getattr(self._last, "exact", None)
        # A scan copy of the index as it is now that holds no units: the index holds none either.
        units = not (getattr(self._last, "current", False) and self._offsets is None)
        seen = last if last is not None else exact
        if seen is not None and rowids:
            q = seen[0]
            asked = getattr(self._last, "asked", None)
            if asked is not None and asked[0] is query and tuple(query) == asked[1]:
                same = True  # the list the scan was asked with, holding the same floats (a finite query)
            else:
                qn = np.asarray(query, dtype=np.float32)
                norm = _vnorm(qn)
                same = bool(norm) and qn.shape == q.shape and np.array_equal(qn / norm, q)
            if same:
                if last is None:
                    known = exact[1]
                    copy = known() if isinstance(known, weakref.ref) else None
                    if copy is not None and copy is not self._quant:
                        # Replaced since (a write, and a search that loaded the new copy), yet alive (another
                        # thread's search still holds it): its rows are the old index's (a reused rowid's may be a
                        # deleted chunk's). Scored as when it is gone, from the copy now loaded.
                        copy = None
                    if copy is not None:  # a kept copy's search (_search_kept): each chunk it holds from its row
                        self._note(copy.generation)
                        # The band's exact scores first (the same einsum rows), the others from their kept rows.
                        band = dict(zip(exact[2], exact[3], strict=True))
                        missing: list[int] = []
                        if all(map(band.__contains__, rowids)):
                            out = {r: band[r] for r in rowids}
                        else:
                            more, missing = _kept_scores(copy, q, [r for r in rowids if r not in band])
                            # In the order asked, as _kept_scores of them all gives them.
                            out = {r: got for r in rowids
                                   if (got := band.get(r)) is not None or (got := more.get(r)) is not None}
                    else:
                        known = {} if isinstance(known, weakref.ref) else known  # that copy was replaced since
                        out = {r: known[r] for r in rowids if r in known}
                        missing = [r for r in rowids if r not in known]
                    if missing and getattr(self._last, "current", False):
                        # Beyond the quantized scan's candidates: read by stored id, as the rescoring does (or
                        # already, by :meth:`prescore`, while this thread waited for the scan).
                        got = self._prescored(q, missing)
                        if got is None:
                            got = self._exact_chunks(q, missing)
                        if got is not None:
                            out.update(got)
                            missing = [r for r in missing if r not in got]
                else:
                    ids, scores = last[1], last[2]
                    wanted = np.asarray(list(rowids), dtype=np.int64)
                    pos = np.searchsorted(ids, wanted)  # the scan's chunk rowids are in rowid order
                    pos[pos >= len(ids)] = 0
                    found = ids[pos] == wanted
                    out = {int(r): float(scores[p]) for r, p, ok in zip(wanted, pos, found, strict=True) if ok}
                    missing = [int(r) for r, ok in zip(wanted, found, strict=True) if not ok]
                if missing:  # written since the scan copy loaded
                    self._last.by_row = True
                    out.update(combined_cosines(self.store, query, missing, self.unit_weight, units=units))
                return out
        self._last.by_row = True
        return combined_cosines(self.store, query, rowids, self.unit_weight, units=units)

    def prescore(self, query: Sequence[float], rowids: Sequence[int]) -> None:
        """While this thread waits for its scan on another thread: the exact scores of these chunks (the keyword
        candidates), read by stored id from the scan copy now loaded, as :meth:`rescore` computes those the scan
        did not rescore; kept for this thread's next :meth:`rescore` of the same query against the same copy, at
        the same index generation (else it computes them again). A copy holding its float32 rows: nothing to read
        ahead."""
        import numpy as np

        self._last.pre = None
        with self._lock:
            copy = self._quant
        q = np.asarray(query, dtype=np.float32)
        norm = _vnorm(q)
        if copy is None or copy.rows is not None or not norm or not len(rowids):
            return
        q = q / norm
        got = self._exact_chunks(q, rowids, copy)
        if got is not None:
            # The copy by weak reference: a read-ahead its rescoring never took (every keyword candidate a vector
            # hit, say) must not keep a replaced copy alive on an idle thread.
            self._last.pre = (q, weakref.ref(copy), frozenset(rowids), got)

    def _prescored(self, q: Any, rowids: list[int]) -> dict[int, float] | None:
        """:meth:`_exact_chunks` of these rowids from what :meth:`prescore` read for them, or None."""
        import numpy as np

        pre = getattr(self._last, "pre", None)
        self._last.pre = None
        if pre is None:
            return None
        pq, ref, asked, got = pre
        with self._lock:
            current = self._quant
        if (current is None or ref() is not current or not asked.issuperset(rowids) or pq.shape != q.shape
                or not np.array_equal(pq, q) or self.store.generation_key() != current.generation):
            return None
        self._note(current.generation)
        return {r: got[r] for r in rowids if r in got}

    def _segments(self, copy: _Quantized, segs: Any, q: Any) -> Any:
        """Exact scores of these scan segments (chunk indexes into the scan) from their stored float32 vectors.

        Computed as the float32 scan computes them (bit for bit while its product runs in einsum, below
        ``SMALL_SCAN_ROWS``); None when the stored vectors are no longer those of the scan copy (the caller reads by chunk).
        """
        import numpy as np

        vids, generation = copy.vids, copy.generation
        rows, starts = _segment_rows(copy, segs)
        if copy.rows is not None:
            m = copy.rows[rows]  # the rows as the float32 scan holds them: normalised already
        else:
            m = self.store.vector_rows(vids[rows], q.shape[0], generation)
            if m is None:
                return None
            _normalise(m)
        # As the float32 scan computes a score (rows normalised, then one loop per row): the same bits, so a
        # float32 and a quantized scan order near-ties alike, and copies of one vector tie wherever they sit
        # in the batch (a matrix product gave them scores a few ulps apart, by position).
        cos = np.einsum("ij,j->i", m, q)
        if starts is None:
            return _nan_last(cos)
        # A non-finite unit makes its chunk NaN, as in the float32 scan (where the chunk never ranks): ranked last.
        return _nan_last(combine_unit(cos[starts], np.maximum.reduceat(cos, starts), self.unit_weight))

    def _refined(self, copy: _Quantized, segs: Any, r: Any) -> Any:
        """Scores of these scan segments from the int8 codes plus their residual codes (memory only), within
        :meth:`_fine_bound` of the float32 ones; NaN for a segment holding a non-finite stored vector."""
        import numpy as np

        rows, starts = _segment_rows(copy, segs)
        x = copy.codes(rows)
        np.bitwise_xor(x, 0x80, out=x)  # faiss stores a signed code c as c + 128
        cos = x.view(np.int8).astype(np.float32) @ r
        cos += copy.fine_scale[rows] * (copy.fine[rows].astype(np.float32) @ r)
        if starts is None:
            return cos
        return combine_unit(cos[starts], np.maximum.reduceat(cos, starts), self.unit_weight)

    @staticmethod
    def _fine_bound(copy: _Quantized, q: Any, r: Any) -> float:
        """The most a refined score (:meth:`_refined`) can differ from the float32 one: Cauchy-Schwarz on what is
        left of each row's code error after its residual code, as :meth:`_probe` bounds the scan's, plus the
        rounding margin, and the rounding of the refined products themselves (float32, ``d`` terms each:
        at most about ``d * 2**-24`` times the sum of the terms' sizes, which Cauchy-Schwarz bounds by the
        largest row's norm in code units times ``|r|``)."""
        import numpy as np

        dims = q.shape[-1]
        norm_r = _vnorm(r)
        first = float(np.abs(q) @ copy.fine_err_dim)
        own = 1.01 * (dims + 4) * 2.0 ** -24 * (copy.code_row + copy.err_row) * norm_r
        return min(first, norm_r * copy.fine_err_row) + slack(dims) + own

    def _exact_chunks(self, q: Any, rowids: Sequence[int], copy: _Quantized | None = None) -> dict[int, float] | None:
        """Exact scores of these chunk rowids that the current scan copy (or ``copy``) holds, read by stored id."""
        import numpy as np

        if copy is None:
            with self._lock:
                copy = self._quant
            if copy is not None and len(rowids):
                self._note(copy.generation)  # rescore's chunks beyond the scan (prescore's are noted when taken)
        if copy is None or not len(rowids):
            return None
        chunk_ids = copy.chunk_ids
        wanted = np.asarray(list(rowids), dtype=np.int64)
        pos = np.searchsorted(chunk_ids, wanted)
        pos[pos >= len(chunk_ids)] = 0
        found = chunk_ids[pos] == wanted
        if not found.any():
            return {}
        scores = self._segments(copy, pos[found], q)
        if scores is None:
            return None
        return {int(r): float(s) for r, s in zip(wanted[found], scores, strict=True)}

    def _search_quantized(self, copy: _Quantized, q: Any, k: int) -> list[tuple[int, float]]:
        """Quantized scan for candidates, then their exact float32 scores from the stored vectors.

        ``bound`` is the most any row's scan score can differ from its float32 cosine for this query
        (:meth:`_bound`). The first k chunks by scan score are
        rescored; the k-th best of them, ``floor``, is a lower bound of the true k-th best, so every
        chunk that can beat it has a row scoring at least ``floor - bound`` in the scan, and those are
        rescored too. The answer is the float32 scan's.
        """
        import numpy as np

        self._note(copy.generation)  # its _fallback, when it takes it, reads by chunk rowid instead
        if copy.fine is not None:
            return self._search_refined(copy, q, k)
        if copy.rows is not None and copy.offsets is None and getattr(self._last, "current", False):
            return self._search_kept(copy, q, k)
        quant, offsets, chunk_ids = copy.index, copy.offsets, copy.chunk_ids
        ntotal = int(quant.ntotal)
        chunks = len(chunk_ids)
        probe, unit, bound = self._probe(copy, q)
        spread = min(4.0, ntotal / max(1, chunks))
        factor, least = RESCORE_WIDE["kept" if copy.rows is not None else copy.kind]
        wide = min(ntotal, max(int(max(k * factor, least) * spread), self._reach.get(k, 0) * 3 // 2))
        exact: dict[int, float] = {}  # segment -> exact score
        ok = bool(getattr(self._last, "current", False))  # else the stored ids may be stale: read by chunk
        while True:
            dist, pos = quant.search(probe, wide)
            pos, dist = pos[0], dist[0] * unit
            keep = pos >= 0
            pos, dist = pos[keep], dist[keep]
            segs = (pos if offsets is None else np.searchsorted(offsets, pos, side="right") - 1).tolist()
            order = list(dict.fromkeys(segs))  # chunks by their best row's scan score
            first = [s for s in order[:k] if s not in exact]
            if first:
                got = self._segments(copy, first, q) if ok else None
                if got is None:
                    return self._fallback(copy.offsets is not None, q, k, chunk_ids[order].tolist())
                exact.update(zip(first, got.tolist(), strict=True))
            # The k-th best exact score (the exact scores hold no NaN: _segments ranks those -inf).
            best = [exact[s] for s in order[:k]]
            floor = min(best) if len(best) >= min(k, chunks) else -np.inf
            cut = floor - bound
            if len(dist) and dist[-1] >= cut and wide < ntotal:
                wide = min(ntotal, wide * 4)  # the band reaches past the rows asked for: look further
                continue
            reach = int(np.count_nonzero(dist >= cut))  # scan scores are in descending order
            self._reach[k] = reach
            rest = [s for s in dict.fromkeys(segs[:reach]) if s not in exact]
            if rest:
                got = self._segments(copy, rest, q)
                if got is None:
                    return self._fallback(copy.offsets is not None, q, k, chunk_ids[order].tolist())
                exact.update(zip(rest, got.tolist(), strict=True))
            break
        rowids = chunk_ids[list(exact)]
        values = np.fromiter(exact.values(), dtype=np.float64, count=len(exact))
        self._last.exact = (q, dict(zip(rowids.tolist(), values.tolist(), strict=True)))  # keyword candidates read these
        top = np.lexsort((rowids, -values))[:k]  # best first, ties by rowid
        return list(zip(rowids[top].tolist(), values[top].tolist(), strict=True))

    def _search_kept(self, copy: _Quantized, q: Any, k: int) -> list[tuple[int, float]]:
        """:meth:`_search_quantized` for an int8 copy of the index as it is now that keeps its float32 rows and
        holds no units (below ``HALF_AUTO_MIN``): a scan row is a chunk, its exact score one einsum row of
        ``copy.rows``, and the rescoring works on arrays (no dicts or lists of segments).

        A prefix of the rows faiss returns (best first) is rescored at once: the k rows the general path rescores
        first, or as many as the last search's band reached if more (the band is then usually rescored in one
        einsum). The k-th best exact score among them, ``floor``, is at most the true k-th best, so every chunk
        of the true top k scans at least ``floor - bound``; the rows scanning that or more that are not rescored
        yet are rescored next, and the top k of all rescored rows is the float32 scan's. What the search leaves
        for :meth:`rescore` is the copy (by weak reference) and the band it rescored (chunk rowids in scan order,
        their exact scores): a keyword candidate in the band takes its score from there (most do: they are near
        the query too), any other chunk the copy holds is scored from its kept row, the same bits (one einsum row
        each), while it is still the loaded copy.

        faiss is asked for the band's last reach and a quarter more (at least ``RESCORE_WIDE["kept"]``): keeping
        ``wide`` best rows costs faiss's heap about 0.45 us a row at 10k (k = 211: 0.31 ms, k = 1: 0.21), and over
        the 10k bench queries no band reached a quarter past the last one's.
        """
        import numpy as np

        quant, rows = copy.index, copy.rows
        ntotal = int(quant.ntotal)
        probe, unit, bound = self._probe(copy, q)
        factor, least = RESCORE_WIDE["kept"]
        last = self._reach.get(k, 0)
        wide = min(ntotal, max(k * factor, least, last + last // 4))
        need = min(k, ntotal)
        scores: Any = None
        while True:
            dist, pos = quant.search(probe, wide)
            pos, dist = pos[0], dist[0] * unit
            if pos[-1] < 0:  # faiss returned fewer rows than asked (-1 last)
                keep = pos >= 0
                pos, dist = pos[keep], dist[keep]
            scores = _nan_last(np.einsum("ij,j->i", rows[pos[: max(need, last + last // 8)]], q))
            # The k-th best exact score (NaN ranks -inf) bounds the true k-th best from below.
            have = len(scores)
            floor = float(np.partition(scores, have - need)[have - need]) if have >= need > 0 else -np.inf
            cut = floor - bound
            if len(dist) and dist[-1] >= cut and wide < ntotal:
                wide = min(ntotal, wide * 4)  # the band reaches past the rows asked for: look further
                continue
            reach = int(np.count_nonzero(dist >= cut))  # scan scores are in descending order
            self._reach[k] = reach
            break
        if reach > len(scores):
            scores = np.concatenate([scores, _nan_last(np.einsum("ij,j->i", rows[pos[len(scores) : reach]], q))])
        rowids = copy.chunk_ids[pos[: len(scores)]]
        # Best first, ties by rowid (a float32 score is its float64 value: the order and the floats are the same).
        top = np.lexsort((rowids, -scores))[:k]
        ids, values = rowids.tolist(), scores.tolist()
        # Keyword candidates are scored from the band, else from the copy's rows.
        self._last.exact = (q, weakref.ref(copy), ids, values)
        return [(ids[i], values[i]) for i in top.tolist()]

    def _search_refined(self, copy: _Quantized, q: Any, k: int) -> list[tuple[int, float]]:
        """:meth:`_search_quantized` for an int8 copy with residual codes: the band is narrowed in memory.

        Every segment the scan returns gets a refined score (:meth:`_refined`) within ``fine`` of its float32
        one. The k-th best of those minus ``fine``, ``floor``, is a lower bound of the true k-th best score;
        a segment the scan did not return scores below it when the scan's last score is below
        ``floor - bound`` (else the scan is asked for more). Only the segments whose refined score is within
        ``fine`` of ``floor`` or above can be in the top k: those alone are rescored from the stored float32
        vectors (about k of them), and the answer is the float32 scan's.
        """
        import numpy as np

        quant, offsets, chunk_ids = copy.index, copy.offsets, copy.chunk_ids
        ntotal = int(quant.ntotal)
        chunks = len(chunk_ids)
        probe, unit, bound = self._probe(copy, q)
        r = (q / copy.scale).astype(np.float32)
        fine = self._fine_bound(copy, q, r)
        spread = min(4.0, ntotal / max(1, chunks))
        factor, least = RESCORE_WIDE[copy.kind]
        wide = min(ntotal, max(int(max(k * factor, least) * spread), self._reach.get(k, 0) * 3 // 2))
        need = min(k, chunks)
        while True:
            dist, pos = quant.search(probe, wide)
            pos, dist = pos[0], dist[0] * unit
            keep = pos >= 0
            pos, dist = pos[keep], dist[keep]
            if offsets is None:
                segs = pos
            else:
                found = np.searchsorted(offsets, pos, side="right") - 1
                segs = found[np.sort(np.unique(found, return_index=True)[1])]  # by their best row's scan score
            # The first k segments by scan score give a first floor; only the segments the scan scores within
            # the scan's bound of it can beat it, so only those are refined (about the int8 band, not all rows
            # asked for). The floor over all refined segments is at least as high.
            est = self._refined(copy, segs[:need], r)
            low = est - fine
            low[np.isnan(low)] = -np.inf
            if len(low) >= need:
                # Without units a segment is a row, in the scan's descending order: those within the bound
                # of the first floor are a prefix. With units every returned segment is refined.
                first_cut = float(low.min()) - bound
                upto = need + int(np.count_nonzero(dist[need:] >= first_cut)) if offsets is None else len(segs)
                if upto > need:
                    est = np.concatenate([est, self._refined(copy, segs[need:upto], r)])
                    low = est - fine
                    low[np.isnan(low)] = -np.inf
                floor = float(np.partition(low, len(low) - need)[len(low) - need])
            else:
                floor = -np.inf
            cut = floor - bound
            if len(dist) and dist[-1] >= cut and wide < ntotal:
                wide = min(ntotal, wide * 4)  # a chunk the scan did not return could still be in the top k
                continue
            self._reach[k] = int(np.count_nonzero(dist >= cut))
            band = segs[: len(est)][~(est + fine < floor)]  # NaN (a non-finite stored vector) is rescored: it ranks last
            exact = self._segments(copy, band, q) if getattr(self._last, "current", False) else None
            if exact is None:  # the copy is older than the index: every chunk the scan returned, by chunk rowid
                return self._fallback(copy.offsets is not None, q, k, chunk_ids[segs].tolist())
            break
        rowids = chunk_ids[band]
        values = exact.astype(np.float64)
        self._last.exact = (q, dict(zip(rowids.tolist(), values.tolist(), strict=True)))  # keyword candidates read these
        top = np.lexsort((rowids, -values))[:k]  # best first, ties by rowid
        return list(zip(rowids[top].tolist(), values[top].tolist(), strict=True))

    def _probe(self, copy: _Quantized, q: Any) -> tuple[Any, float, float]:
        """(what faiss searches with, the factor that turns its scores into cosines, the error bound).

        int8: faiss multiplies int8 codes by an int8 query, so the query is divided by the codes'
        per-dimension scale and rounded onto [-127, 127] (factor ``1/t``). For any row i, its scan
        score minus its float32 cosine is ``sum_j r_j e_ij + sum_j d_j x_ij`` with ``r = q / scale``,
        ``e`` the row's code error (``x - v * scale``), ``d`` the query's rounding and ``x`` the codes,
        so it is at most ``|r| |e_i| + |d| |x_i|`` (Cauchy-Schwarz; ``|q| . err_dim`` bounds the first
        term too). float16: only the rows are rounded.
        """
        import numpy as np

        err_dim, err_row, scale, code_row = copy.err_dim, copy.err_row, copy.scale, copy.code_row
        first = float(np.abs(q) @ err_dim)
        if scale is None:
            return (np.ascontiguousarray(q.reshape(1, -1), dtype=np.float32), 1.0,
                    min(first, err_row) + slack(q.shape[-1]))
        r = (q / scale).astype(np.float64)
        top = float(np.abs(r).max())
        t = INT8_MAX / top if top > 0 else 1.0
        p = np.rint(r * t)
        off = p / t
        off -= r
        # math.sqrt of a float64 is numpy's sqrt of it (both correctly rounded): _vnorm's bits, two ufunc calls fewer.
        rounding = math.sqrt(off.dot(off)) * code_row
        bound = min(first, math.sqrt(r.dot(r)) * err_row) + rounding + slack(q.shape[-1])
        return p.astype(np.float32).reshape(1, -1), 1.0 / t, bound

    def _fallback(self, units: bool, q: Any, k: int, rowids: list[int]) -> list[tuple[int, float]]:
        """The index changed since the scan copy loaded: rescore its candidates by chunk rowid from SQLite
        (``units``: the copy holds unit vectors, the chunks are scored with theirs)."""
        self._last.by_row = True
        if units:
            exact = combined_cosines(self.store, q, rowids, self.unit_weight)
        else:
            exact = self.cosine(q, dict(self.store.vectors_by_rowid(rowids)))
        self._last.exact = (q, exact)
        return sorted(exact.items(), key=lambda kv: (-kv[1], kv[0]))[:k]

    def cosine(self, query: Sequence[float], blobs: dict[int, bytes | None]) -> dict[int, float]:
        """Exact cosine of the query with the given stored vectors (one matrix product)."""
        import numpy as np

        q = np.asarray(query, dtype=np.float32)
        qn = _vnorm(q)
        keep = {r: b for r, b in blobs.items() if b and len(b) == q.shape[0] * 4}
        if not keep or qn == 0.0:
            return {}
        matrix = np.frombuffer(b"".join(keep.values()), dtype=np.float32).reshape(len(keep), q.shape[0])
        norms = np.linalg.norm(matrix, axis=1)
        norms[norms == 0] = np.inf  # a zero vector scores 0
        scores = (matrix @ q) / (norms * qn)
        return {r: float(s) for r, s in zip(keep, scores, strict=True)}

    def status(self) -> dict[str, Any]:
        """What the scan uses: ``scan`` is float32, int8+float32-rescoring, float16+float32-rescoring, or none
        (nothing loaded yet); ``bytes`` the memory the scan copy holds (codes, plus the float32 rows an int8
        copy keeps for its rescoring below ``HALF_AUTO_MIN`` vectors, or its residual codes up to
        ``FINE_MAX_ROWS``); ``parts`` how many parts a search scans at once; ``residual`` whether residual
        codes narrow the rescoring."""
        with self._lock:
            loaded = (self._matrix is not None or self._quant is not None) and self._generation != NO_GENERATION
            quant = self._quant if loaded else None
            if quant is not None:
                size = int(quant.index.ntotal) * int(quant.index.d) * (1 if quant.kind == "int8" else 2)
                size += 0 if quant.rows is None else int(quant.rows.nbytes)
                size += 0 if quant.fine is None else int(quant.fine.nbytes) + int(quant.fine_scale.nbytes)
            else:
                size = int(self._matrix.nbytes) if loaded and self._matrix is not None else 0
            return {"loaded": loaded,
                    "rows": 0 if self._ids is None else int(len(self._ids)),
                    "units": 0 if self._offsets is None else int(len(self._ids) - len(self._offsets)),
                    "scan": QUANTIZED[quant.kind] if quant is not None else "float32" if loaded else "none",
                    "bytes": size,
                    # How many parts the quantized copy is searched in at once (store.vector.scanThreads), and
                    # whether its rows' residual codes narrow the rescoring (FINE_MAX_ROWS).
                    "parts": len(quant.index.parts) if quant is not None else 1,
                    "residual": quant is not None and quant.fine is not None}


def _kept_scores(copy: _Quantized, q: Any, rowids: Sequence[int]) -> tuple[dict[int, float], list[int]]:
    """(exact scores of the chunks among ``rowids`` that an int8 copy keeping its float32 rows and holding
    no units holds, from those rows as :meth:`_segments` scores them; the rowids it does not hold)."""
    import numpy as np

    chunk_ids = copy.chunk_ids
    wanted = np.fromiter(rowids, dtype=np.int64, count=len(rowids))
    pos = np.searchsorted(chunk_ids, wanted)  # the scan's chunk rowids are in rowid order
    pos[pos >= len(chunk_ids)] = 0
    found = chunk_ids[pos] == wanted
    scores = _nan_last(np.einsum("ij,j->i", copy.rows[pos[found]], q))
    return dict(zip(wanted[found].tolist(), scores.tolist(), strict=True)), wanted[~found].tolist()


def _segment_rows(copy: _Quantized, segs: Any) -> tuple[Any, Any]:
    """(the scan rows of these segments, where each segment starts among them; None without units)."""
    import numpy as np

    offsets = copy.offsets
    segs = np.asarray(segs, dtype=np.int64)
    if offsets is None:
        return segs, None
    ends = np.append(offsets[1:], len(copy.vids))
    lengths = ends[segs] - offsets[segs]
    rows = np.repeat(offsets[segs] - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
    return rows, np.cumsum(lengths) - lengths


def _fine_fields(fine: Any, fine_scale: Any, err_dim: Any, err_row: float, dims: int) -> dict[str, Any]:
    """The residual's fields of a :class:`_Quantized`."""
    import numpy as np

    return {"fine": fine, "fine_scale": fine_scale, "fine_err_row": err_row,
            "fine_err_dim": np.zeros(dims, dtype=np.float32) if err_dim is None else err_dim}


def _one_thread_search(index: Any, probe: Any, k: int) -> Any:
    """``index.search(probe, k)`` on the calling thread alone (OpenMP's thread count restored after).

    One query: waking OpenMP's other threads cost more than they save on a small shared host (10k rows: about
    5.6 ms of CPU a search against 1.6 with one thread, when OMP_NUM_THREADS is not set; 100k rows on 2 busy
    cores: 13-16 ms of CPU and 9-23 ms wall against 5.5-6.3 ms and 6-9 ms; 1M rows: no wall time saved).
    """
    import faiss

    threads = faiss.omp_get_max_threads()
    if threads == 1:
        return _faiss_search(index, probe, k)
    faiss.omp_set_num_threads(1)
    try:
        return _faiss_search(index, probe, k)
    finally:
        faiss.omp_set_num_threads(threads)


def _faiss_search(index: Any, probe: Any, k: int) -> Any:
    """``index.search(probe, k)`` for one float32 query row: faiss's own call with the result arrays made here
    (its Python wrapper's checks and conversions cost about a tenth of a 10k-row int8 scan's time outside it)."""
    import faiss
    import numpy as np

    if k <= 0 or probe.shape != (1, index.d) or probe.dtype != np.float32 or not probe.flags.c_contiguous:
        return index.search(probe, k)  # as faiss checks and converts them
    dist = np.empty((1, k), dtype=np.float32)
    pos = np.empty((1, k), dtype=np.int64)
    index.search_c(1, faiss.swig_ptr(probe), k, faiss.swig_ptr(dist), faiss.swig_ptr(pos), None)
    return dist, pos


def _vnorm(v: Any) -> float:
    """``float(np.linalg.norm(v))`` of a 1-D float array, as numpy computes it (``sqrt(v.dot(v))``, the same
    bits) without its argument checks: a search takes several norms of one vector, each a few microseconds."""
    import numpy as np

    return float(np.sqrt(v.dot(v)))


def _normalise(rows: Any) -> None:
    """Scale float32 rows to unit length in place (zero rows stay zero)."""
    import numpy as np

    norms = np.linalg.norm(rows, axis=1)
    norms[norms == 0] = 1.0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # a non-finite row stays NaN: _nan_last
        rows /= norms[:, None]


def _nan_last(scores: Any) -> Any:
    """Rescored scores with NaN (a stored vector with NaN) as -inf: ranked last, as the float32 scan ranks NaN."""
    import numpy as np

    return np.fmax(scores, -np.inf, out=scores)  # fmax takes the number over a NaN, and x over -inf
