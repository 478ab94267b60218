"""Opening the index database: WAL, busy timeout, sqlite-vec, schema version."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import attrs

__all__ = [
    "FTS_SCHEMA",
    "FTS_TOKENIZER",
    "SCHEMA_VERSION",
    "VOCAB_SCHEMA",
    "VecExtension",
    "compact_after_migration",
    "create_schema",
    "drop_old_vec_table",
    "fts_current",
    "load_vec_extension",
    "meta_values",
    "may_write",
    "migrate_vectors",
    "new_index_id",
    "open_db",
    "file_id",
    "open_index_db",
    "set_aside",
    "sqlite_name",
]

log = logging.getLogger("symi_memory.index")

SCHEMA_VERSION = 8
# Versions whose tables hold a copy of each vector in ``chunks.embedding`` (and ``chunks_vec``): opening
# one moves the vectors into ``embedding_cache`` in place (``migrate_vectors``), keeping every row
# and rowid, so the index stays searchable. Any other version is dropped and rebuilt.
MIGRATES_VECTORS_FROM = {"3", "4"}
# Versions whose tables are this version's minus ``chunk_units``: opening one adds the table and keeps
# every row, so the index stays searchable (chunk vectors only); the next sync sees the index has no
# unit vectors (meta ``units``) and rebuilds it in the background, taking chunk vectors from the cache.
ADDS_UNITS_FROM = {"5"}
# Versions whose chunks lack ``lines`` (each chunk's supersession line analysis, stored when it is
# indexed): opening one adds the column in place, every row kept; a chunk without one is analysed at
# query time (same answers) until the next sync fills the column in (``IndexStore.fill_line_analysis``).
ADDS_LINES_FROM = {"5", "6"}
# Versions whose chunks lack ``plain`` (each chunk's ``supersession.plain_fact``, stored when it is indexed): opening
# one adds the column in place, every row kept; a chunk without one is told at query time (same answers) until the
# next sync fills the column in (``IndexStore.fill_line_analysis`` fills both).
ADDS_PLAIN_FROM = {"5", "6", "7"}
# An FTS table built with another tokenizer (schema 3 had no stemming) stays searchable; the index
# forgets its identity, so the indexer rebuilds it in the background (build_full), which recreates
# the FTS table with this tokenizer.
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
BUSY_TIMEOUT_MS = 10_000
# How long an open that must create or migrate the schema waits for another process's write lock (a migration of
# a large index by another process opening it at the same time takes that long at most), before it fails.
SCHEMA_LOCK_WAIT_S = 300
PAGE_SIZE = 8192

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    hash TEXT NOT NULL,
    mtime REAL NOT NULL,
    size INTEGER NOT NULL,
    chunks INTEGER NOT NULL,
    bad_utf8 INTEGER NOT NULL DEFAULT 0,
    lines INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    path TEXT NOT NULL,
    source TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    hash TEXT NOT NULL,
    text TEXT NOT NULL,
    vector INTEGER,
    lines BLOB,
    plain INTEGER
);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
CREATE INDEX IF NOT EXISTS chunks_vector ON chunks(vector);
CREATE TABLE IF NOT EXISTS embedders (
    id INTEGER PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    UNIQUE (provider, model, fingerprint)
);
CREATE TABLE IF NOT EXISTS embedding_cache (
    id INTEGER PRIMARY KEY,
    embedder INTEGER NOT NULL,
    hash TEXT NOT NULL,
    embedding BLOB NOT NULL,
    used_at REAL NOT NULL,
    UNIQUE (embedder, hash)
);
CREATE INDEX IF NOT EXISTS embedding_cache_used ON embedding_cache(used_at);
-- Vectors of the finer units (lines) of each chunk, stored once in embedding_cache like chunk vectors;
-- a search scores a chunk by its own vector and its best unit's (store.vector.unitWeight).
CREATE TABLE IF NOT EXISTS chunk_units (
    chunk INTEGER NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    vector INTEGER NOT NULL,
    PRIMARY KEY (chunk, start_line, end_line)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS chunk_units_vector ON chunk_units(vector);
CREATE TABLE IF NOT EXISTS skipped (path TEXT PRIMARY KEY, reason TEXT NOT NULL);
-- Where the last sync stopped reading each transcript and how its chunking stood there (the indexer's JSON),
-- written with the transcript's rows: the next sync reads and chunks only what was appended since.
CREATE TABLE IF NOT EXISTS transcript_tails (path TEXT PRIMARY KEY, state TEXT NOT NULL);
"""

