"""Opening the index database: WAL, busy timeout, sqlite-vec, schema version."""

from __future__ import annotations

import importlib.util
import logging
import os
import time
from pathlib import Path
from typing import Any

import apsw
import attrs

__all__ = ["FTS_SCHEMA", "FTS_TOKENIZER", "SCHEMA_VERSION", "VOCAB_SCHEMA", "fts_current", "VecExtension", "create_schema", "load_vec_extension", "open_db", "open_index_db"]

log = logging.getLogger("symi_memory.index")

SCHEMA_VERSION = 4
# Older versions whose tables still read correctly: opening one keeps it searchable and forgets its
# identity, so the indexer rebuilds it in the background (build_full), which also recreates the FTS
# table with the current tokenizer. Any other version is dropped and rebuilt from scratch.
MIGRATES_FROM = {"3"}
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
BUSY_TIMEOUT_MS = 10_000

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
    embedding BLOB
);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
CREATE TABLE IF NOT EXISTS embedding_cache (
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    hash TEXT NOT NULL,
    dims INTEGER NOT NULL,
    embedding BLOB NOT NULL,
    used_at REAL NOT NULL,
    PRIMARY KEY (provider, model, fingerprint, hash)
);
CREATE INDEX IF NOT EXISTS embedding_cache_used ON embedding_cache(used_at);
CREATE TABLE IF NOT EXISTS skipped (path TEXT PRIMARY KEY, reason TEXT NOT NULL);
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


def open_db(path: Path, *, readonly: bool = False) -> apsw.Connection:
    """Open (creating folders) with WAL and a busy timeout so readers never see 'locked'."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    conn = apsw.Connection(str(path), flags=flags)
    try:
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        if not readonly:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
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
    try:
        return open_db(path)
    except (apsw.NotADBError, apsw.CorruptError) as exc:
        aside = f"{path}.unreadable-{int(time.time())}"
        log.warning("index %s is unreadable (%s); moved it to %s and rebuilding", path, exc, aside)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(f"{path}{suffix}"):
                os.replace(f"{path}{suffix}", f"{aside}{suffix}")
        return open_db(path)


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
    if not {"meta", "files", "chunks", "embedding_cache", "skipped", "chunks_fts", "chunks_vocab"} <= have:
        return False
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return row is not None and row[0] == str(SCHEMA_VERSION)


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
    conn.execute("BEGIN IMMEDIATE")
    try:
        fts_error = _create_locked(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return fts_error


def _create_locked(conn: apsw.Connection) -> str | None:
    have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table')")}
    if "meta" in have:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is not None and row[0] in MIGRATES_FROM:
            log.info("index schema %s -> %s: rebuilding the index in the background", row[0], SCHEMA_VERSION)
            conn.execute("DELETE FROM meta WHERE key = 'identity'")
        elif row is None or row[0] != str(SCHEMA_VERSION):
            log.warning("index schema %s != %s: rebuilding the index", row and row[0], SCHEMA_VERSION)
            _drop_all(conn)
    conn.execute(SCHEMA)
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
    try:
        conn.execute(FTS_SCHEMA)
        conn.execute(VOCAB_SCHEMA)
        return None
    except apsw.Error as exc:
        return f"FTS5 unavailable ({exc}); keyword search is off, vector search still works"
