"""The faiss vector side: a faiss index kept in step with the SQLite index.

The store tells us about every committed write (``IndexStore.listeners``):
small changes are applied in place (removes, tombstones, adds) in the
writer's thread; a full reindex, a write we missed (another process) or too
many tombstones trigger a rebuild from a snapshot of the SQLite vectors.
A search never builds: when it finds the index behind (another process
wrote, or the saved file did not match) it starts a background rebuild.
While the index is behind the store, searches get exact answers from the
store itself (sqlite-vec's KNN, or a numpy scan of the stored vectors when
sqlite-vec is off), so a search never waits and never sees a deleted or
changed chunk.

The faiss index holds one row per chunk vector; unit (line) vectors
(``chunking.units``) stay in the store. Each hit, and each keyword candidate,
is scored by the core with its lines (``vectors.combined_cosines``), so scores
match the builtin backend's; a chunk that only one of its lines would find is
found when the keyword side finds it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from symi_memory import forking
from symi_memory.index.store import IndexChange, IndexStore, pack_vector

from .indexes import FaissIndex, build_index
from .persist import index_path, load_index, remove_stale_temps, save_index
from .settings import FaissSettings
from .snapshot import read_snapshot, store_uid, unit_rows, vector_stats

__all__ = ["FaissVectors", "SYNC_BUILD_LIMIT"]

log = logging.getLogger("symi_memory.faiss")

SYNC_BUILD_LIMIT = 20_000  # a sync's own rebuild runs inline up to this size; larger ones in a thread
SCAN_LIMIT = 20_000  # without sqlite-vec, searches during a rebuild scan at most this many vectors
CLOSE_JOIN_S = 2.0  # close() waits this long for a running build, then leaves the daemon thread behind
SAVE_DELAY_S = 2.0  # saves run in a timer thread, off the sync path, coalescing bursts of syncs
SAVE_INTERVAL_S = 60.0  # indexes above SAVE_LARGE are saved at most this often (and on close)
SAVE_LARGE = 20_000
REBUILD_FAILED = "faiss rebuild failed"
SAVE_FAILED = "cannot save the faiss index to"


@attrs.define
class FaissVectors:
    """A :class:`~symi_memory.index.backend.VectorSide` backed by faiss."""

    store: IndexStore
    settings: FaissSettings
    path: Path = attrs.field(default=None)
    _index: FaissIndex | None = None
    _generation: int = -1
    # The store's index id the faiss index was built for: generations number one index id's writes (an index
    # an older release rebuilt, or a fresh one in place of an unreadable file, numbers them from 1 again).
    _index_id: str | None = None
    _lock: threading.RLock = attrs.field(factory=threading.RLock)
    # Held by a save for its whole write and by changes to the live index: a save never holds
    # ``_lock``, so searches go on while a large index is written (seconds at 1M vectors).
    _save_lock: threading.Lock = attrs.field(factory=threading.Lock)
    _building: bool = False
    _pending: list[IndexChange] = attrs.field(factory=list)
    _dirty: bool = False
    _thread: threading.Thread | None = None
    last_error: str | None = None
    #: ``(store id, index id)`` (:func:`.snapshot.store_uid`): saved files are written and loaded for it, and only
    #: for a faiss index of that index id. None until it could be claimed (another process's long write at open).
    _claim: tuple[str, str] | None = None
    _save_timer: threading.Timer | None = None
    _closed: bool = False

    def __attrs_post_init__(self) -> None:
        if self.path is None:
            self.path = index_path(self.store.path)
        forking.track(self)

    def _after_fork_in_child(self) -> None:
        """In a forked child: the build and save threads are the parent's, and a lock they held stays held. A build
        the parent was running is not running here: the child builds its own when it next needs the index. The
        parent saves the files; the child saves only what it changes itself."""
        self._lock, self._save_lock = threading.RLock(), threading.Lock()
        if self._building:
            self._building, self._index, self._generation, self._pending = False, None, -1, []
        self._thread = self._save_timer = None
        self._dirty = False

    # ------------------------------------------------------------- lifecycle

    def open(self) -> None:
        """Follow the store's writes and load the saved index if it still matches the store."""
        # Never waits for another process's write: without the store id now, no saved file is loaded (searches are
        # answered exactly while the index is built from the store) and the id is claimed again before a save.
        claim = self._claim = store_uid(self.store)
        self.store.listeners.append(self._on_change)
        remove_stale_temps(self.path)
        with self.store.lock:  # no write can slip between reading the generation and loading
            index_id, generation = self.store.generation_key()
            # A saved file is kept for the store id of the index id it was claimed with: never for another index.
            expect = self._expected_header(generation, claim[0]) if claim and claim[1] == index_id else None
            loaded = load_index(self.path, self.settings, expect) if expect else None
            if loaded is not None:
                with self._lock:
                    self._index, self._generation, self._index_id = loaded, generation, index_id
                log.info("loaded faiss %s index (%d vectors) from %s", loaded.kind, loaded.live, self.path)

    def _expected_header(self, generation: int, uid: str) -> dict[str, Any] | None:
        dims = self.store.vec_dims or self._dims()
        if not dims:
            return None
        count, rowid_sum = vector_stats(self.store, dims)
        return {"dims": dims, "generation": generation, "store": uid,
                "identity": self.store.get_meta("identity"), "build": self.settings.build_identity(),
                "live": count, "rowidSum": rowid_sum}

    def _dims(self) -> int | None:
        return self.store.vector_dims()

    def close(self) -> None:
        """Stop following the store and save; a build still running after a short wait is abandoned."""
        if self._on_change in self.store.listeners:
            self.store.listeners.remove(self._on_change)
        with self._lock:
            self._closed = True
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=CLOSE_JOIN_S)
            if thread.is_alive():
                log.info("faiss rebuild still running at close; the index is rebuilt on the next open")
        with self._lock:
            timer, self._save_timer = self._save_timer, None
        if timer is not None:
            timer.cancel()
        self.save()

    # --------------------------------------------------------------- changes

    def _on_change(self, change: IndexChange) -> None:
        """Runs in the writer's thread, under the store lock, right after a commit."""
        with self._save_lock, self._lock:
            if self._building:
                self._pending.append(change)
                return
            index = self._index
            if (change.full or index is None or self._generation != change.generation - 1
                    or change.index_id != self._index_id):
                self._generation = -1  # searches get exact answers from the store until the rebuild is done
                rebuild = True
            else:
                self._apply(index, change)
                self._generation = change.generation
                self._dirty = True
                rebuild = index.needs_rebuild()
        if rebuild:
            self._start_rebuild(inline_if_small=True)
        else:
            self._schedule_save()

    def _apply(self, index: FaissIndex, change: IndexChange) -> None:
        import numpy as np

        index.remove(change.removed)
        added = [(r, b) for r, b in change.added if len(b) == index.dims * 4]
        if added:
            matrix = np.frombuffer(b"".join(b for _, b in added), dtype=np.float32).reshape(len(added), index.dims)
            index.add([r for r, _ in added], unit_rows(matrix.copy()))

    # -------------------------------------------------------------- rebuilds

    def ready(self) -> bool:
        """True when the faiss index matches the store; otherwise starts a background rebuild (never waits)."""
        key = self.store.generation_key()
        with self._lock:
            if (self._index_id, self._generation) == key and self._index is not None:
                return True
            if self._building:
                return False
        self._start_rebuild(inline_if_small=False)
        return False

    def catch_up(self) -> None:
        """:class:`~symi_memory.specs.CatchesUp`: after an explicit sync, rebuild an index found behind the store
        (inline up to ``SYNC_BUILD_LIMIT`` vectors, so ``close`` saves it; larger ones in the background)."""
        key = self.store.generation_key()
        with self._lock:
            if self._building or self._closed or ((self._index_id, self._generation) == key and self._index is not None):
                return
        try:
            self._start_rebuild(inline_if_small=True)
        except Exception as exc:  # the next search starts it again
            self.last_error = f"{REBUILD_FAILED}: {exc}"
            log.warning("cannot bring the faiss index up to date after the sync: %s", exc)

    def _start_rebuild(self, *, inline_if_small: bool) -> bool:
        """Rebuild; inline (returns True when current) only for a sync's small rebuild, else in a thread."""
        with self._lock:
            if self._building or self._closed:
                return False
            self._building = True
            self._pending = []
            size = self._index.live if self._index is not None else 0
        if inline_if_small and max(
            size, vector_stats(self.store, self.store.vec_dims or self._dims() or 0)[0]
        ) <= SYNC_BUILD_LIMIT:
            self._rebuild()
            return (self._index_id, self._generation) == self.store.generation_key()
        self._thread = threading.Thread(target=self._rebuild, daemon=True, name="symi-faiss-build")
        self._thread.start()
        return False

    def _rebuild(self) -> None:
        started = time.perf_counter()
        try:
            snap = read_snapshot(self.store)
            self._configured_threads()
            index = build_index(self.settings, snap.dims or 1, snap.rowids, snap.matrix) if snap.dims else None
        except Exception as exc:  # the next search retries; searches meanwhile get exact answers
            with self._lock:
                self._building = False
                if self._closed:  # the store was closed under us: nothing to report
                    return
            self.last_error = f"{REBUILD_FAILED}: {exc}"
            log.exception("faiss rebuild failed")
            return
        with self._lock:
            if self._closed:
                self._building = False
                return
            generation = snap.generation
            for change in self._pending:  # writes committed while we were building
                if change.index_id == snap.index_id and change.generation <= generation:
                    continue
                if (change.full or change.generation != generation + 1 or index is None
                        or change.index_id != snap.index_id):
                    generation = -1
                    break
                self._apply(index, change)
                generation = change.generation
            self._index, self._generation, self._index_id = index, generation, snap.index_id
            self._pending, self._building, self._dirty = [], False, True
            if self.last_error is not None and self.last_error.startswith(REBUILD_FAILED):
                self.last_error = None
        log.info("built faiss %s index: %d vectors in %.2fs", self.settings.kind, snap.rowids.size,
                 time.perf_counter() - started)
        self._schedule_save()

    # ------------------------------------------------------------------ save

    def _schedule_save(self) -> None:
        with self._lock:
            if self._save_timer is not None or self._closed:
                return
            large = self._index is not None and self._index.live > SAVE_LARGE
            self._save_timer = threading.Timer(SAVE_INTERVAL_S if large else SAVE_DELAY_S, self._timed_save)
            self._save_timer.daemon = True
            self._save_timer.start()

    def _timed_save(self) -> None:
        with self._lock:
            self._save_timer = None
        self.save()

    def save(self) -> bool:
        """Persist when changed; returns True when a file was written.

        Searches are not held up: the write runs outside ``_lock`` (it only reads the index, as
        searches do); changes to this index wait for it on ``_save_lock``, and a rebuild swaps in
        a new index object, leaving the one being written alone.
        """
        with self._lock:
            if not self._dirty or self._index is None or self._generation < 0:
                return False  # nothing to save: no store id is claimed for it
        claim = self._store_claim()  # before the locks: a claim takes the store's, under which changes take these
        with self._save_lock:
            with self._lock:
                index, generation = self._index, self._generation
                if not self._dirty or index is None or generation < 0:
                    return False
                if claim is None or claim[1] != self._index_id:
                    # No store id yet (the write lock was never free), or the index was replaced since: no file
                    # is saved that an open could take for another index's; the next save asks again.
                    log.info("not saving the faiss index yet: no store id for index %s", self._index_id)
                    return False
                count = index.live
                header = {"generation": generation, "store": claim[0],
                          "identity": self.store.get_meta("identity"), "build": self.settings.build_identity(),
                          "rowidSum": int(index.labels().sum())}
            try:
                save_index(self.path, index, header)
            except OSError as exc:
                self.last_error = f"{SAVE_FAILED} {self.path}: {exc}"
                log.warning("cannot save the faiss index to %s: %s", self.path, exc)
                return False
            with self._lock:
                if self._index is index and self._generation == generation:
                    self._dirty = False
                if self.last_error is not None and self.last_error.startswith(SAVE_FAILED):
                    self.last_error = None
        log.debug("saved faiss index (%d vectors) to %s", count, self.path)
        return True

    def _store_claim(self) -> tuple[str, str] | None:
        """The store id for the index id of the faiss index held now, claimed if not yet (never waiting)."""
        with self._lock:
            claim, index_id = self._claim, self._index_id
        if index_id is None or (claim is not None and claim[1] == index_id):
            return claim
        claim = store_uid(self.store)
        if claim is not None:
            with self._lock:
                self._claim = claim
        return claim

    # ---------------------------------------------------------------- search

    def search(self, query: Sequence[float], k: int) -> list[tuple[int, float]]:
        """``(rowid, cosine)`` best first."""
        import numpy as np

        if not self.ready():
            return self._exact(query, k)
        q = np.asarray(query, dtype=np.float32).reshape(1, -1)
        with self._lock:
            index = self._index
            if index is None:
                return []
            if q.shape[1] != index.dims:
                log.warning("query vector has %d dims, index has %d: reindex needed", q.shape[1], index.dims)
                return []
            norm = float(np.linalg.norm(q))
            if norm == 0.0:
                return []
            self._configured_threads()
            return index.search(q / norm, k)

    def _configured_threads(self) -> None:
        """Apply ``store.faiss.threads`` on the calling thread: OpenMP's thread count is per thread in the
        wheel's libgomp, so setting it where the backend was built leaves a search on another thread (serve's
        workers, an integrator's pool, the background build) with OpenMP's default."""
        want = self.settings.threads
        if want > 0:
            import faiss

            if faiss.omp_get_max_threads() != want:
                faiss.omp_set_num_threads(want)

    def _exact(self, query: Sequence[float], k: int) -> list[tuple[int, float]]:
        """Exact top-k straight from the store, for while the faiss index is behind."""
        import numpy as np

        if self.store.vec_dims:
            return self.store.vec_knn(pack_vector(query), k)
        q = np.asarray(query, dtype=np.float32)
        dims = q.shape[0]
        count, _ = vector_stats(self.store, dims)
        if count == 0 or count > SCAN_LIMIT:
            # Too many to read per search: keyword results carry the search until the build lands.
            return []
        ids, blobs = self.store.all_vectors()
        keep = [(i, b) for i, b in zip(ids, blobs, strict=True) if len(b) == dims * 4]
        return _top_k(q, [i for i, _ in keep], b"".join(b for _, b in keep), k)

    def cosine(self, query: Sequence[float], blobs: dict[int, bytes | None]) -> dict[int, float]:
        """Exact cosine of the query with the given stored vectors."""
        import numpy as np

        q = np.asarray(query, dtype=np.float32)
        qn = float(np.linalg.norm(q))
        keep = {r: b for r, b in blobs.items() if b and len(b) == q.shape[0] * 4}
        if not keep or qn == 0.0:
            return {}
        matrix = np.frombuffer(b"".join(keep.values()), dtype=np.float32).reshape(len(keep), q.shape[0])
        norms = np.linalg.norm(matrix, axis=1)
        norms[norms == 0] = 1.0
        scores = (matrix @ q) / (norms * qn)
        return {r: float(s) for r, s in zip(keep, scores, strict=True)}

    def status(self) -> dict[str, Any]:
        with self._lock:
            index = self._index
            return {"loaded": index is not None and self._generation >= 0,
                    "rows": index.live if index else 0,
                    "index": index.kind if index else self.settings.kind,
                    "tombstones": index.dead if index else 0,
                    "file": str(self.path),
                    # The last rebuild or save that failed, until one succeeds: an index that cannot be saved is
                    # rebuilt from SQLite by every later open.
                    "error": self.last_error}


def _top_k(q: Any, ids: list[int], packed: bytes, k: int) -> list[tuple[int, float]]:
    """Cosine top-k of ``q`` against packed float32 rows, best first."""
    import numpy as np

    qn = float(np.linalg.norm(q))
    if not ids or qn == 0.0 or k <= 0:
        return []
    matrix = np.frombuffer(packed, dtype=np.float32).reshape(len(ids), q.shape[0])
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0] = 1.0
    scores = (matrix @ q) / (norms * qn)
    order = np.argsort(-scores, kind="stable")[:k]
    return [(ids[i], float(scores[i])) for i in order]
