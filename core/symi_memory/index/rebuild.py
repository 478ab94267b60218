"""The full rebuild: fill a locked build file, then swap every row in one short transaction."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path

import apsw

from .db import FTS_SCHEMA, VOCAB_SCHEMA, fts_current, new_index_id
from .fts_segments import PENDING_META, merge_after_write
from .parts import StoreParts
from .records import ChunkRow, FileRow, IndexChange

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["BUILD_SCHEMA", "Rebuild", "build_running", "remove_stale_builds"]

log = logging.getLogger("symi_memory.index")


BUILD_SCHEMA = """
CREATE TABLE files (path TEXT PRIMARY KEY, source TEXT, hash TEXT, mtime REAL, size INTEGER, chunks INTEGER,
                    bad_utf8 INTEGER, lines INTEGER);
CREATE TABLE chunks (rowid INTEGER PRIMARY KEY, id TEXT UNIQUE, path TEXT, source TEXT, start_line INTEGER,
                     end_line INTEGER, hash TEXT, text TEXT, cjk TEXT, embedding BLOB, lines BLOB);
CREATE TABLE units (chunk_id TEXT, start_line INTEGER, end_line INTEGER, hash TEXT, embedding BLOB);
"""


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
    import tempfile  # only a rebuild needs it; opening the index (a one-shot `status`) does not

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


def build_running(index: Path) -> bool:
    """Whether a live rebuild of ``index`` (this process or another) holds a build file now.

    A shared lock, taken without waiting and let go at once, fails only on a file a live builder holds;
    a build file nobody holds (a killed builder's leftover) does not count. Without flock (Windows)
    nothing can tell, so never.
    """
    if fcntl is None:
        return False
    for build in index.parent.glob(index.name + ".build-*"):
        try:
            fd = os.open(build, os.O_RDONLY)
        except OSError:
            continue  # swapped in and deleted meanwhile
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)  # lets the probe's lock go
    return False


class Rebuild(StoreParts):
    """``build_full``: the rebuild swap."""

    def build_running(self) -> bool:
        """Whether a live rebuild of this index holds its build file now (:func:`build_running`)."""
        return build_running(self.path)

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
                self._notify(IndexChange(generation=self.generation_now(), full=True, index_id=self.index_id_now()))
        finally:
            build.unlink(missing_ok=True)
            os.close(fd)
        return written

    def _fill_build(self, build: Path, files: Iterable[tuple[FileRow, list[ChunkRow]]]) -> int:
        from ..supersession import line_analysis
        from .keyword import cjk_bigrams

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
                kept = self._kept_analyses(self.reader(), frow.path)  # the live index's (see there)
                for c in chunks:
                    conn.execute(
                        "INSERT OR IGNORE INTO chunks(id, path, source, start_line, end_line, hash, text, cjk, embedding, "
                        "lines) VALUES (?,?,?,?,?,?,?,?,?,?)",
                        (c.id, c.path, c.source, c.start_line, c.end_line, c.hash, c.text, cjk_bigrams(c.text),
                         c.embedding, kept.get((c.start_line, c.text)) or line_analysis(c.path, c.start_line, c.text)),
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
        c.execute("INSERT INTO chunks(rowid, id, path, source, start_line, end_line, hash, text, vector, lines) "
                  "SELECT b.rowid, b.id, b.path, b.source, b.start_line, b.end_line, b.hash, b.text, v.id, b.lines "
                  "FROM build.chunks b LEFT JOIN embedding_cache v "
                  "ON b.embedding IS NOT NULL AND v.embedder = ? AND v.hash = b.hash", (embedder,))
        if embedder is not None:
            # Unit (line) vectors: stored once in the cache like chunk vectors, mapped to their chunk.
            c.execute("INSERT INTO embedding_cache(embedder, hash, embedding, used_at) "
                      "SELECT ?, hash, embedding, ? FROM build.units WHERE true "
                      "ON CONFLICT(embedder, hash) DO UPDATE SET used_at = excluded.used_at", (embedder, time.time()))
            c.execute("INSERT OR IGNORE INTO chunk_units(chunk, start_line, end_line, vector) "
                      "SELECT b.rowid, u.start_line, u.end_line, v.id FROM build.units u "
                      "JOIN build.chunks b ON b.id = u.chunk_id AND b.embedding IS NOT NULL "
                      "JOIN embedding_cache v ON v.embedder = ? AND v.hash = u.hash", (embedder,))
        if self.fts_error is None:
            c.execute("INSERT INTO chunks_fts(rowid, text, cjk) SELECT rowid, text, cjk FROM build.chunks")
            # Every chunk written again: the keyword index in one segment (fts_segments), counted from here.
            c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, '0')", (PENDING_META,))
            merge_after_write(c, int((c.execute("SELECT COUNT(*) FROM chunks").fetchone() or (0,))[0]))
        row = c.execute("SELECT length(embedding) / 4 FROM build.chunks WHERE embedding IS NOT NULL LIMIT 1").fetchone()
        if row and embedder is not None:
            self._note_dims(int(row[0]))  # type: ignore[arg-type]
        c.execute("DELETE FROM skipped")
        c.executemany("INSERT INTO skipped(path, reason) VALUES (?, ?)", list(skipped.items()))
        for k, v in meta.items():
            c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (k, v))
        c.execute("INSERT INTO meta(key, value) VALUES ('generation', '1') "
                  "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1")
        c.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('index_id', ?)", (new_index_id(),))
