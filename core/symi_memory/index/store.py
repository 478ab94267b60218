"""The SQLite index of one agent: connections and transactions, over the parts that hold its rows.

``IndexStore`` is the facade the indexer, the vector sides and the backends
use. Its methods live in one module per job: :mod:`.meta` (meta, generation,
file listings), :mod:`.writes` (incremental writes), :mod:`.rebuild` (the
full rebuild and its swap), :mod:`.cache` (the embedding cache), :mod:`.fts`
(keyword search), :mod:`.knn` (vector reads and sqlite-vec KNN) and
:mod:`.chunks` (candidate rows); the record types are in :mod:`.records`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import attrs

from .. import forking
from ..errors import BackendError
from .cache import EmbeddingCache
from .chunks import ChunkReads
from .db import (
    SCHEMA_VERSION,
    VecExtension,
    compact_after_migration,
    create_schema,
    drop_old_vec_table,
    file_id,
    load_vec_extension,
    may_write,
    open_db,
    open_index_db,
    set_aside,
)
from .fts import PRUNE_MIN_CHUNKS, KeywordSearch
from .knn import VectorReads
from .meta import MetaRows
from .rebuild import BUILD_SCHEMA, Rebuild, remove_stale_builds
from .records import CandidateRow, ChunkRow, FileRow, IndexChange, UnitRow, VectorSnapshot, pack_vector
from .writes import FileWrites

__all__ = ["BUILD_SCHEMA", "PRUNE_MIN_CHUNKS", "CandidateRow", "ChunkRow", "FileRow", "IndexChange", "IndexStore",
           "UnitRow", "VectorSnapshot", "pack_vector", "remove_stale_builds"]

log = logging.getLogger("symi_memory.index")


# Write transactions that still find the index locked after the busy timeout are retried this often.
LOCK_RETRIES = 4
#: SQLite page cache (``PRAGMA cache_size``, in KiB) of a connection that searches, instead of SQLite's 2 MB.
#: A search reads FTS5's index of its terms, about 140 chunk rows, their line analyses and some stored vectors:
#: with 2 MB that was about 140 page reads from the OS (1.2 MB) per search at 10k chunks, most of them pages
#: read again search after search. The cache fills only as pages are read, up to this size (peak RSS). 8 MB,
#: not more: on the 10k bench store 32 MB took 0.96x the CPU of 2 MB per search and 0.98x that of 8 MB, and
#: the cache is per searching thread (serve's pool has up to 40), so 32 MB would let one agent's searches hold
#: 1.25 GB.
SEARCH_CACHE_KIB = 8 * 1024
LOCK_RETRY_BASE_S = 0.5
#: Beside the index, ``<index>.damaged`` records that a read found the file damaged (:meth:`IndexStore.note_damaged`).
DAMAGED_SUFFIX = ".damaged"
#: How long a fork of this process waits for a write transaction another thread has open on an index to end
#: (:meth:`IndexStore._before_fork`): the indexer commits about every half second. Past it the process forks
#: anyway, and the child cannot write that index (the parent's transaction is the child's too, for SQLite).
FORK_WRITE_WAIT_S = 10.0


class _WriterAfterFork:
    """Stands for an index's writer connection in a forked child until the child first uses it: the child then
    opens its own (:meth:`IndexStore._own_writer`); one that never writes, or only closes, opens none."""

    __slots__ = ("_store",)

    def __init__(self, store: IndexStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store._own_writer(), name)

    def __enter__(self) -> Any:  # ``with store.conn:`` (looked up on the type, not through __getattr__)
        return self._store._own_writer().__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self._store.conn.__exit__(*exc)


def _let_go(conn: apsw.Connection, *, idle: bool = True) -> None:
    """In a forked child: close a connection inherited from the parent, without touching the index (no
    checkpoint, the WAL left as it is), so that SQLite forgets the locks it recorded for it in this process.
    One a parent thread was using at the fork, or the parent's writer inside a transaction (``idle`` False:
    closing would roll it back over the parent's WAL index), is kept open and never used instead."""
    if not idle:  # kept at the fork (IndexStore._after_fork_in_child)
        return
    try:
        conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
        conn.close()
    except apsw.Error:  # ThreadingViolationError: a parent thread was inside SQLite with it
        forking.keep(conn)


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