FTS_SCHEMA = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5("
    f"text, cjk, content='', contentless_delete=1, tokenize='{FTS_TOKENIZER}')"
)
# Per-term document counts, to leave out query words that carry no BM25 weight.
VOCAB_SCHEMA = "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vocab USING fts5vocab(chunks_fts, 'row')"


@attrs.define
class VecExtension:
    """Whether sqlite-vec loaded, and why not."""

    available: bool = False
    path: str | None = None
    error: str | None = None


def load_vec_extension(conn: apsw.Connection, extension_path: str | None) -> VecExtension:
    """Load sqlite-vec from ``extension_path`` or the ``sqlite-vec`` package."""
    try:
        if extension_path:
            path = os.path.expanduser(extension_path)
        else:
            path = _bundled_vec_path()
        conn.enable_load_extension(True)
        conn.load_extension(path)
        conn.enable_load_extension(False)
        return VecExtension(True, path, None)
    except Exception as exc:  # ImportError, apsw.ExtensionLoadingError, OSError
        reason = f"sqlite-vec could not be loaded ({type(exc).__name__}: {exc}); using exact in-process cosine"
        return VecExtension(False, extension_path, reason)


def _bundled_vec_path() -> str:
    """The ``sqlite-vec`` package's ``vec0`` library, found without importing the package.

    Importing ``sqlite_vec`` pulls in numpy (for its typing helpers), which
    would cost a one-shot CLI command several hundred milliseconds.
    """
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the sqlite-vec package is not installed (pip install sqlite-vec)")
    return os.path.join(next(iter(spec.submodule_search_locations)), "vec0")


def may_write(folder: Path) -> bool:
    """Whether this process (its effective user) may create files in ``folder``."""
    return os.access(folder, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids)


def sqlite_name(path: Path | str, query: str = "") -> tuple[str, int]:
    """``(filename, extra open flags)`` SQLite opens ``path`` by: apsw takes a filename as UTF-8 text, so a path
    holding bytes that are not UTF-8 (``os.fsdecode``'s surrogates) is given as a ``file:`` URI with those bytes
    percent-encoded (``SQLITE_OPEN_URI``). ``query`` (``"immutable=1"``) makes it a URI in any case. A connection
    opened by URI also takes URIs in ``ATTACH``."""
    from urllib.parse import quote

    name = str(path)
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        if not query:
            return name, 0
    return f"file:{quote(os.fsencode(name))}" + (f"?{query}" if query else ""), apsw.SQLITE_OPEN_URI


def open_db(path: Path, *, readonly: bool = False) -> apsw.Connection:
    """Open (creating folders) with WAL and a busy timeout so readers never see 'locked'."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    name, uri = sqlite_name(path)
    conn = apsw.Connection(name, flags=flags | uri)
    if readonly and not may_write(path.parent) and not os.path.exists(f"{path}-wal"):
        # SQLite cannot read a WAL database in a folder where it may not create ``-shm`` unless told the file
        # will not change: with no ``-wal`` beside it, nobody is writing it now.
        conn.close()
        name, uri = sqlite_name(path, "immutable=1")
        conn = apsw.Connection(name, flags=flags | uri)
    try:
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        if not readonly and not os.path.getsize(path):
            # A new file: vectors (1.5 KB at 384-d) fill 8 KB pages to ~96%, 4 KB pages to ~77%.
            conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        if not readonly:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except apsw.ReadOnlyError:
        conn.close()
        if readonly:
            raise
        # A file (or its folder) this process may only read: status and searches read it as it is (opened
        # read-only, SQLite keeps the WAL index in memory when it cannot create ``-shm``); a sync fails with
        # the reason (IndexStore.write).
        log.info("index %s is read-only for this process", path)
        return open_db(path, readonly=True)
    except BaseException:
        conn.close()
        raise
    return conn


def open_index_db(path: Path) -> apsw.Connection:
    """``open_db`` for the index writer; a file that is not a readable database is set aside.

    The index is derived from the Markdown files, so a damaged or foreign file
    is renamed (kept for inspection) and a fresh index is built in its place,
    instead of failing every open with "file is not a database".
    """
    before = file_id(path)
    try:
        return open_db(path)
    except (apsw.NotADBError, apsw.CorruptError) as exc:
        set_aside(path, exc, expect=before)
        return open_db(path)


def file_id(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of the file at ``path`` now, or None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


@contextlib.contextmanager
def _folder_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the index's folder (flock on the folder itself, no file of its own), so that
    of several processes that found the same file damaged only one moves it."""
    try:
        import fcntl
        fd = os.open(path.parent, os.O_RDONLY)
    except (ImportError, OSError):  # Windows, or a folder this process cannot open: no lock to take
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # a file system without locks (some network mounts): move as before, unguarded
            pass
        yield
    finally:
        os.close(fd)


