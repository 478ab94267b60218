"""Rows of the index: files, chunks, FTS, vectors (sqlite-vec), cache, meta."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import apsw
import attrs

from . import analysis
from .db import (
    FTS_SCHEMA,
    VOCAB_SCHEMA,
    VecExtension,
    compact_after_migration,
    create_schema,
    drop_old_vec_table,
    fts_current,
    load_vec_extension,
    open_db,
    open_index_db,
)
from .keyword import cjk_bigrams, match_tokens, query_tokens

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["ChunkRow", "FileRow", "IndexChange", "IndexStore", "UnitRow", "VectorSnapshot", "pack_vector"]

log = logging.getLogger("symi_memory.index")


BUILD_SCHEMA = """
CREATE TABLE files (path TEXT PRIMARY KEY, source TEXT, hash TEXT, mtime REAL, size INTEGER, chunks INTEGER,
                    bad_utf8 INTEGER, lines INTEGER);
CREATE TABLE chunks (rowid INTEGER PRIMARY KEY, id TEXT UNIQUE, path TEXT, source TEXT, start_line INTEGER,
                     end_line INTEGER, hash TEXT, text TEXT, cjk TEXT, embedding BLOB);
CREATE TABLE units (chunk_id TEXT, start_line INTEGER, end_line INTEGER, hash TEXT, embedding BLOB);
"""


# Write transactions that still find the index locked after the busy timeout are retried this often.
LOCK_RETRIES = 4
LOCK_RETRY_BASE_S = 0.5

# Below this many chunks, ranking every match is cheap and BM25's IDF is too coarse to prune by.
PRUNE_MIN_CHUNKS = 50


def _try_lock(fd: int) -> bool:
    """Take an exclusive lock on ``fd`` without waiting; True if taken (always, where flock is missing)."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False


def _locked_build_file(index: Path) -> tuple[int, Path]:
    """Create ``<index>.build-XXXX`` and lock it; returns the open, locked descriptor and the path."""
    while True:
        fd, name = tempfile.mkstemp(prefix=index.name + ".build-", dir=index.parent)
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.stat(name).st_ino == os.fstat(fd).st_ino:
                return fd, Path(name)
        except FileNotFoundError:
            pass
        os.close(fd)  # an open took it for a leftover between mkstemp and flock: make another


def remove_stale_builds(index: Path) -> int:
    """Delete the build files of rebuilds whose process is gone (killed mid-reindex); returns bytes freed.

    A live builder holds a lock on its build file; a file nobody holds is a leftover. Without
    flock (Windows) only files older than a day are taken, which no live rebuild can be.
    """
    freed = 0
    cutoff = time.time() - 86_400
    for leftover in index.parent.glob(index.name + ".build-*"):
        try:
            fd = os.open(leftover, os.O_RDWR)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if (fcntl is None and st.st_mtime >= cutoff) or not _try_lock(fd):
                continue
            if os.stat(leftover).st_ino == st.st_ino:
                leftover.unlink()
                freed += st.st_size
        except OSError:
            pass
        finally:
            os.close(fd)
    if freed:
        log.info("removed %d bytes of build files left by an interrupted reindex", freed)
    return freed


def pack_vector(vec: Sequence[float]) -> bytes:
    import array

    return array.array("f", vec).tobytes()


@attrs.frozen(kw_only=True)
class FileRow:
    path: str
    source: str
    hash: str
    mtime: float
    size: int
    chunks: int = 0
    bad_utf8: int = 0
    lines: int = 0


@attrs.frozen(kw_only=True)
class UnitRow:
    """A finer unit of a chunk (a line), with its own vector: ``start_line``/``end_line`` in the file."""

    start_line: int
    end_line: int
    hash: str
    embedding: bytes


@attrs.frozen(kw_only=True)
class ChunkRow:
    id: str
    path: str
    source: str
    start_line: int
    end_line: int
    hash: str
    text: str
    embedding: bytes | None = None
    units: tuple[UnitRow, ...] = ()


@attrs.frozen(kw_only=True)
class IndexChange:
    """One committed write, as seen by ``IndexStore.listeners``.

    ``full``: every row was replaced (``added`` is then empty; re-read the
    index). Otherwise ``removed`` rowids are gone and ``added`` holds the new
    ``(rowid, embedding)`` pairs; a rowid may appear in both (SQLite reuses
    the highest rowid after a delete).
    """

    generation: int
    full: bool
    removed: tuple[int, ...] = ()
    added: tuple[tuple[int, bytes], ...] = ()


@attrs.frozen
class VectorSnapshot:
    """Every chunk vector of one width, read in one transaction (a consistent view of the index).

    ``rowids`` (int64) and ``matrix`` (float32, one row per chunk, as stored: not normalised) are
    numpy arrays, ordered by rowid; ``dims`` is 0 when the index holds no vector.
    """

    generation: int
    dims: int
    rowids: Any
    matrix: Any