@attrs.define
class IndexStore(MetaRows, FileWrites, Rebuild, EmbeddingCache, KeywordSearch, VectorReads, ChunkReads):
    """The SQLite index of one agent.

    Thread-safe. Writes go through one connection under ``lock``; every
    reading thread gets its own connection, so with WAL a search never waits
    for a sync's transaction and always sees the last committed index.
    """

    path: Path
    conn: apsw.Connection
    vec: VecExtension
    fts_error: str | None
    vector_wanted: bool
    extension_path: str | None = None
    lock: threading.RLock = attrs.field(factory=threading.RLock)
    vec_dims: int | None = None
    _local: threading.local = attrs.field(factory=threading.local)
    # Weak: a finished thread's connection is closed when its thread-local storage goes.
    _readers: weakref.WeakSet[apsw.Connection] = attrs.field(factory=weakref.WeakSet)
    # Guards only the list of reader connections: never the writer's lock, which a sync holds for long.
    _readers_lock: threading.Lock = attrs.field(factory=threading.Lock)
    listeners: list[Callable[[IndexChange], None]] = attrs.field(factory=list)
    #: The indexer embeds the finer units of each chunk only for a store that keeps them.
    stores_units: bool = True
    #: The indexer reads and chunks only what a transcript appended, with the state this store keeps per transcript.
    stores_tails: bool = True
    _embedder_ids: dict[tuple[str, str, str], int] = attrs.field(factory=dict)
    #: The index id (meta ``index_id``) ``_embedder_ids`` were read for (:meth:`~.writes.FileWrites._embedder_id`).
    _embedder_ids_of: str | None = None
    #: Giving an index without an id one (:meth:`~.meta.MetaRows._claim_index_id`), while it runs.
    _id_claim: threading.Thread | None = None
    #: How many times the file was set aside and opened again (:meth:`recover_damaged`): a thread's read
    #: connection to an earlier file is replaced.
    _opened: int = 0
    #: ``(file id, reason)`` of damage this process found (kept even when the marker cannot be written).
    _damaged_here: tuple[tuple[int, int] | None, str] | None = None
    #: ``(device, inode)`` of the file this store's connections have open; another process that sets the file
    #: aside (:meth:`recover_damaged`) puts a new one at ``path``, which this one then reopens.
    _file: tuple[int, int] | None = None
    #: For an index in a folder this process may not write (read as a file nobody changes: SQLite's immutable
    #: mode, which neither sees another process's commits nor survives its pages moving), the file's
    #: ``(inode, size, mtime_ns)`` as opened: when its owner changes it, every connection is opened again.
    _unchanging: tuple[int, int, int] | None = None
    #: Set by :meth:`_before_fork`: the fork took ``lock`` with no write transaction open.
    _fork_idle: bool = False
    #: In a forked child: the parent's connections (each with whether it may be closed), until the child first
    #: opens one of its own (:meth:`_let_go_inherited`).
    _inherited: list[tuple[apsw.Connection, bool]] = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        forking.track(self)

    def _before_fork(self) -> bool:
        """Wait (at most :data:`FORK_WRITE_WAIT_S`) for a write transaction another thread has open to end, and
        hold ``lock`` through the fork: the child gets the writer between transactions."""
        if not self.lock.acquire(timeout=FORK_WRITE_WAIT_S):
            self._fork_idle = False
            log.warning("forking while a write to the index %s has run for over %.0f s: the child cannot write "
                        "that index", self.path, FORK_WRITE_WAIT_S)
            return False
        try:
            conn = self.conn
            # Held by this thread already (a fork inside a write): the transaction is open.
            self._fork_idle = isinstance(conn, _WriterAfterFork) or bool(conn.getautocommit())
        except apsw.ConnectionClosedError:  # a closed store
            self._fork_idle = True
        except apsw.Error:
            self._fork_idle = False
        return True

    def _after_fork_in_parent(self) -> None:
        self.lock.release()

    def _after_fork_in_child(self) -> None:
        """Forget the parent's connections and locks: the child opens its own connections when it next reads or
        writes (a thread's reader on its first read, the writer through :class:`_WriterAfterFork`)."""
        idle, self._fork_idle = self._fork_idle, False
        inherited = [] if isinstance(self.conn, _WriterAfterFork) else [self.conn]
        self.lock = threading.RLock()
        self._readers_lock = threading.Lock()
        readers, self._readers = list(self._readers), weakref.WeakSet()
        self._local = threading.local()
        self._id_claim = None
        self._opened += 1
        self.conn = _WriterAfterFork(self)  # type: ignore[assignment]
        # Let go of at the child's first use of the index, not here: SQLite calls in an at-fork hook would run in
        # every child, one that never uses its memory too (a multiprocessing worker), and a SQLite mutex a parent
        # thread held at the fork would hang it there.
        self._inherited = [*self._inherited, *((conn, idle) for conn in inherited), *((conn, True) for conn in readers)]
        for conn in inherited:
            if not idle:  # never closed, not even when the child exits without using the index (forking.keep)
                forking.keep(conn)

    def _let_go_inherited(self) -> None:
        """In a forked child, before it opens a connection of its own: close the parent's (:func:`_let_go`)."""
        inherited, self._inherited = self._inherited, []
        for conn, idle in inherited:
            if not idle:
                log.warning("this process was forked inside a write to the index %s (a write of the forking thread's "
                            "own, or one of another thread still running after the fork waited %.0f s for it): "
                            "SQLite takes the parent's open transaction for this process's, so this child's writes "
                            "to it fail ('database is locked'); its searches answer", self.path, FORK_WRITE_WAIT_S)
            _let_go(conn, idle=idle)

    def _own_writer(self) -> apsw.Connection:
        """The writer connection, opened by this process (a forked child's first use of it)."""
        with self.lock:
            if isinstance(self.conn, _WriterAfterFork):
                self._let_go_inherited()
                self._connect()
                dims = self.vector_dims()
                self.vec_dims = dims if dims and self.vec.available and self.vector_wanted else None
            return self.conn

    def reader(self) -> apsw.Connection:
        """This thread's read connection (opened on first use)."""
        if self._unchanging is not None and self._unchanging != (now := _signature(self.path)) and now is not None:
            self.reopen()
        conn = getattr(self._local, "conn", None)
        if conn is None or self._opened and getattr(self._local, "opened", 0) != self._opened:
            if self._inherited:  # a forked child's first read
                with self.lock:
                    self._let_go_inherited()
            self._local.opened = self._opened
            conn = open_db(self.path)
            # The query planner stability guarantee: a statement's plan never depends on the values bound to it.
            # Without it SQLite compiled FTS5's internal term lookup (segid = ? AND term <= ?) again for every term
            # of every keyword query, and a search's own MATCH statement with it (about 20 us a term; a third of
            # a term lookup's CPU). The plans are the same: no index has statistics (no ANALYZE), no statement
            # binds a LIKE pattern, no index is partial.
            conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)
            if self.vec.available:
                load_vec_extension(conn, self.extension_path)
            self._local.conn = conn
            with self._readers_lock:
                self._readers.add(conn)
        return conn

    @contextlib.contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """Every read of this thread's connection inside sees one snapshot of the index (one read transaction, from
        its first read on), so that what ``status`` counts and what it compares the files on disk with cannot come
        from either side of another process's commit. Inside one already, it adds nothing. A write never waits for
        it (WAL); a checkpoint stops at it until it ends, as at a search's."""
        conn = self.reader()
        if not conn.getautocommit():
            yield
            return
        conn.execute("BEGIN")
        try:
            yield
        finally:
            # The connection may have been closed meanwhile (the index file replaced: :meth:`reopen`).
            with contextlib.suppress(apsw.Error):
                if not conn.getautocommit():
                    conn.execute("COMMIT")

    def searching(self) -> apsw.Connection:
        """This thread's read connection, with the page cache of a searching one (:data:`SEARCH_CACHE_KIB`).

        Only threads that search get it: one that reads every vector once (the scan copy's load) keeps
        SQLite's default, which it would fill with pages it never reads again.
        """
        conn = self.reader()
        if getattr(self._local, "search_cache", None) is not conn:
            conn.execute(f"PRAGMA cache_size=-{SEARCH_CACHE_KIB}")
            self._local.search_cache = conn
        return conn

    @classmethod
    def open(cls, path: Path, *, vector_enabled: bool = True, extension_path: str | None = None) -> IndexStore:
        """Open the index at ``path``; a file found damaged on the way (its meta or schema pages) is set aside
        and an empty one opened in its place, as :func:`~.db.open_index_db` does with one that is no database."""
        before = file_id(path)
        try:
            return cls._open(path, vector_enabled=vector_enabled, extension_path=extension_path)
        except (apsw.CorruptError, apsw.NotADBError) as exc:
            set_aside(path, exc, expect=before)  # unless another process opening it did so already
            return cls._open(path, vector_enabled=vector_enabled, extension_path=extension_path)

    @classmethod
    def _open(cls, path: Path, *, vector_enabled: bool, extension_path: str | None) -> IndexStore:
        try:
            fresh = not os.path.getsize(path) and not os.path.exists(f"{path}-wal")
        except OSError:
            fresh = True
        conn = open_index_db(path)
        opened = file_id(path)
        if fresh:
            # A new file is not damaged: a marker left beside it names a file removed by hand, whose inode number
            # the new one may well have been given.
            with contextlib.suppress(OSError):
                path.with_name(path.name + DAMAGED_SUFFIX).unlink()
        store: IndexStore | None = None
        try:
            remove_stale_builds(path)
            vec = load_vec_extension(conn, extension_path) if vector_enabled else VecExtension(False, None, None)
            fts_error = create_schema(conn)
            store = cls(path=path, conn=conn, vec=vec, fts_error=fts_error, vector_wanted=vector_enabled,
                        extension_path=extension_path, file=opened)
            if vec.available:
                drop_old_vec_table(conn)
            compact_after_migration(conn)
            if conn.readonly("main") and not may_write(path.parent):
                store._unchanging = _signature(path)
            if conn.execute("SELECT 1 FROM meta WHERE key = 'index_id'").fetchone() is None:
                # Built by a release from before index ids: given one on a thread of its own, which waits for
                # another process's write without holding up this open (searches meanwhile key its caches apart at
                # each look).
                store._claim_index_id()
            dims = store.vector_dims()
        except BaseException:
            if store is not None:
                store.close()
            else:
                conn.close()
            raise
        if dims and vec.available and vector_enabled:
            store.vec_dims = dims
        return store

    def reopen(self) -> None:
        """Open every connection again on the file now at ``path`` (an index this process may only read, which
        its owner changed)."""
        with self.lock:
            self._close_connections()
            self._connect()
            self._damaged_here = None  # what a read found in the file read before is no longer known
            dims = self.vector_dims()
            self.vec_dims = dims if dims and self.vec.available and self.vector_wanted else None

    def _close_connections(self) -> None:
        with self._readers_lock:
            readers = list(self._readers)
            self._readers.clear()
        for conn in readers:
            try:
                conn.close()
            except apsw.ThreadingViolationError:
                pass  # in use by a search right now; closed when that thread lets go of it
        if not isinstance(self.conn, _WriterAfterFork):  # a forked child that never wrote opened none
            self.conn.close()

    def _connect(self) -> None:
        self.conn = open_index_db(self.path)
        self._file = self._file_id()
        if self._unchanging is not None:
            self._unchanging = _signature(self.path)
        if self.vec.available:
            self.vec = load_vec_extension(self.conn, self.extension_path)
        self.fts_error = create_schema(self.conn)
        self.vec_dims = None
        self._embedder_ids.clear()
        self._opened += 1

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        """One write transaction on the writer connection, under ``lock``.

        ``BEGIN IMMEDIATE`` takes SQLite's write lock up front, waiting up to the busy timeout: a
        deferred transaction that read first fails at once with "database is locked" when another
        process committed meanwhile. A lock still held after the timeout (several processes
        syncing) is retried with backoff before the error reaches the sync.
        """
        with self.lock:
            for attempt in range(LOCK_RETRIES + 1):
                try:
                    self.conn.execute("BEGIN IMMEDIATE")
                    break
                except apsw.ReadOnlyError as exc:
                    raise self.read_only_error(exc) from exc
                except apsw.BusyError:
                    if attempt == LOCK_RETRIES:
                        raise
                    import random  # only a writer that waits for the lock needs it (not a one-shot `status`)

                    delay = LOCK_RETRY_BASE_S * 2 ** attempt * random.uniform(0.75, 1.25)
                    log.info("index %s is locked by another writer; retry %d/%d in %.1f s", self.path.name,
                             attempt + 1, LOCK_RETRIES, delay)
                    time.sleep(delay)
            try:
                yield
                self.conn.execute("COMMIT")
            except BaseException as exc:
                if not self.conn.getautocommit():  # SQLite may have rolled back already
                    self.conn.execute("ROLLBACK")
                if isinstance(exc, apsw.ReadOnlyError):
                    raise self.read_only_error(exc) from exc
                raise

    def schema_older(self) -> bool:
        """Whether the index is now at an older schema than this release's (``schema_version``): a release from
        before it opened the file and rebuilt it at its own since this process opened it. :meth:`reopen` brings
        it up again in place, as an open does."""
        try:
            row = self._read("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except apsw.SQLError:
            return False
        return row is not None and str(row[0]).isdigit() and int(row[0]) < SCHEMA_VERSION

    def read_only(self) -> bool:
        """Whether this process may only read the index (a read-only file, or a folder it may not write)."""
        with self.lock:  # the writer connection: the id-giving thread may be using it
            return bool(self.conn.readonly("main"))

    def writable_again(self) -> bool:
        """Whether this process opened the index read-only and may now write it and its folder (their mode or owner
        changed since): SQLite keeps a connection read-only for its life, so only :meth:`reopen` writes it."""
        if not self.read_only():
            return False
        return (os.access(self.path, os.W_OK, effective_ids=os.access in os.supports_effective_ids)
                and may_write(self.path.parent))

    def read_only_error(self, exc: object = None) -> BackendError:
        """The error a write to an index this process may only read fails with."""
        return BackendError(f"the index {self.path} is read-only for this process{f' ({exc})' if exc else ''}: "
                            "nothing can be indexed until the file and its folder are writable (check their "
                            "owner and permissions, or memorySearch.store.path); searches answer from it as it is")

    def _read(self, sql: str, params: Any = ()) -> Any:
        """Run a query on this thread's read connection (rows typed loosely, as SQLite is)."""
        return self.reader().execute(sql, params)

    # ------------------------------------------------------------ damage

    def _marker(self) -> Path:
        return self.path.with_name(self.path.name + DAMAGED_SUFFIX)

    def note_damaged(self, exc: BaseException) -> None:
        """Record that reading this index file hit damage (SQLite's "database disk image is malformed").

        A small file beside the index names the damaged file (device and inode) and the reason: ``status``
        in any process reports it, and the next sync in any process sets the file aside and rebuilds
        (:meth:`recover_damaged`). A file already replaced is never taken for the damaged one:
        the marker names the file this process has open, which another process may have set aside and
        replaced with a healthy one since (then no marker is written).
        """
        damaged = self._file
        if damaged is not None and damaged == self._file_id():
            try:
                marker = self._marker()
                tmp = marker.with_name(f"{marker.name}.{os.getpid()}")
                tmp.write_text(json.dumps({"dev": damaged[0], "ino": damaged[1], "reason": str(exc)}),
                               encoding="utf-8")
                os.replace(tmp, marker)
            except OSError as err:  # a read-only state dir: this process still reports it
                log.info("could not record that index %s is damaged (%s)", self.path, err)
        self._damaged_here = (damaged, str(exc))

    def replaced(self) -> bool:
        """Whether the file at ``path`` is no longer the one this store has open (another process set the
        damaged one aside and opened a fresh one), or one read as unchanging changed: :meth:`reopen` then reads
        the file now in place."""
        now = self._file_id()
        if self._unchanging is not None and self._unchanging != (sig := _signature(self.path)) and sig is not None:
            return True
        return self._file is not None and now is not None and now != self._file

    def _file_id(self) -> tuple[int, int] | None:
        return file_id(self.path)

    def damaged(self) -> str | None:
        """Why the index file now in place is damaged, when a read of it (in any process) found out; else None."""
        here = self._damaged_here
        try:
            raw = json.loads(self._marker().read_text(encoding="utf-8"))
        except (OSError, ValueError):  # no marker: the usual case, one failed open
            raw = None
        if here is None and raw is None:
            return None
        now = self._file_id()
        if here is not None and here[0] == now:
            return here[1]
        if not isinstance(raw, dict) or now is None or (raw.get("dev"), raw.get("ino")) != now:
            return None
        return str(raw.get("reason") or "damaged")

    def check_integrity(self) -> str | None:
        """Read every page of the index file (SQLite's ``quick_check``): None when it is intact, else what is wrong
        (its first problems, one line), recorded as :meth:`note_damaged` records damage a search hit, so that
        ``status`` in any process reports it and the next sync sets the file aside and rebuilds it.

        Damage in pages no search reads (the embedding cache, a file's rows no query matches) stays unseen until
        something reads them: this finds it. It reads the whole file (seconds at 100,000 chunks) on a
        connection of its own, beside searches and syncs.
        """
        try:
            conn = open_db(self.path, readonly=True)
        except (apsw.CorruptError, apsw.NotADBError) as exc:
            problem: str | None = str(exc)
        else:
            try:
                rows = [str(r[0]) for r in conn.execute("PRAGMA quick_check(5)")]
                problem = None if rows == ["ok"] else "; ".join(" ".join(r.split()) for r in rows)
            except (apsw.CorruptError, apsw.NotADBError) as exc:
                problem = str(exc)
            finally:
                conn.close()
        if problem is not None:
            self.note_damaged(apsw.CorruptError(problem))
        return problem

    def recover_damaged(self, why: object) -> None:
        """Set the damaged index file aside (kept as ``<path>.unreadable-<time>``) and open an empty one in its
        place; the caller rebuilds it from the memory files. Every thread's next read uses the new file.

        Only the damaged file is moved: the one this store has open, or the one a marker names. When another
        process set it aside first, the file now in place (perhaps its rebuild in progress) is left where it
        is and this store reopens onto it.
        """
        with self.lock:
            now = self._file_id()
            try:
                raw = json.loads(self._marker().read_text(encoding="utf-8"))
                marked = (raw.get("dev"), raw.get("ino")) if isinstance(raw, dict) else None
            except (OSError, ValueError):
                marked = None
            # The file in place is the damaged one when it is this store's own, or a marker names it.
            damaged = now if now is not None and (now == self._file or marked == now) else self._file
            if now is not None and now == damaged and self.read_only():
                # It cannot be moved from here (a read-only folder or mount): keep answering from it as it is.
                raise self.read_only_error(f"damaged: {why}")
            self._close_connections()
            failed: OSError | None = None
            try:
                moved = set_aside(self.path, why, expect=damaged)
            except OSError as err:  # still in place: reopen it, so that status and searches go on answering
                failed, moved = err, None
            if moved is not None:
                with contextlib.suppress(OSError):
                    self._marker().unlink()
                self._damaged_here = None
            self._connect()
            if failed is not None:
                raise BackendError(f"the index {self.path} is damaged ({why}) and could not be set aside ({failed}); "
                                   "move it away by hand and run `symi-memory index`") from failed

    def close(self) -> None:
        with self.lock:
            self._close_connections()

