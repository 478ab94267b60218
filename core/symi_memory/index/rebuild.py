"""The full rebuild: fill a locked build file, then swap every row in one short transaction."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import apsw

from .. import forking
from .db import FTS_SCHEMA, VOCAB_SCHEMA, fts_current, new_index_id, sqlite_name
from .fts_segments import PENDING_META, merge_after_write
from .parts import StoreParts
from .records import ChunkRow, FileRow, IndexChange

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["BUILD_SCHEMA", "BuildInfo", "Rebuild", "build_running", "describe_build", "remove_stale_builds",
           "running_build"]

log = logging.getLogger("symi_memory.index")


BUILD_SCHEMA = """
CREATE TABLE files (path TEXT PRIMARY KEY, source TEXT, hash TEXT, mtime REAL, size INTEGER, chunks INTEGER,
                    bad_utf8 INTEGER, lines INTEGER);
CREATE TABLE chunks (rowid INTEGER PRIMARY KEY, id TEXT UNIQUE, path TEXT, source TEXT, start_line INTEGER,
                     end_line INTEGER, hash TEXT, text TEXT, cjk TEXT, embedding BLOB, lines BLOB,
                     plain INTEGER);
CREATE TABLE units (chunk_id TEXT, start_line INTEGER, end_line INTEGER, hash TEXT, embedding BLOB);
CREATE TABLE tails (path TEXT PRIMARY KEY, state TEXT);
"""


#: The names of the build files this process's rebuilds hold now (``BuildInfo.this_process``): a pid alone could be another
#: container's process sharing the folder.
_OWN_BUILDS: set[str] = set()
#: Every descriptor of a build file this process has open (a rebuild's locked one, a probe's or a clean-up's), each
#: opened and recorded in one step that a fork waits for: a forked child closes its copies of them all, or they
#: would keep a build file the parent left (killed) locked for as long as the child lives, and every sync would
#: wait for it. A fork between creating a rebuild's build file and recording it left the child such a copy.
_BUILD_FDS = forking.Descriptors()


def _forget_builds_after_fork() -> None:
    """In a forked child: the parent's builds are another process's (a sync here waits for them naming the
    parent); :data:`_BUILD_FDS` closes the child's copies of their descriptors."""
    _OWN_BUILDS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_builds_after_fork)


class BuildInfo(NamedTuple):
    """A live full build of an index, as its build file tells it (:func:`running_build`)."""

    path: Path  #: the build file, ``<index>.build-<pid>-<start>-XXXX``
    pid: int | None  #: the builder's process id as it saw it (None: named by a release from before pids)
    started_at: float | None  #: when the build started (Unix time), else None
    size: int  #: bytes the build file holds so far (it grows as the build writes its rows)
    this_process: bool = False  #: whether this process is the builder
    #: the process ``pid`` names here has not got the build file open: the builder runs in another pid namespace
    #: (a container sharing the folder) or on another host, and ``pid`` is no process to stop from here
    elsewhere: bool = False


def _build_prefix(index: Path) -> str:
    return index.name + ".build-"


def _build_files(index: Path) -> Iterator[os.DirEntry[str]]:
    """The ``<index>.build-*`` files beside ``index`` (a folder listing: no glob, so no pattern in the name counts)."""
    prefix = _build_prefix(index)
    try:
        with os.scandir(index.parent) as it:
            found = [e for e in it if e.name.startswith(prefix)]
    except OSError:
        return iter(())
    return iter(found)


def _parse_build_name(index: Path, name: str) -> tuple[int | None, float | None]:
    """``(pid, start time)`` from a build file's name; ``(None, None)`` for a name without them."""
    parts = name[len(_build_prefix(index)):].split("-")
    if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
        return int(parts[0]), float(parts[1])
    return None, None


def _pid_elsewhere(pid: int, build: os.stat_result) -> bool:
    """Whether process ``pid``, as this process sees pids, is not the one holding ``build`` open: no such process
    here, or one without it among its open files. False where that cannot be told (no /proc, another user's)."""
    if pid == os.getpid():
        return True  # not this process's build (those are in _OWN_BUILDS), so another namespace's pid
    return forking.process_has_open(pid, build) is False


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
    """Create ``<index>.build-<pid>-<start>-XXXX`` and lock it; returns the open, locked descriptor and the path.

    The name carries the builder's pid and start time (whole seconds) for ``status`` and for a sync that waits
    for this build (:func:`running_build`); the lock is what tells a live build from a leftover.
    """
    import tempfile  # only a rebuild needs it; opening the index (a one-shot `status`) does not

    while True:
        with _BUILD_FDS.opening() as record:  # created and recorded in one step: a fork never comes in between
            fd, name = tempfile.mkstemp(prefix=f"{_build_prefix(index)}{os.getpid()}-{int(time.time())}-",
                                        dir=index.parent)
            record(fd)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)  # outside the guard: a clean-up's lock may hold it a moment
            if os.stat(name).st_ino == os.fstat(fd).st_ino:
                return fd, Path(name)
        except FileNotFoundError:
            pass
        except BaseException:
            _BUILD_FDS.close(fd)
            raise
        _BUILD_FDS.close(fd)  # an open took it for a leftover between mkstemp and flock: make another


def remove_stale_builds(index: Path) -> int:
    """Delete the build files of rebuilds whose process is gone (killed mid-reindex); returns bytes freed.

    A live builder holds a lock on its build file; a file nobody holds is a leftover. Without
    flock (Windows) only files older than a day are taken, which no live rebuild can be.
    """
    freed = 0
    cutoff = time.time() - 86_400
    for entry in _build_files(index):
        leftover = Path(entry.path)
        try:
            with _BUILD_FDS.opening() as record:
                fd = record(os.open(leftover, os.O_RDWR))
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
            _BUILD_FDS.close(fd)
    if freed:
        log.info("removed %d bytes of build files left by an interrupted reindex", freed)
    return freed