def set_aside(path: Path, why: object, *, expect: tuple[int, int] | None = None) -> str | None:
    """Rename a damaged index file (with its ``-wal`` and ``-shm``) to ``<path>.unreadable-<time>``, kept for
    inspection; the caller opens a fresh one in its place. Returns the new name.

    ``expect`` is the ``(device, inode)`` of the file found damaged: when the file now at ``path`` is
    another one (a process that found the same damage already set it aside and opened a fresh one, which
    may be a rebuild in progress), nothing is moved and None is returned. The check and the move happen
    under a lock on the folder, so two processes never both move.
    """
    with _folder_lock(path):
        if expect is not None and file_id(path) != expect:
            log.info("index %s was already set aside by another process (%s)", path, why)
            return None
        aside = f"{path}.unreadable-{int(time.time())}"
        n = 1
        while any(os.path.lexists(f"{aside}{suffix}") for suffix in ("", "-wal", "-shm")):
            n += 1  # set aside twice within a second: keep the first one too
            aside = f"{path}.unreadable-{int(time.time())}-{n}"
        log.warning("index %s is unreadable (%s); moved it to %s and rebuilding", path, why, aside)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(f"{path}{suffix}"):
                os.replace(f"{path}{suffix}", f"{aside}{suffix}")
        return aside


def _drop_all(conn: apsw.Connection) -> None:
    rows: list[Any] = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    # Virtual tables first: dropping one drops its shadow tables too.
    for name, _sql in sorted(rows, key=lambda r: not (r[1] or "").upper().startswith("CREATE VIRTUAL")):
        conn.execute(f'DROP TABLE IF EXISTS "{name}"')


def _schema_current(conn: apsw.Connection) -> bool:
    """True when every table exists at this schema version (a read; no lock is taken)."""
    have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not {"meta", "files", "chunks", "chunk_units", "embedders", "embedding_cache", "skipped", "chunks_fts",
             "chunks_vocab", "transcript_tails"} <= have:
        return False
    # An index without an id (built by a release from before ids) is current too: the store gives it one off the
    # open (IndexStore.open), as a running process does, so the open never waits for another process's write.
    return meta_values(conn, "schema_version").get("schema_version") == str(SCHEMA_VERSION)


def meta_values(conn: apsw.Connection, *keys: str) -> dict[str, Any]:
    """These meta keys' values, as one read of ``conn`` sees them (absent keys left out)."""
    rows: Any = conn.execute(f"SELECT key, value FROM meta WHERE key IN ({','.join('?' * len(keys))})", keys).fetchall()
    return dict(rows)


def new_index_id() -> str:
    """A random id for a new index (meta ``index_id``): per-generation caches are kept for (id, generation)."""
    return uuid.uuid4().hex


