"""Meta values, the index generation, and the file rows as read back (listings, counts, mtimes)."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

import apsw

from .db import BUSY_TIMEOUT_MS, new_index_id
from .parts import StoreParts
from .records import FileRow

__all__ = ["NO_GENERATION", "Generation", "MetaRows", "generation_key"]

#: What a running process's per-generation caches (candidate rows, term counts, document frequencies, rare
#: terms' postings, the scan copy) are kept for: ``(index id, generation)``. The generation numbers the
#: writes to one index; the id (meta ``index_id``, random, written when the index is created) tells indexes
#: apart, so an index numbered from 1 again (an older release's rebuild, a fresh index in place of an
#: unreadable file) never reaches a key cached for another one's text.
Generation = tuple[str, int]
#: A key no index state has: what a cache holds before its first fill.
NO_GENERATION: Generation = ("", -1)
log = logging.getLogger("symi_memory.index")

# Giving an index without an id one (MetaRows._write_index_id): each try waits this long for SQLite's write lock
# holding the store's writer lock, then waits without it (doubling from the pause below) before the next.
_CLAIM_BUSY_MS = 50
_CLAIM_TRIES = 6
_CLAIM_PAUSE_S = 0.25

# An index without an id (rebuilt by a release from before ids) gets another key at every look: its caches
# then last only while nothing commits, until this version's next open or write gives it an id.
_unnamed = itertools.count(1)


def generation_key(index_id: Any, generation: Any) -> Generation:
    """The cache key of the index state with meta ``index_id`` (None when absent) and ``generation``."""
    return (str(index_id) if index_id is not None else f"unnamed-{next(_unnamed)}", int(generation or 0))


#: apsw hands out SQLite's data version of a connection without a statement (``Connection.data_version``).
_DATA_VERSION = hasattr(apsw.Connection, "data_version")

class MetaRows(StoreParts):
    """Meta key/values and the ``files`` table, read side (plus ``set_meta``)."""

    def get_meta(self, key: str) -> str | None:
        row = self._read("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.write():
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def claim_meta(self, key: str, value: str) -> str:
        """Record ``value`` under ``key`` unless a value is already there; return the value in force.

        One write transaction, so of two processes claiming at once exactly one wins. A value already there is
        read without writing: every open claims the workspace, and it must neither wait for another process's
        write nor fail on an index the process may only read (a read-only file or folder).
        """
        with self.lock:  # the writer connection: the id-giving thread may be using it
            kept = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        if kept is not None:
            return str(kept[0])
        with self.write():
            self.conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (key, value))
            row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        assert row is not None  # inserted or already there, inside this transaction
        return str(row[0])

    def claim_bound_meta(self, key: str, bind_key: str, value: str, *,
                         wait_ms: int = _CLAIM_BUSY_MS) -> tuple[str, str] | None:
        """A value under meta ``key`` that belongs to this index, claimed without waiting on another process's write.

        ``(value in force, index id)``: the value is bound to the index id it was claimed for (meta ``bind_key``),
        read or written in one transaction with the id, so a value that outlived its index (an index rebuilt in
        place under another id) is never taken for the new one's. A value there without a binding (written before
        values were bound) is the index's own as read with its id. Otherwise ``value`` is recorded, bound to the
        index id (given one if it has none), in one ``BEGIN IMMEDIATE`` transaction that waits at most ``wait_ms``
        for SQLite's write lock: of two processes claiming at once exactly one value wins. None when the write lock
        is held (another process's long write) or the index may only be read: the caller claims again later.
        """
        import apsw

        got = dict(self._read("SELECT key, value FROM meta WHERE key IN (?, ?, 'index_id')", (key, bind_key)).fetchall())
        index_id, kept, bound = got.get("index_id"), got.get(key), got.get(bind_key)
        if index_id is not None and kept is not None and bound in (None, index_id):
            return str(kept), str(index_id)
        with self.lock:
            conn = self.conn
            conn.set_busy_timeout(wait_ms)
            try:
                conn.execute("BEGIN IMMEDIATE")
            except (apsw.BusyError, apsw.ReadOnlyError) as exc:
                log.info("not claiming meta %s now (%s): claimed later", key, exc)
                return None
            finally:
                conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            try:
                got = {str(k): v for k, v in conn.execute("SELECT key, value FROM meta WHERE key IN (?, ?, 'index_id')",
                                                            (key, bind_key)).fetchall()}
                index_id, kept, bound = got.get("index_id"), got.get(key), got.get(bind_key)
                if index_id is None:
                    index_id = new_index_id()
                    conn.execute("INSERT INTO meta(key, value) VALUES ('index_id', ?)", (index_id,))
                if kept is not None and bound in (None, index_id):
                    value = kept
                if bound != index_id or kept != value:
                    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))
                    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (bind_key, index_id))
                conn.execute("COMMIT")
            except apsw.ReadOnlyError as exc:
                if not conn.getautocommit():
                    conn.execute("ROLLBACK")
                log.info("not claiming meta %s (%s)", key, exc)
                return None
            except BaseException:
                if not conn.getautocommit():
                    conn.execute("ROLLBACK")
                raise
        return str(value), str(index_id)

    def generation(self) -> int:
        """The index generation as this thread's reading connection sees it (:meth:`search_epoch`'s, read again
        only after another connection committed). Caches key on :meth:`generation_key`, never on this alone."""
        return self.search_epoch()[0][1]

    def generation_key(self) -> Generation:
        """``(index id, generation)`` as :meth:`generation` reads it: what per-generation caches are kept for."""
        return self.search_epoch()[0]

    def search_epoch(self) -> tuple[Generation, int]:
        """``(generation key, touches)`` in one read: what a search's caches of chunk rows are kept for.

        ``touches`` counts the files whose mtime :meth:`touch_file` updated (same content, no new generation).
        """
        return self.search_state()[0]

    def search_state(self) -> tuple[tuple[Generation, int], str | None]:
        """:meth:`search_epoch`, and the ``identity`` meta value (``get_meta("identity")``: which provider and model
        built the vectors) of the same read: a search asks for both, and reading the data version once serves both.
        """
        conn = self.reader()
        # SQLite's data version of this connection changes whenever another connection (of this process or any
        # other: the writer, another agent host's sync) committed to the database since it last looked: while it
        # stays the same, so does the epoch this connection read (the statement costs half the meta read).
        version = self._read("PRAGMA data_version").fetchone()[0]  # this connection's (reader() is per thread)
        # What the statement just read, as the connection's pager counts it (:meth:`moved` compares it with later).
        seen = conn.data_version() if _DATA_VERSION else None
        kept = getattr(self._local, "epoch", None)
        if kept is not None and kept[0] is conn and kept[1] == version:
            self._local.mark = (conn, seen, kept[2][0][0])
            return kept[2]  # type: ignore[no-any-return]
        got = dict(self._read("SELECT key, value FROM meta WHERE key IN ('generation', 'touches', 'identity', "
                              "'index_id')").fetchall())
        if got.get("index_id") is None:
            self._claim_index_id()
        state = ((generation_key(got.get("index_id"), got.get("generation")), int(got.get("touches") or 0)),
                 got.get("identity"))
        self._local.epoch = (conn, version, state)
        self._local.mark = (conn, seen, state[0][0])
        return state

    def moved(self, generation: Generation) -> bool:
        """Whether a read of this thread's connection since it read ``generation`` (:meth:`search_state`) may have
        read another index generation: the generation read again (:meth:`generation_key`, a statement) unless
        this thread's last look found ``generation`` and no read since read a later commit.

        SQLite's count of the changes its connection has seen (``sqlite3_file_control``'s data version: no
        statement) moves only when a read of this connection begins on a database another connection committed
        to since the one before it: while it stands where the last look left it, every read since was of the
        snapshot that look read. Reads between an earlier look at ``generation`` and that one were of it too, as
        a generation key is never seen again once the index moved past it. A search compares the generation its
        rows and term counts were read at with the one it began with this way, instead of a statement each time.
        """
        mark: tuple[apsw.Connection, int | None, Generation] | None = getattr(self._local, "mark", None)
        if mark is not None and mark[1] is not None and mark[2] == generation:
            conn = mark[0]
            if conn is getattr(self._local, "conn", None) and conn.data_version() == mark[1]:
                return False
        return self.generation_key() != generation

    def _claim_index_id(self) -> None:
        """Give an index without an id (a release from before ids rebuilt it while this process ran) one, on a
        thread of its own: a search never writes. Until it lands each look gives the index another key, so
        nothing kept per generation (the scan copy, faiss's index) would stay current for long."""
        claim = self._id_claim
        if claim is not None and claim.is_alive():
            return

        def run() -> None:
            try:
                self._write_index_id()
            except Exception as exc:  # apsw.Error: locked past the retries, a read-only file, a closed store
                log.info("could not give the index an id yet (%s)", exc)

        self._id_claim = claim = threading.Thread(target=run, daemon=True, name="symi-index-id")
        claim.start()

    def _write_index_id(self) -> None:
        """Write a new ``index_id`` unless the index has one, holding the writer's ``lock`` only while SQLite's
        write lock is free: another process's long write (an older release's sync) would otherwise keep this
        process's syncs and its close waiting for as long as :meth:`write`'s retries (about a minute). Waits for
        that write between tries, without the lock; after the last, the next look after a commit tries again."""
        import apsw

        for attempt in range(_CLAIM_TRIES):
            with self.lock:
                self.conn.set_busy_timeout(_CLAIM_BUSY_MS)
                try:
                    self.conn.execute("BEGIN IMMEDIATE")
                except apsw.BusyError:
                    if attempt == _CLAIM_TRIES - 1:
                        raise
                    busy = True
                else:
                    busy = False
                    try:
                        self.conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('index_id', ?)",
                                          (new_index_id(),))
                        self.conn.execute("COMMIT")
                    except BaseException:
                        if not self.conn.getautocommit():
                            self.conn.execute("ROLLBACK")
                        raise
                finally:
                    self.conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            if not busy:
                return
            time.sleep(_CLAIM_PAUSE_S * 2 ** attempt)

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

    def index_id_now(self) -> str | None:
        """The index id (meta ``index_id``) as the writer connection sees it (inside ``lock``)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key='index_id'").fetchone()
        return str(row[0]) if row else None

    def file_mtimes(self, paths: Iterable[str]) -> dict[str, float]:
        """Modification times of the given indexed files."""
        wanted = list(paths)
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        return dict(self._read(f"SELECT path, mtime FROM files WHERE path IN ({marks})", wanted).fetchall())