def running_build(index: Path) -> BuildInfo | None:
    """The live full build of ``index`` (this process's or another's) that started first, or None.

    A live builder holds an exclusive lock on its build file for as long as it lives; a shared lock, taken
    without waiting and let go at once, fails only on such a file. A build file nobody holds (a killed
    builder's leftover: the kernel let its lock go with the process) does not count. Without flock (Windows)
    nothing can tell, so never.
    """
    if fcntl is None:
        return None
    live: list[BuildInfo] = []
    for entry in _build_files(index):
        try:
            with _BUILD_FDS.opening() as record:
                fd = record(os.open(entry.path, os.O_RDONLY))
        except OSError:
            continue  # swapped in and deleted meanwhile
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            pid, started = _parse_build_name(index, entry.name)
            mine = entry.name in _OWN_BUILDS
            try:
                st = os.fstat(fd)
            except OSError:
                st = None
            elsewhere = pid is not None and not mine and st is not None and _pid_elsewhere(pid, st)
            live.append(BuildInfo(Path(entry.path), pid, started, st.st_size if st else 0, mine, elsewhere))
        finally:
            _BUILD_FDS.close(fd)  # lets the probe's lock go
    if not live:
        return None
    return min(live, key=lambda b: (b.started_at is None, b.started_at or 0.0))


def describe_build(build: BuildInfo) -> str:
    """One phrase naming a live build for a person: its process, when it started, its build file and size."""
    who = "this process" if build.this_process else (
        f"pid {build.pid}" if build.pid is not None else "a process from an older release")
    if build.elsewhere:
        who += f" in another container or on another host (no process {build.pid} here has its build file open)"
    parts = [who]
    if build.started_at is not None:
        ago = max(0, int(time.time() - build.started_at))
        parts.append(f"started {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(build.started_at))}, "
                     f"{ago} s ago")
    parts.append(f"build file {build.path.name}, {build.size / 1e6:.1f} MB so far")
    return "; ".join(parts)


def build_running(index: Path) -> bool:
    """Whether a live rebuild of ``index`` (this process or another) holds a build file now (:func:`running_build`)."""
    return running_build(index) is not None


class Rebuild(StoreParts):
    """``build_full``: the rebuild swap."""

    def build_running(self) -> bool:
        """Whether a live rebuild of this index holds its build file now (:func:`build_running`)."""
        return build_running(self.path)

    def running_build(self) -> BuildInfo | None:
        """The live rebuild of this index that started first, if any (:func:`running_build`)."""
        return running_build(self.path)

    def remove_stale_builds(self) -> int:
        """Delete the build files killed rebuilds of this index left (:func:`remove_stale_builds`)."""
        return remove_stale_builds(self.path)

    def build_full(
        self,
        files: Iterable[tuple[FileRow, list[ChunkRow]]],
        *,
        skipped: dict[str, str],
        meta: dict[str, str],
    ) -> int:
        """Rebuild the whole index: build it in a temporary database, then swap it in atomically.

        The slow part (reading, chunking, embedding: whatever produces
        ``files``) fills ``<index>.build-<pid>-<start>-XXXX`` without touching the index, so
        readers and other writers are never held up by it. One short
        transaction then replaces every row. A crash or error at any point
        leaves the previous index untouched and searchable.
        """
        # A unique name per rebuild: two processes rebuilding at once each swap in a complete index.
        # The builder holds a lock on its file for as long as it lives, so an open can tell a
        # live build from one a killed process left (remove_stale_builds).
        fd, build = _locked_build_file(self.path)
        _OWN_BUILDS.add(build.name)
        try:
            written = self._fill_build(build, files)
            with self.lock:
                saved_dims = self.vec_dims
                # A URI only when the path is not UTF-8: then the store's connection was opened by URI too.
                self.conn.execute("ATTACH DATABASE ? AS build", (sqlite_name(build)[0],))
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
            _OWN_BUILDS.discard(build.name)
            build.unlink(missing_ok=True)
            _BUILD_FDS.close(fd)
        return written

    def _fill_build(self, build: Path, files: Iterable[tuple[FileRow, list[ChunkRow]]]) -> int:
        from ..supersession import line_analysis, plain_fact
        from .keyword import cjk_bigrams

        name, uri = sqlite_name(build)
        conn = apsw.Connection(name, flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE | uri)
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
                conn.execute("DELETE FROM tails WHERE path = ?", (frow.path,))
                if frow.tail is not None:
                    conn.execute("INSERT INTO tails VALUES (?, ?)", (frow.path, frow.tail))
                kept = self._kept_analyses(self.reader(), frow.path)  # the live index's (see there)
                for c in chunks:
                    conn.execute(
                        "INSERT OR IGNORE INTO chunks(id, path, source, start_line, end_line, hash, text, cjk, embedding, "
                        "lines, plain) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                        (c.id, c.path, c.source, c.start_line, c.end_line, c.hash, c.text, cjk_bigrams(c.text),
                         c.embedding, kept.get((c.start_line, c.text)) or line_analysis(c.path, c.start_line, c.text),
                         plain_fact(c.text)),
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
        c.execute("DELETE FROM transcript_tails")
        c.execute("INSERT INTO transcript_tails(path, state) SELECT path, state FROM build.tails")
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
        c.execute("INSERT INTO chunks(rowid, id, path, source, start_line, end_line, hash, text, vector, lines, plain) "
                  "SELECT b.rowid, b.id, b.path, b.source, b.start_line, b.end_line, b.hash, b.text, v.id, b.lines, "
                  "b.plain "
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