def _int_or_zero(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _has_column(conn: apsw.Connection, table: str, column: str) -> bool:
    return any(r[1] == column for r in conn.execute(f'PRAGMA table_info("{table}")'))


def _identity_embedder(conn: apsw.Connection) -> int | None:
    """The ``embedders`` id of the provider named by the index identity (inserted if new), or None."""
    row = conn.execute("SELECT value FROM meta WHERE key='identity'").fetchone()
    try:
        ident = json.loads(row[0]) if row else None
    except ValueError:
        ident = None
    if not isinstance(ident, dict) or ident.get("provider") in (None, "none"):
        return None
    key = (str(ident.get("provider")), str(ident.get("model") or ""), str(ident.get("fingerprint") or ""))
    conn.execute("INSERT OR IGNORE INTO embedders(provider, model, fingerprint) VALUES (?,?,?)", key)
    found = conn.execute("SELECT id FROM embedders WHERE provider=? AND model=? AND fingerprint=?", key).fetchone()
    return int(found[0])  # type: ignore[index]


def migrate_vectors(conn: apsw.Connection) -> None:
    """Move a schema 3/4 index's vectors into the one-copy layout, inside the caller's transaction.

    Every chunk keeps its rowid (so the FTS rows stay valid) and refers to its vector in
    ``embedding_cache``: the old cache's entries are kept, and each chunk's own copy is added
    under the index identity's provider. The ``chunks_vec`` table (a third copy) is dropped.
    """
    now = time.time()
    conn.execute("INSERT OR IGNORE INTO embedders(provider, model, fingerprint) "
                 "SELECT DISTINCT provider, model, fingerprint FROM embedding_cache_old")
    conn.execute("INSERT OR IGNORE INTO embedding_cache(embedder, hash, embedding, used_at) "
                 "SELECT e.id, o.hash, o.embedding, o.used_at FROM embedding_cache_old o "
                 "JOIN embedders e ON e.provider = o.provider AND e.model = o.model AND e.fingerprint = o.fingerprint")
    embedder = _identity_embedder(conn)
    if embedder is not None:
        conn.execute("INSERT OR IGNORE INTO embedding_cache(embedder, hash, embedding, used_at) "
                     "SELECT ?, hash, embedding, ? FROM chunks_old WHERE embedding IS NOT NULL", (embedder, now))
    conn.execute("INSERT INTO chunks(rowid, id, path, source, start_line, end_line, hash, text, vector) "
                 "SELECT c.rowid, c.id, c.path, c.source, c.start_line, c.end_line, c.hash, c.text, v.id "
                 "FROM chunks_old c LEFT JOIN embedding_cache v ON c.embedding IS NOT NULL AND v.embedder = ? "
                 "AND v.hash = c.hash", (embedder,))
    conn.execute("DROP TABLE chunks_old")
    conn.execute("DROP TABLE embedding_cache_old")
    try:
        conn.execute("DROP TABLE IF EXISTS chunks_vec")
    except apsw.SQLError as exc:  # vec0 not loaded: its rows stay until an open that has it
        log.info("could not drop the old sqlite-vec table yet (%s)", exc)


def compact_after_migration(conn: apsw.Connection) -> None:
    """VACUUM once after a migration: the dropped copies leave the file at its old size otherwise.

    Also moves the file to ``PAGE_SIZE`` pages. Needs the database to itself; when another
    process holds it, the file keeps its free pages (reused by later writes) and a later open
    tries again.
    """
    if conn.execute("SELECT 1 FROM meta WHERE key='compact_pending'").fetchone() is None:
        return
    started = time.monotonic()
    conn.set_busy_timeout(0)  # another process has it open: try again on a later open, without waiting now
    try:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        conn.execute("VACUUM")
        conn.execute("DELETE FROM meta WHERE key='compact_pending'")
        log.info("compacted the migrated index in %.1f s", time.monotonic() - started)
    except apsw.Error as exc:
        log.info("could not compact the migrated index yet (%s)", exc)
    finally:
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        conn.execute("PRAGMA journal_mode=WAL")


def drop_old_vec_table(conn: apsw.Connection) -> None:
    """Drop a ``chunks_vec`` table left by a migration that ran without sqlite-vec loaded."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name='chunks_vec'").fetchone() is None:
        return
    try:
        with conn:
            conn.execute("DROP TABLE IF EXISTS chunks_vec")
    except apsw.Error as exc:
        log.info("could not drop the old sqlite-vec table yet (%s)", exc)


def fts_current(conn: apsw.Connection) -> bool:
    """True when ``chunks_fts`` exists with the current tokenizer (an index migrated from v3 has the old one)."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()
    return row is not None and FTS_TOKENIZER in (row[0] or "")


def create_schema(conn: apsw.Connection) -> str | None:
    """Create tables; returns an FTS error string when FTS5 is unavailable.

    An index written by another schema version is dropped and rebuilt, never
    misread: the caller sees an empty index and reindexes.
    """
    # Opening an up-to-date index must not write: another process may be in the
    # middle of a long sync transaction, and a write here would fail as "locked".
    if _schema_current(conn):
        return None
    # IMMEDIATE takes the write lock up front (waiting up to the busy timeout);
    # a deferred read upgraded to a write fails at once when another writer committed.
    _begin_schema_write(conn)
    try:
        if _schema_current(conn):
            # Another process opening it at the same time created or migrated it while this one waited for the
            # lock: nothing is done twice.
            conn.execute("COMMIT")
            return None
        fts_error = _create_locked(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return fts_error


def _begin_schema_write(conn: apsw.Connection) -> None:
    """``BEGIN IMMEDIATE`` for a schema change, waiting up to :data:`SCHEMA_LOCK_WAIT_S` for the write lock.

    An index that needs creating or migrating cannot be used before that, so the open waits for another
    process's write (another process's migration of the same file, an older release's long sync) past the busy
    timeout, saying so once; past the bound it fails naming the index and what to do.
    """
    from ..errors import BackendError

    deadline = time.monotonic() + SCHEMA_LOCK_WAIT_S
    warned = False
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")  # waits up to the connection's busy timeout
            return
        except apsw.BusyError:
            if time.monotonic() >= deadline:
                raise BackendError(
                    f"the index {conn.db_filename('main')} needs its tables created or brought up to schema "
                    f"{SCHEMA_VERSION}, and another process has held its write lock for {SCHEMA_LOCK_WAIT_S} s; "
                    "try again once that process's write is done (or stop it)") from None
            if not warned:
                warned = True
                log.warning("the index %s needs its tables created or brought up to schema %s and another process "
                            "holds its write lock: waiting for it (at most %d s)", conn.db_filename("main"),
                            SCHEMA_VERSION, SCHEMA_LOCK_WAIT_S)
            time.sleep(0.05)  # a connection without a busy timeout would otherwise spin


def _create_locked(conn: apsw.Connection) -> str | None:
    have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table')")}
    migrate = False
    generation = 0
    if "meta" in have:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is not None and row[0] in MIGRATES_VECTORS_FROM and _has_column(conn, "chunks", "embedding"):
            log.info("index schema %s -> %s: storing each vector once", row[0], SCHEMA_VERSION)
            conn.execute("ALTER TABLE chunks RENAME TO chunks_old")
            conn.execute("ALTER TABLE embedding_cache RENAME TO embedding_cache_old")
            conn.execute("DROP INDEX IF EXISTS chunks_path")
            conn.execute("DROP INDEX IF EXISTS embedding_cache_used")
            migrate = True
        elif row is not None and row[0] in ADDS_UNITS_FROM | ADDS_LINES_FROM | ADDS_PLAIN_FROM:
            added = ("unit vectors, line analyses" if row[0] in ADDS_UNITS_FROM else
                     "line analyses" if row[0] in ADDS_LINES_FROM else "")
            log.info("index schema %s -> %s: adding %s (filled by the next sync, in the background)", row[0],
                     SCHEMA_VERSION, f"{added} and plain-chunk answers" if added else "plain-chunk answers")
        elif row is None or row[0] != str(SCHEMA_VERSION):
            log.warning("index schema %s != %s: rebuilding the index", row and row[0], SCHEMA_VERSION)
            kept = conn.execute("SELECT value FROM meta WHERE key='generation'").fetchone()
            _drop_all(conn)
            # The numbering goes on: a process still running with this index open keeps its search caches
            # (rows, term counts, scan copy) for the generation it read, and a rebuilt index numbered from 1
            # again could reach that number holding other text.
            generation = _int_or_zero(kept[0] if kept else None) + 1
    conn.execute(SCHEMA)
    if generation:
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('generation', ?)", (str(generation),))
    # A new index (a new file, a rebuild after the drop above) gets a new id; an index from before ids gets one
    # here, in the transaction of its migration when it has one. Its caches in running processes are kept for
    # (id, generation): a number reached again under another id never finds another index's text.
    conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('index_id', ?)", (new_index_id(),))
    if not _has_column(conn, "chunks", "lines"):
        conn.execute("ALTER TABLE chunks ADD COLUMN lines BLOB")
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('lines_pending', '1')")
    if not _has_column(conn, "chunks", "plain"):
        conn.execute("ALTER TABLE chunks ADD COLUMN plain INTEGER")
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('plain_pending', '1')")
    if "meta" in have and "chunk_units" not in have:
        # An index from before unit vectors: whatever its meta says, no chunk has units yet.
        conn.execute("DELETE FROM meta WHERE key = 'units'")
    if migrate:
        migrate_vectors(conn)
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('lines_pending', '1')")
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('plain_pending', '1')")
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('compact_pending', '1')")
    if "chunks_fts" in have and not fts_current(conn):
        log.info("index keyword table predates the %s tokenizer: rebuilding the index in the background",
                 FTS_TOKENIZER.split()[0])
        conn.execute("DELETE FROM meta WHERE key = 'identity'")
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
    try:
        conn.execute(FTS_SCHEMA)
        conn.execute(VOCAB_SCHEMA)
        return None
    except apsw.Error as exc:
        return f"FTS5 unavailable ({exc}); keyword search is off, vector search still works"