@attrs.define
class IndexStore:
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
    _embedder_ids: dict[tuple[str, str, str], int] = attrs.field(factory=dict)

    def reader(self) -> apsw.Connection:
        """This thread's read connection (opened on first use)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = open_db(self.path)
            if self.vec.available:
                load_vec_extension(conn, self.extension_path)
            self._local.conn = conn
            with self._readers_lock:
                self._readers.add(conn)
        return conn

    @classmethod
    def open(cls, path: Path, *, vector_enabled: bool = True, extension_path: str | None = None) -> IndexStore:
        conn = open_index_db(path)
        remove_stale_builds(path)
        vec = load_vec_extension(conn, extension_path) if vector_enabled else VecExtension(False, None, None)
        fts_error = create_schema(conn)
        store = cls(
            path=path, conn=conn, vec=vec, fts_error=fts_error, vector_wanted=vector_enabled, extension_path=extension_path
        )
        if vec.available:
            drop_old_vec_table(conn)
        compact_after_migration(conn)
        dims = store.vector_dims()
        if dims and vec.available and vector_enabled:
            store.vec_dims = dims
        return store

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
                except apsw.BusyError:
                    if attempt == LOCK_RETRIES:
                        raise
                    delay = LOCK_RETRY_BASE_S * 2 ** attempt * random.uniform(0.75, 1.25)
                    log.info("index %s is locked by another writer; retry %d/%d in %.1f s", self.path.name,
                             attempt + 1, LOCK_RETRIES, delay)
                    time.sleep(delay)
            try:
                yield
                self.conn.execute("COMMIT")
            except BaseException:
                if not self.conn.getautocommit():  # SQLite may have rolled back already
                    self.conn.execute("ROLLBACK")
                raise

    def _read(self, sql: str, params: Any = ()) -> Any:
        """Run a query on this thread's read connection (rows typed loosely, as SQLite is)."""
        return self.reader().execute(sql, params)

    # ------------------------------------------------------------------ meta

    def get_meta(self, key: str) -> str | None:
        row = self._read("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.write():
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def generation(self) -> int:
        return int(self.get_meta("generation") or 0)

    # ----------------------------------------------------------------- files

    def files(self) -> dict[str, FileRow]:
        rows = self._read(
            "SELECT path, source, hash, mtime, size, chunks, bad_utf8, lines FROM files"
        ).fetchall()
        return {
            r[0]: FileRow(path=r[0], source=r[1], hash=r[2], mtime=r[3], size=r[4], chunks=r[5], bad_utf8=r[6], lines=r[7])
            for r in rows
        }

    def counts(self) -> dict[str, Any]:
        files = self._read("SELECT source, COUNT(*), SUM(chunks), SUM(bad_utf8 > 0) FROM files GROUP BY source").fetchall()
        chunks = self._read("SELECT COUNT(*) FROM chunks").fetchone()[0]
        cache = self._read("SELECT COUNT(*) FROM embedding_cache").fetchone()[0]
        units = self._read("SELECT COUNT(*) FROM chunk_units").fetchone()[0]
        skipped = self._read("SELECT path, reason FROM skipped ORDER BY path").fetchall()
        return {
            "files": sum(r[1] for r in files),
            "chunks": chunks,
            "sourceCounts": {r[0]: {"files": r[1], "chunks": r[2] or 0} for r in files},
            "invalidUtf8Files": sum(r[3] or 0 for r in files),
            "cacheEntries": cache,
            "unitVectors": units,
            "skipped": [{"path": p, "reason": why} for p, why in skipped],
        }

    # ------------------------------------------------------------- mutation

    def _note_dims(self, dims: int) -> None:
        """sqlite-vec can answer KNN over vectors of this width (the first vector written sets it)."""
        if self.vec.available and self.vector_wanted and self.vec_dims is None:
            self.vec_dims = dims

    def _embedder(self, meta: dict[str, str] | None) -> int | None:
        """The ``embedders`` id of the identity being written (``meta``), else the stored one; writer only."""
        raw = (meta or {}).get("identity")
        if raw is None:
            row = self.conn.execute("SELECT value FROM meta WHERE key='identity'").fetchone()
            raw = row[0] if row else None
        try:
            ident = json.loads(raw) if raw else None
        except ValueError:
            ident = None
        if not isinstance(ident, dict) or ident.get("provider") in (None, "none"):
            return None
        return self._embedder_id(str(ident["provider"]), str(ident.get("model") or ""),
                                 str(ident.get("fingerprint") or ""))

    def _embedder_id(self, provider: str, model: str, fingerprint: str, *, create: bool = True) -> int | None:
        key = (provider, model, fingerprint)
        cached = self._embedder_ids.get(key)
        if cached is not None:
            return cached
        conn = self.conn if create else self.reader()
        if create:
            conn.execute("INSERT OR IGNORE INTO embedders(provider, model, fingerprint) VALUES (?,?,?)", key)
        row = conn.execute("SELECT id FROM embedders WHERE provider=? AND model=? AND fingerprint=?", key).fetchone()
        if row is None:
            return None
        self._embedder_ids[key] = int(row[0])  # forgotten when a write rolls back (_forget_uncommitted)
        return int(row[0])

    def _forget_uncommitted(self, saved_dims: int | None) -> None:
        """After a rolled-back write: what it created (the vector width, embedder ids) is gone too."""
        self.vec_dims = saved_dims
        self._embedder_ids.clear()

    def replace_files(
        self,
        files: Iterable[tuple[FileRow, list[ChunkRow]]],
        *,
        remove: Iterable[str] = (),
        skipped: dict[str, str] | None = None,
        meta: dict[str, str] | None = None,
    ) -> int:
        """Write new rows for files (dropping their old rows) in one transaction."""
        removed: list[int] = []
        added: list[tuple[int, bytes]] = []
        with self.lock:
            saved_dims = self.vec_dims
            try:
                with self.write():
                    written = self._replace(files, remove, skipped, meta, removed, added)
            except BaseException:
                self._forget_uncommitted(saved_dims)
                raise
            self._notify(IndexChange(generation=self.generation_now(), full=False, removed=tuple(removed),
                                     added=tuple(added)))
        return written

    def _notify(self, change: IndexChange) -> None:
        for listener in list(self.listeners):
            try:
                listener(change)
            except Exception:  # a vector side's bookkeeping must never fail a sync
                log.exception("index change listener failed")

    def build_full(
        self,
        files: Iterable[tuple[FileRow, list[ChunkRow]]],
        *,
        skipped: dict[str, str],
        meta: dict[str, str],
    ) -> int:
        """Rebuild the whole index: build it in a temporary database, then swap it in atomically.

        The slow part (reading, chunking, embedding: whatever produces
        ``files``) fills ``<index>.build`` without touching the index, so
        readers and other writers are never held up by it. One short
        transaction then replaces every row. A crash or error at any point
        leaves the previous index untouched and searchable.
        """
        # A unique name per rebuild: two processes rebuilding at once each swap in a complete index.
        # The builder holds a lock on its file for as long as it lives, so an open can tell a
        # live build from one a killed process left (remove_stale_builds).
        fd, build = _locked_build_file(self.path)
        try:
            written = self._fill_build(build, files)
            with self.lock:
                saved_dims = self.vec_dims
                self.conn.execute("ATTACH DATABASE ? AS build", (str(build),))
                try:
                    with self.write():
                        self._swap_from_build(skipped, meta)
                except BaseException:
                    self._forget_uncommitted(saved_dims)
                    raise
                finally:
                    self.conn.execute("DETACH DATABASE build")
                self._notify(IndexChange(generation=self.generation_now(), full=True))
        finally:
            build.unlink(missing_ok=True)
            os.close(fd)
        return written

    def _fill_build(self, build: Path, files: Iterable[tuple[FileRow, list[ChunkRow]]]) -> int:
        conn = apsw.Connection(str(build))
        try:
            # A throwaway file: no journal, no fsync; it is deleted after the swap or on the next rebuild.
            conn.execute("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF")
            conn.execute(BUILD_SCHEMA)
            written = 0
            conn.execute("BEGIN")
            for frow, chunks in files:
                conn.execute(
                    "INSERT OR REPLACE INTO files VALUES (?,?,?,?,?,?,?,?)",
                    (frow.path, frow.source, frow.hash, frow.mtime, frow.size, len(chunks), frow.bad_utf8, frow.lines),
                )
                for c in chunks:
                    conn.execute(
                        "INSERT OR IGNORE INTO chunks(id, path, source, start_line, end_line, hash, text, cjk, embedding) "
                        "VALUES (?,?,?,?,?,?,?,?,?)",
                        (c.id, c.path, c.source, c.start_line, c.end_line, c.hash, c.text, cjk_bigrams(c.text),
                         c.embedding),
                    )
                    if c.units and conn.changes():
                        conn.executemany("INSERT INTO units VALUES (?,?,?,?,?)",
                                         [(c.id, u.start_line, u.end_line, u.hash, u.embedding) for u in c.units])
                    written += 1
                if written and written % 5000 < len(chunks):
                    conn.execute("COMMIT")
                    conn.execute("BEGIN")
            conn.execute("COMMIT")
            return written
        finally:
            conn.close()

    def _swap_from_build(self, skipped: dict[str, str], meta: dict[str, str]) -> None:
        c = self.conn
        c.execute("DELETE FROM files")
        c.execute("DELETE FROM chunks")
        c.execute("DELETE FROM chunk_units")
        if self.fts_error is None and not fts_current(c):
            # An index migrated from an older schema: its FTS table has the old tokenizer.
            c.execute("DROP TABLE IF EXISTS chunks_vocab")
            c.execute("DROP TABLE IF EXISTS chunks_fts")
            c.execute(FTS_SCHEMA)
            c.execute(VOCAB_SCHEMA)
        elif self.fts_error is None:
            c.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('delete-all')")
        self.vec_dims = None
        c.execute("INSERT INTO files(path, source, hash, mtime, size, chunks, bad_utf8, lines) "
                  "SELECT path, source, hash, mtime, size, chunks, bad_utf8, lines FROM build.files")
        # Each vector is stored once, in embedding_cache (most are there already: the sync cached them
        # as it embedded); a chunk refers to its vector by id.
        embedder = self._embedder(meta)
        if embedder is not None:
            c.execute("INSERT INTO embedding_cache(embedder, hash, embedding, used_at) "
                      "SELECT ?, hash, embedding, ? FROM build.chunks WHERE embedding IS NOT NULL "
                      "ON CONFLICT(embedder, hash) DO UPDATE SET used_at = excluded.used_at", (embedder, time.time()))
        c.execute("INSERT INTO chunks(rowid, id, path, source, start_line, end_line, hash, text, vector) "
                  "SELECT b.rowid, b.id, b.path, b.source, b.start_line, b.end_line, b.hash, b.text, v.id "
                  "FROM build.chunks b LEFT JOIN embedding_cache v "
                  "ON b.embedding IS NOT NULL AND v.embedder = ? AND v.hash = b.hash", (embedder,))
        if embedder is not None:
            c.execute("INSERT INTO embedding_cache(embedder, hash, embedding, used_at) "
                      "SELECT ?, hash, embedding, ? FROM build.units WHERE true "
                      "ON CONFLICT(embedder, hash) DO UPDATE SET used_at = excluded.used_at", (embedder, time.time()))
            c.execute("INSERT OR IGNORE INTO chunk_units(chunk, start_line, end_line, vector) "
                      "SELECT b.rowid, u.start_line, u.end_line, v.id FROM build.units u "
                      "JOIN build.chunks b ON b.id = u.chunk_id AND b.embedding IS NOT NULL "
                      "JOIN embedding_cache v ON v.embedder = ? AND v.hash = u.hash", (embedder,))
        if self.fts_error is None:
            c.execute("INSERT INTO chunks_fts(rowid, text, cjk) SELECT rowid, text, cjk FROM build.chunks")
        row = c.execute("SELECT length(embedding) / 4 FROM build.chunks WHERE embedding IS NOT NULL LIMIT 1").fetchone()
        if row and embedder is not None:
            self._note_dims(int(row[0]))  # type: ignore[arg-type]
        c.execute("DELETE FROM skipped")
        c.executemany("INSERT INTO skipped(path, reason) VALUES (?, ?)", list(skipped.items()))
        for k, v in meta.items():
            c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (k, v))
        c.execute("INSERT INTO meta(key, value) VALUES ('generation', '1') "
                  "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1")

    def pending_count(self) -> int:
        """Files indexed for keyword search only, still waiting for their vectors."""
        return int(self._read("SELECT COUNT(*) FROM files WHERE hash LIKE 'pending:%'").fetchone()[0])

    def file_rows(self) -> list[dict[str, Any]]:
        """Every indexed file: path, source, chunk count, mtime, size, and whether it still waits for vectors."""
        rows = self._read("SELECT path, source, chunks, mtime, size, hash LIKE 'pending:%' FROM files "
                          "ORDER BY path").fetchall()
        return [{"path": r[0], "source": r[1], "chunks": r[2], "mtime": r[3], "size": r[4], "pending": bool(r[5])}
                for r in rows]

    def skipped_map(self) -> dict[str, str]:
        return dict(self._read("SELECT path, reason FROM skipped").fetchall())

    def generation_now(self) -> int:
        """The generation as the writer connection sees it (inside ``lock``)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key='generation'").fetchone()
        return int(row[0]) if row else 0

    def _replace(self, files: Iterable[tuple[FileRow, list[ChunkRow]]], remove: Iterable[str],
                 skipped: dict[str, str] | None, meta: dict[str, str] | None,
                 removed: list[int], added: list[tuple[int, bytes]]) -> int:
        written = 0
        embedder = self._embedder(meta)
        for path in remove:
            removed += self._delete_path(path)
        for frow, chunks in files:
            removed += self._delete_path(frow.path)
            self.conn.execute(
                "INSERT INTO files(path, source, hash, mtime, size, chunks, bad_utf8, lines) VALUES (?,?,?,?,?,?,?,?)",
                (frow.path, frow.source, frow.hash, frow.mtime, frow.size, len(chunks), frow.bad_utf8, frow.lines),
            )
            for c in chunks:
                rowid = self._insert_chunk(c, embedder)
                if c.embedding is not None and self.listeners:
                    added.append((rowid, c.embedding))
                written += 1
        if skipped is not None:
            self.conn.execute("DELETE FROM skipped")
            self.conn.executemany("INSERT INTO skipped(path, reason) VALUES (?, ?)", list(skipped.items()))
        for k, v in (meta or {}).items():
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (k, v))
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES ('generation', '1') "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )
        return written

    def _delete_path(self, path: str) -> list[int]:
        rowids = [r[0] for r in self.conn.execute("SELECT rowid FROM chunks WHERE path=?", (path,))]
        if rowids:
            marks = ",".join("?" * len(rowids))
            if self.fts_error is None:
                self.conn.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({marks})", rowids)
            self.conn.execute(f"DELETE FROM chunk_units WHERE chunk IN ({marks})", rowids)
            self.conn.execute("DELETE FROM chunks WHERE path=?", (path,))
        self.conn.execute("DELETE FROM files WHERE path=?", (path,))
        return rowids

    def _insert_chunk(self, c: ChunkRow, embedder: int | None) -> int:
        vector = None
        if c.embedding is not None and embedder is not None:
            vector = self.conn.execute(
                "INSERT INTO embedding_cache(embedder, hash, embedding, used_at) VALUES (?,?,?,?) "
                "ON CONFLICT(embedder, hash) DO UPDATE SET used_at = excluded.used_at RETURNING id",
                (embedder, c.hash, c.embedding, time.time()),
            ).fetchone()[0]  # type: ignore[index]
            self._note_dims(len(c.embedding) // 4)
        self.conn.execute(
            "INSERT OR REPLACE INTO chunks(id, path, source, start_line, end_line, hash, text, vector) "
            "VALUES (?,?,?,?,?,?,?,?)",
            (c.id, c.path, c.source, c.start_line, c.end_line, c.hash, c.text, vector),
        )
        rowid = self.conn.last_insert_rowid()
        if vector is not None and embedder is not None and c.units:
            now = time.time()
            for u in c.units:
                self._cache_vector(embedder, u.hash, u.embedding, now)
            self.conn.executemany(
                "INSERT OR IGNORE INTO chunk_units(chunk, start_line, end_line, vector) VALUES (?, ?, ?, "
                "(SELECT id FROM embedding_cache WHERE embedder = ? AND hash = ?))",
                [(rowid, u.start_line, u.end_line, embedder, u.hash) for u in c.units],
            )
        if self.fts_error is None:
            self.conn.execute("INSERT INTO chunks_fts(rowid, text, cjk) VALUES (?, ?, ?)", (rowid, c.text, cjk_bigrams(c.text)))
        return rowid

    def _cache_vector(self, embedder: int, text_hash: str, blob: bytes, now: float) -> None:
        """Store one vector in the cache (refreshing its use time if there); writer only."""
        self.conn.execute(
            "INSERT INTO embedding_cache(embedder, hash, embedding, used_at) VALUES (?,?,?,?) "
            "ON CONFLICT(embedder, hash) DO UPDATE SET used_at = excluded.used_at",
            (embedder, text_hash, blob, now),
        )

    # ---------------------------------------------------------------- cache

    def cache_get(self, provider: str, model: str, fingerprint: str, hashes: Sequence[str]) -> dict[str, bytes]:
        """Stored vectors of these text hashes by this provider (the index's own vectors included)."""
        out: dict[str, bytes] = {}
        with self.lock:
            embedder = self._embedder_id(provider, model, fingerprint, create=False)
            if embedder is None:
                return out
            for i in range(0, len(hashes), 500):
                part = list(hashes[i : i + 500])
                marks = ",".join("?" * len(part))
                for h, blob in self.conn.execute(
                    f"SELECT hash, embedding FROM embedding_cache WHERE embedder=? AND hash IN ({marks})",
                    (embedder, *part),
                ):
                    out[h] = blob
            if out:
                now = time.time()
                with self.write():
                    self.conn.executemany("UPDATE embedding_cache SET used_at=? WHERE embedder=? AND hash=?",
                                          [(now, embedder, h) for h in out])
        return out

    def cache_put(self, provider: str, model: str, fingerprint: str, items: dict[str, bytes]) -> None:
        now = time.time()
        with self.lock:
            saved = self.vec_dims
            try:
                with self.write():
                    embedder = self._embedder_id(provider, model, fingerprint)
                    self.conn.executemany(
                        "INSERT INTO embedding_cache(embedder, hash, embedding, used_at) VALUES (?,?,?,?) "
                        "ON CONFLICT(embedder, hash) DO UPDATE SET embedding = excluded.embedding, used_at = excluded.used_at",
                        [(embedder, h, b, now) for h, b in items.items()],
                    )
            except BaseException:
                self._forget_uncommitted(saved)
                raise

    def cache_prune(self, max_entries: int) -> int:
        """Drop the least recently used vectors beyond ``max_entries`` that no chunk refers to.

        The index's own vectors live in the cache (one copy each), so they are never pruned:
        ``max_entries`` bounds what is kept beyond them, for text that may come back.
        """
        with self.write():
            n = int(self.conn.execute("SELECT COUNT(*) FROM embedding_cache").fetchone()[0])  # type: ignore[index]
            if n <= max_entries:
                return 0
            used = int(self.conn.execute(  # type: ignore[index]
                "SELECT COUNT(*) FROM (SELECT vector FROM chunks WHERE vector IS NOT NULL "
                "UNION SELECT vector FROM chunk_units)").fetchone()[0])
            extra = min(n - max_entries, n - used)
            if extra <= 0:
                return 0
            self.conn.execute(
                "DELETE FROM embedding_cache WHERE id IN (SELECT id FROM embedding_cache e WHERE NOT EXISTS "
                "(SELECT 1 FROM chunks WHERE vector = e.id) AND NOT EXISTS "
                "(SELECT 1 FROM chunk_units WHERE vector = e.id) ORDER BY used_at LIMIT ?)",
                (extra,),
            )
        return extra

    # --------------------------------------------------------------- search

    def keyword_search(self, query: str, limit: int) -> list[tuple[int, float]]:
        """``(rowid, bm25 rank)`` best first (more negative is better), all sources.

        Only the query's content words are matched (stop words and question
        words left out); FTS5 stems them as it stemmed the chunks. The rank
        only picks keyword candidates: their score comes from
        :func:`analysis.keyword_evidence`.
        """
        if self.fts_error is not None:
            return []
        words = analysis.content_words(query_tokens(query))
        match = match_tokens(self._weighty_tokens(words))
        if match is None:
            return []
        try:
            rows = self._read("SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?",
                              (match, limit)).fetchall()
        except apsw.SQLError as exc:
            log.warning("keyword query failed (%s); query was %r", exc, query)
            return []
        return [(rowid, float(rank)) for rowid, rank in rows]

    def term_weights(self, terms: list[str]) -> dict[str, float]:
        """IDF of each index term in this index (absent terms weigh the most)."""
        if not terms:
            return {}
        n = self._chunk_count()
        df: dict[str, int] = {}
        if self.fts_error is None:
            try:
                marks = ",".join("?" * len(terms))
                df = dict(self._read(f"SELECT term, doc FROM chunks_vocab WHERE term IN ({marks})", terms).fetchall())
            except apsw.SQLError:
                df = {}
        return {t: analysis.idf(int(df.get(t, 0)), n) for t in terms}

    def _weighty_tokens(self, tokens: list[str]) -> list[str]:
        """Leave out tokens found in more than half of the chunks.

        FTS5's BM25 gives such a term an IDF of 1e-6, so it cannot change the
        ranking, but matching it makes FTS5 rank nearly every chunk: leaving
        it out keeps keyword search fast on a large index. If every token is
        that common, the rarest one stays.
        """
        if len(tokens) < 2 or self._chunk_count() < PRUNE_MIN_CHUNKS:
            return tokens
        try:
            stems = {t: analysis.stem(t) for t in tokens}
            terms = sorted(set(stems.values()))
            marks = ",".join("?" * len(terms))
            df = dict(self._read(f"SELECT term, doc FROM chunks_vocab WHERE term IN ({marks})", terms).fetchall())
        except apsw.SQLError:
            return tokens
        half = self._chunk_count() / 2
        kept = [t for t in tokens if df.get(stems[t], 0) <= half]
        present = [t for t in tokens if df.get(stems[t], 0) > 0]
        if present and not any(df.get(stems[t], 0) > 0 for t in kept):
            # Never leave only absent words: keep the rarest word that occurs.
            kept.append(min(present, key=lambda t: df[stems[t]]))
        return kept

    def _chunk_count(self) -> int:
        gen = self.generation()
        cached = getattr(self._local, "count", None)
        if cached is None or cached[0] != gen:
            cached = (gen, int(self._read("SELECT COUNT(*) FROM chunks").fetchone()[0]))
            self._local.count = cached
        return cached[1]

    def vec_knn(self, query: bytes, k: int, unit_weight: float = 0.0) -> list[tuple[int, float]]:
        """Exact KNN inside SQLite (sqlite-vec's ``vec_distance_cosine`` over the stored vectors): ``(rowid, cosine)``.

        The in-database answer for small indexes and while a scan matrix loads; it reads the one
        stored copy of each vector (no second copy in a ``vec0`` table). With ``unit_weight`` the
        score is :func:`combine_unit` of the chunk's cosine and its best unit's.
        """
        if not self.vec_dims or len(query) != self.vec_dims * 4:
            return []
        if unit_weight <= 0.0:
            rows = self._read(
                "SELECT c.rowid, 1.0 - vec_distance_cosine(v.embedding, ?) AS s FROM chunks c JOIN embedding_cache v "
                "ON v.id = c.vector WHERE length(v.embedding) = ? ORDER BY s DESC LIMIT ?",
                (query, len(query), k),
            ).fetchall()
        else:
            rows = self._read(
                "WITH s(r, u, cs) AS (SELECT c.rowid, 0, 1.0 - vec_distance_cosine(v.embedding, :q) FROM chunks c "
                "JOIN embedding_cache v ON v.id = c.vector WHERE length(v.embedding) = :n "
                "UNION ALL SELECT u.chunk, 1, 1.0 - vec_distance_cosine(v.embedding, :q) FROM chunk_units u "
                "JOIN embedding_cache v ON v.id = u.vector WHERE length(v.embedding) = :n) "
                "SELECT r, (1.0 - :w) * MAX(CASE WHEN u = 0 THEN cs END) + :w * MAX(cs) AS score FROM s GROUP BY r "
                "HAVING MAX(CASE WHEN u = 0 THEN cs END) IS NOT NULL ORDER BY score DESC LIMIT :k",
                {"q": query, "n": len(query), "w": float(unit_weight), "k": k},
            ).fetchall()
        return [(rowid, float(score)) for rowid, score in rows]

    def unit_vectors_by_rowid(self, rowids: Sequence[int]) -> dict[int, list[bytes]]:
        """The unit vectors (packed float32) of these chunk rowids; chunks without units are left out."""
        out: dict[int, list[bytes]] = {}
        for i in range(0, len(rowids), 500):
            part = list(rowids[i : i + 500])
            marks = ",".join("?" * len(part))
            for rowid, blob in self._read(
                f"SELECT u.chunk, v.embedding FROM chunk_units u JOIN embedding_cache v ON v.id = u.vector "
                f"WHERE u.chunk IN ({marks})", part,
            ):
                out.setdefault(rowid, []).append(blob)
        return out

    def best_units(self, rowids: Sequence[int]) -> dict[int, list[tuple[int, int, bytes]]]:
        """``(start_line, end_line, vector)`` of each unit of these chunk rowids (for a hit's best line)."""
        out: dict[int, list[tuple[int, int, bytes]]] = {}
        for i in range(0, len(rowids), 500):
            part = list(rowids[i : i + 500])
            marks = ",".join("?" * len(part))
            for rowid, start, end, blob in self._read(
                f"SELECT u.chunk, u.start_line, u.end_line, v.embedding FROM chunk_units u "
                f"JOIN embedding_cache v ON v.id = u.vector WHERE u.chunk IN ({marks})", part,
            ):
                out.setdefault(rowid, []).append((start, end, blob))
        return out

    def unit_count(self) -> int:
        """How many unit vectors the index holds (of chunks that have a vector)."""
        return int(self._read("SELECT COUNT(*) FROM chunk_units").fetchone()[0])

    def iter_scan_rows(self, with_units: bool) -> Iterator[tuple[int, bool, bytes]]:
        """``(chunk rowid, is_unit, blob)``: each chunk's vector, then its units' (``with_units``), by rowid.

        Two cursors of this thread's connection (one read transaction while both are open), merged in
        rowid order, so nothing is sorted or held in SQLite.
        """
        chunks = self._read("SELECT c.rowid, v.embedding FROM chunks c JOIN embedding_cache v ON v.id = c.vector "
                            "ORDER BY c.rowid")
        if not with_units:
            for rowid, blob in chunks:
                yield rowid, False, blob
            return
        units = self.reader().cursor().execute(
            "SELECT u.chunk, v.embedding FROM chunk_units u JOIN embedding_cache v ON v.id = u.vector "
            "ORDER BY u.chunk, u.start_line, u.end_line")
        pending = next(units, None)
        for rowid, blob in chunks:
            yield rowid, False, blob
            while pending is not None and pending[0] < rowid:
                pending = next(units, None)  # units of a chunk without a vector
            while pending is not None and pending[0] == rowid:
                yield rowid, True, pending[1]
                pending = next(units, None)

    def chunk_rows(self, rowids: Sequence[int], *, vectors: bool = True,
                   ) -> dict[int, tuple[str, str, str, int, int, str, bytes | None]]:
        """rowid -> (id, path, source, start, end, text, embedding); embedding None unless ``vectors``."""
        out: dict[int, Any] = {}
        for i in range(0, len(rowids), 500):
            part = list(rowids[i : i + 500])
            marks = ",".join("?" * len(part))
            blob = "v.embedding" if vectors else "NULL"
            join = "LEFT JOIN embedding_cache v ON v.id = c.vector " if vectors else ""
            for row in self._read(
                f"SELECT c.rowid, c.id, c.path, c.source, c.start_line, c.end_line, c.text, {blob} FROM chunks c "
                f"{join}WHERE c.rowid IN ({marks})",
                part,
            ):
                out[row[0]] = row[1:]
        return out

    def vectors_by_id(self, ids: Sequence[str]) -> dict[str, bytes]:
        """Stored embeddings (packed float32) of the chunks with these ``Candidate.id`` values; chunks without one are left out."""
        out: dict[str, bytes] = {}
        for i in range(0, len(ids), 500):
            part = list(ids[i : i + 500])
            marks = ",".join("?" * len(part))
            for cid, blob in self._read(
                f"SELECT c.id, v.embedding FROM chunks c JOIN embedding_cache v ON v.id = c.vector WHERE c.id IN ({marks})",
                part,
            ):
                out[cid] = blob
        return out

    def vectors_by_rowid(self, rowids: Sequence[int]) -> dict[int, bytes]:
        """Stored embeddings (packed float32) of these chunk rowids; chunks without one are left out."""
        out: dict[int, bytes] = {}
        for i in range(0, len(rowids), 500):
            part = list(rowids[i : i + 500])
            marks = ",".join("?" * len(part))
            for rowid, blob in self._read(
                f"SELECT c.rowid, v.embedding FROM chunks c JOIN embedding_cache v ON v.id = c.vector "
                f"WHERE c.rowid IN ({marks})", part,
            ):
                out[rowid] = blob
        return out

    def all_vectors(self) -> tuple[list[int], list[bytes]]:
        rows = list(self.iter_vectors())
        return [r[0] for r in rows], [r[1] for r in rows]

    def vector_count(self) -> int:
        """How many chunks have a stored vector."""
        return int(self._read("SELECT COUNT(vector) FROM chunks").fetchone()[0])

    def vector_dims(self) -> int | None:
        """The width of the index's vectors (of the first chunk that has one), or None."""
        row = self._read("SELECT length(v.embedding) / 4 FROM chunks c JOIN embedding_cache v ON v.id = c.vector "
                         "LIMIT 1").fetchone()
        return int(row[0]) if row else None

    def vector_stats(self, dims: int) -> tuple[int, int]:
        """(count, sum of rowids) of the chunk vectors of this width: a cheap fingerprint of the vector set."""
        row = self._read("SELECT COUNT(*), COALESCE(SUM(c.rowid), 0) FROM chunks c JOIN embedding_cache v "
                         "ON v.id = c.vector WHERE length(v.embedding) = ?", (dims * 4,)).fetchone()
        return int(row[0]), int(row[1])

    def chunk_count(self) -> int:
        """How many chunks the index holds (with or without a vector)."""
        return int(self._read("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def iter_vectors(self) -> Iterator[tuple[int, bytes]]:
        """``(rowid, float32 blob)`` of every chunk with a vector, by rowid, one row at a time.

        Unlike :meth:`all_vectors` it never holds every blob at once, so a caller filling a
        preallocated matrix peaks at the matrix's size.
        """
        yield from self._read("SELECT c.rowid, v.embedding FROM chunks c JOIN embedding_cache v ON v.id = c.vector "
                              "ORDER BY c.rowid")

    def read_vectors(self) -> VectorSnapshot:
        """Generation and every chunk vector (of the first chunk's width) from one read transaction.

        Rows go straight into a preallocated matrix, so the peak is the matrix's size. Rows of
        another width (a half-finished provider switch) cannot be compared and are left out.
        """
        import numpy as np

        conn = self.reader()
        with conn:  # one read transaction: WAL gives a consistent view
            row = conn.execute("SELECT value FROM meta WHERE key='generation'").fetchone()
            generation = int(row[0]) if row else 0
            dims = self.vector_dims() or 0
            n = self.vector_stats(dims)[0] if dims else 0
            rowids = np.empty(n, dtype=np.int64)
            matrix = np.empty((n, dims), dtype=np.float32)
            i = 0
            if dims:
                for rowid, blob in conn.execute(
                    "SELECT c.rowid, v.embedding FROM chunks c JOIN embedding_cache v ON v.id = c.vector "
                    "WHERE length(v.embedding) = ? ORDER BY c.rowid", (dims * 4,)
                ):
                    if i >= n:
                        break
                    rowids[i] = rowid
                    matrix[i] = np.frombuffer(blob, dtype=np.float32)
                    i += 1
        return VectorSnapshot(generation=generation, dims=dims, rowids=rowids[:i], matrix=matrix[:i])

    def file_mtimes(self, paths: Iterable[str]) -> dict[str, float]:
        """Modification times of the given indexed files."""
        wanted = list(paths)
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        return dict(self._read(f"SELECT path, mtime FROM files WHERE path IN ({marks})", wanted).fetchall())

    def close(self) -> None:
        with self.lock:
            with self._readers_lock:
                readers = list(self._readers)
                self._readers.clear()
            for conn in readers:
                try:
                    conn.close()
                except apsw.ThreadingViolationError:
                    pass  # in use by a search right now; closed when that thread lets go of it
            self.conn.close()

    def touch_file(self, path: str, mtime: float, size: int, lines: int) -> None:
        """Record a new mtime/size for a file whose content hash did not change."""
        with self.write():
            self.conn.execute("UPDATE files SET mtime=?, size=?, lines=? WHERE path=?", (mtime, size, lines, path))
