"""The tables (created on first use, versioned) and one owner's rows: the core Indexer's store.

One schema holds every agent's rows; ``owner`` scopes them: an agent id, or
``@NAME`` for the shared scope NAME. The embedding cache has no owner: the
same text embedded by the same model is embedded once for the whole fleet.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar

import attrs

from symi_memory.errors import BackendError
from symi_memory.indexing import ChunkRow, FileRow, unpack_vector
from symi_memory.supersession import LINE_ANALYSIS_VERSION, line_analysis

from .terms import document_terms

__all__ = ["SCHEMA_VERSION", "PgStore", "analyze_after_sync", "ensure_schema", "lock_key"]

log = logging.getLogger("symi_memory.postgres")

SCHEMA_VERSION = 5
# Version 1 indexed words unstemmed: upgrading forgets every owner's index identity, so each agent's
# next sync rebuilds its rows (in one transaction; the old rows answer until then).
RESTEM_BEFORE = 2
# Version 3 adds chunk_units (line vectors, chunking.units): an owner indexed before has no units meta,
# so its next sync rebuilds it with them.
# Version 4 adds chunks.lines, supersession's line analysis of each chunk (``StoredLineAnalysis``): rows
# written before have none until the owner's next sync fills them in place (``fill_line_analysis``); searches
# analyse those chunks' text meanwhile, with the same answers.
# Version 5 adds transcript_tails, what the next sync needs to read a grown transcript only past where the last one
# stopped (the core Indexer's tail state, written with the transcript's rows): a transcript indexed before has none,
# so its next sync after it grows reads it whole once.
INSERT_BATCH = 500
#: How long :meth:`PgStore.cache_put` on a spare connection waits for another transaction's lock on a cache row
#: before writing in the build's transaction instead.
CACHE_LOCK_WAIT_MS = 2000
#: How long a commit of vectors the sync can do without (:meth:`PgStore.try_cache_put`) waits for a row's lock, and
#: how long its statement may take, before it is skipped (the next one takes the vectors).
SPARE_WRITE_WAIT_MS = 200
SPARE_WRITE_STATEMENT_MS = 5000
#: owner_meta key: the LINE_ANALYSIS_VERSION every one of the owner's chunks has an analysis of.
LINES_META = "linesVersion"
# maintenance_work_mem for an HNSW build: the graph of 1M 384-d vectors needs ~2 GB to build in memory;
# beyond this it still builds, more slowly.
BUILD_MEMORY = "512MB"

DDL = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.owner_meta (owner text NOT NULL, key text NOT NULL, value text NOT NULL,
    PRIMARY KEY (owner, key));
CREATE TABLE IF NOT EXISTS {s}.files (owner text NOT NULL, path text NOT NULL, source text NOT NULL,
    hash text NOT NULL, mtime double precision NOT NULL, size bigint NOT NULL, chunks integer NOT NULL,
    bad_utf8 integer NOT NULL, lines integer NOT NULL, PRIMARY KEY (owner, path));
CREATE TABLE IF NOT EXISTS {s}.chunks (id bigserial PRIMARY KEY, owner text NOT NULL, cid text NOT NULL,
    path text NOT NULL, source text NOT NULL, start_line integer NOT NULL, end_line integer NOT NULL,
    hash text NOT NULL, text text NOT NULL, terms tsvector NOT NULL, dims integer, embedding vector, lines bytea,
    UNIQUE (owner, cid));
ALTER TABLE {s}.chunks ADD COLUMN IF NOT EXISTS lines bytea;
CREATE INDEX IF NOT EXISTS chunks_owner_path ON {s}.chunks (owner, path);
CREATE INDEX IF NOT EXISTS chunks_terms ON {s}.chunks USING gin (terms);
CREATE TABLE IF NOT EXISTS {s}.chunk_units (owner text NOT NULL, cid text NOT NULL, path text NOT NULL,
    start_line integer NOT NULL, end_line integer NOT NULL, embedding bytea NOT NULL,
    PRIMARY KEY (owner, cid, start_line, end_line));
CREATE INDEX IF NOT EXISTS chunk_units_owner_path ON {s}.chunk_units (owner, path);
CREATE TABLE IF NOT EXISTS {s}.skipped (owner text NOT NULL, path text NOT NULL, reason text NOT NULL,
    PRIMARY KEY (owner, path));
CREATE TABLE IF NOT EXISTS {s}.transcript_tails (owner text NOT NULL, path text NOT NULL, state text NOT NULL,
    PRIMARY KEY (owner, path));
CREATE TABLE IF NOT EXISTS {s}.embedding_cache (provider text NOT NULL, model text NOT NULL,
    fingerprint text NOT NULL, hash text NOT NULL, embedding bytea NOT NULL, used_at double precision NOT NULL,
    PRIMARY KEY (provider, model, fingerprint, hash));
"""

MISSING_VECTOR = ("postgres: the pgvector extension is not installed in database {db}: "
                  "run CREATE EXTENSION vector; there as a superuser (or install pgvector on the server)")


def lock_key(*parts: str) -> int:
    """A stable signed 64-bit advisory-lock key for ``parts``."""
    digest = hashlib.sha256("\x1f".join(("symi-memory", *parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


# How long an upgrade's DDL waits for a table lock before it lets go and tries again: ALTER TABLE takes an
# ACCESS EXCLUSIVE lock, and while it waits for one (behind an older process's long sync transaction) every
# search of the table queues behind it. Letting go each time bounds what a search waits to this.
MIGRATION_LOCK_TIMEOUT_S = 1.0


def ensure_schema(conn: Any, schema: str, *, within: float | None = None) -> None:
    """Create the extension, tables and indexes on first use; refuse a newer schema version.

    Runs under a transaction-scoped advisory lock so that many processes
    starting at once create everything exactly once. An upgrade whose DDL
    cannot lock a table within ``MIGRATION_LOCK_TIMEOUT_S`` (another
    process's transaction holds it) lets go and tries again, so that
    searches are never held up behind it for longer than that; for at most
    ``within`` seconds in all (then the lock error is raised), or for ever when None.
    """
    import psycopg

    tries = 0
    started = time.monotonic()
    while True:
        try:
            _ensure_schema_once(conn, schema, announce=tries == 0)
            return
        except psycopg.errors.LockNotAvailable:
            if within is not None and time.monotonic() - started + MIGRATION_LOCK_TIMEOUT_S > within:
                raise
            tries += 1
            log.info("postgres: upgrading schema %s waits for another process's transaction", schema)
            time.sleep(MIGRATION_LOCK_TIMEOUT_S)


def _ensure_schema_once(conn: Any, schema: str, *, announce: bool = True) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("schema", schema),))
        have = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        if have is None:
            available = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
            db = conn.info.dbname
            if available is None:
                raise BackendError(MISSING_VECTOR.format(db=db))
            try:
                with conn.transaction():
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except Exception as exc:
                raise BackendError(MISSING_VECTOR.format(db=db) + f" ({type(exc).__name__})") from None
        exists = conn.execute("SELECT to_regclass(%s)", (f"{schema}.meta",)).fetchone()[0]
        version = _recorded_version(conn, schema) if exists is not None else None
        if version is None:
            # Every version wrote its version mark with its tables, in one transaction: tables of these names
            # without it are another application's, which the DDL below would alter (and then fail on).
            theirs = [r[0] for r in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
                "AND c.relname = ANY(%s) ORDER BY c.relname", (schema, list(OUR_TABLES))).fetchall()]
            if theirs:
                raise BackendError(f"postgres: schema {schema} holds tables symi-memory did not make "
                                   f"({', '.join(theirs)}; no schema version recorded): set "
                                   "memorySearch.store.postgres.schema to another name")
        if version is not None:
            if version > SCHEMA_VERSION:
                raise BackendError(f"postgres: schema {schema} is version {version}, newer than this plugin "
                                   f"understands ({SCHEMA_VERSION}); upgrade symi-memory-postgres")
            if version == SCHEMA_VERSION:
                return
            if announce:
                log.warning("postgres: upgrading schema %s from version %d to %d%s", schema, version, SCHEMA_VERSION,
                            "; each agent's rows are rebuilt on its next sync (stemmed keyword terms)"
                            if 0 < version < RESTEM_BEFORE else "")
        conn.execute(f"SET LOCAL lock_timeout = '{int(MIGRATION_LOCK_TIMEOUT_S * 1000)}ms'")
        for stmt in DDL.format(s=schema).split(";"):
            if stmt.strip():
                conn.execute(stmt)
        if version is not None and 0 < version < RESTEM_BEFORE:
            conn.execute(f"DELETE FROM {schema}.owner_meta WHERE key = 'identity'")
        conn.execute(f"INSERT INTO {schema}.meta (key, value) VALUES ('schemaVersion', %s) "
                     "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (str(SCHEMA_VERSION),))


#: A sync that wrote more chunks than this fraction of the rows the server last counted in the table (``reltuples``)
#: runs ``ANALYZE`` on it (:func:`analyze_after_sync`); so does one to a table never analysed, and one that wrote
#: more of an owner's chunks than twice the rows the statistics give that owner (a fleet's new agent: the server's
#: planner takes it for a handful of rows, and probes each query word by a scan of them).
ANALYZE_FRACTION = 0.2
#: ... and at least this many (a few rows change no plan; autovacuum's own threshold starts at 50).
ANALYZE_MIN_ROWS = 50
#: How long that ANALYZE may run (server-side ``statement_timeout``), and wait for a lock another ANALYZE or
#: VACUUM holds (``lock_timeout``: autovacuum analysing it is doing the same work), before it is given up.
ANALYZE_TIMEOUT_S = 30.0
ANALYZE_LOCK_WAIT_S = 1.0
#: The tables searches plan on: chunks (each query word's document frequency, the keyword side) and files.
ANALYZED_TABLES = ("chunks", "files")


def _believed_rows(counted: float, n_distinct: float | None, common: list[str] | None,
                   freqs: list[float] | None) -> Callable[[str], float]:
    """How many of the table's rows the planner's statistics give each owner (as PostgreSQL estimates ``owner = x``)."""
    mcv = dict(zip(common or [], freqs or [], strict=False))
    distinct = (n_distinct if n_distinct and n_distinct > 0 else -(n_distinct or 0.0) * counted) or 1.0
    rest = max(0.0, 1.0 - sum(mcv.values())) / max(1.0, distinct - len(mcv))
    return lambda owner: counted * mcv.get(owner, rest)


def analyze_after_sync(conn: Any, schema: str, written: dict[str, int], *, within: float = ANALYZE_TIMEOUT_S) -> bool:
    """``ANALYZE`` the tables searches plan on when a sync that wrote ``written`` chunks (per owner) changed them
    substantially in the planner's eyes.

    Until the server has statistics of the rows a first sync wrote (autovacuum analyses them within about a
    minute, ``autovacuum_naptime``), its planner guesses: it probed each query word by a scan of the agent's rows
    instead of the GIN index, 5-9 s for a 200-word query over 2,000 notes, and a short query could pass
    searchTimeout. So after a sync that wrote to a table never analysed, more than :data:`ANALYZE_FRACTION` of the
    rows the server last counted, or more of an owner's rows than twice what the statistics give that owner, the
    sync analyses them itself, for at most ``within`` seconds. It never fails the sync: a timeout, a lock held
    elsewhere, a lost connection is logged and left to autovacuum. A role that does not own the tables (nor has
    PostgreSQL 17's MAINTAIN) is skipped by the server with a warning in its log, and autovacuum analyses them as
    before. Returns whether it ran.
    """
    import psycopg

    total = sum(written.values())
    if total < 1:
        return False
    try:
        with conn.transaction():
            row = conn.execute(
                "SELECT c.reltuples, s.n_distinct, s.most_common_vals::text::text[], s.most_common_freqs::float8[] "
                "FROM pg_class c LEFT JOIN pg_stats s ON s.schemaname = %s AND s.tablename = 'chunks' "
                "AND s.attname = 'owner' WHERE c.oid = to_regclass(%s)", (schema, f"{schema}.chunks")).fetchone()
            if row is None:
                return False
            counted = float(row[0])
            believed = _believed_rows(max(0.0, counted), row[1], row[2], row[3])
            unknown = counted < 0 or row[1] is None  # never analysed (reltuples -1 on PostgreSQL 14+, 0 before)
            if not (unknown or total > max(ANALYZE_MIN_ROWS - 1, ANALYZE_FRACTION * counted) or any(
                    n >= ANALYZE_MIN_ROWS and n > 2 * believed(owner) for owner, n in written.items())):
                return False
            conn.execute("SELECT set_config('statement_timeout', %s, true), set_config('lock_timeout', %s, true)",
                         (str(max(1, int(within * 1000))), str(int(ANALYZE_LOCK_WAIT_S * 1000))))
            started = time.perf_counter()
            conn.execute(f"ANALYZE {', '.join(f'{schema}.{t}' for t in ANALYZED_TABLES)}")
        log.info("postgres: analysed %s after a sync that wrote %d chunks (%d counted before) in %.2f s",
                 schema, total, max(0, int(counted)), time.perf_counter() - started)
        return True
    except psycopg.Error as exc:
        log.warning("postgres: could not analyse the tables of %s after this sync (%s); searches may be slow until "
                    "autovacuum does", schema, " ".join(str(exc).split()))
        return False


OUR_TABLES = ("meta", "owner_meta", "files", "chunks", "chunk_units", "skipped", "embedding_cache", "transcript_tails")


def _recorded_version(conn: Any, schema: str) -> int | None:
    """The schema version ``schema.meta`` records, None when it records none (or is not a table of ours)."""
    import psycopg

    try:
        with conn.transaction():
            row = conn.execute(f"SELECT value FROM {schema}.meta WHERE key = 'schemaVersion'").fetchone()
    except (psycopg.errors.UndefinedColumn, psycopg.errors.DatatypeMismatch):
        return None
    try:
        return int(row[0]) if row else None
    except (TypeError, ValueError):
        return None


STAGE = "symi_memory_stage"
KEPT = "symi_memory_kept"
STAGE_COLUMNS = "owner, cid, path, source, start_line, end_line, hash, text, terms, dims, embedding, lines"
STAGE_DDL = (f"CREATE TEMP TABLE IF NOT EXISTS {STAGE} (owner text, cid text, path text, source text, start_line integer, "
             "end_line integer, hash text, text text, terms text, dims integer, embedding real[], lines bytea)")
STAGE_TYPES = ["text", "text", "text", "text", "int4", "int4", "text", "text", "text", "int4", "float4[]", "bytea"]


MAX_PATH_BYTES = 2400


def _cut_path(path: str) -> str:
    """``path`` cut to fit a btree index entry (``MAX_PATH_BYTES``), marked with "..." when cut."""
    raw = path.encode("utf-8")
    if len(raw) <= MAX_PATH_BYTES:
        return path
    return raw[:MAX_PATH_BYTES - 3].decode("utf-8", "ignore") + "..."


def pg_text(text: str) -> str:
    """``text`` as PostgreSQL ``text`` can hold it: a NUL byte (which it refuses, failing the whole write) as U+FFFD."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def hnsw_index_name(dims: int) -> str:
    return f"chunks_hnsw_{dims}"


@attrs.define
class PgStore:
    """One owner's rows, through one connection (the sync's, which holds the owner's advisory lock).

    Every write method is one transaction: readers on other connections see
    all of it or none of it (MVCC). ``build_full`` deletes and rewrites the
    owner's rows in a single transaction, so a full reindex swaps in at commit
    and a lost connection leaves the previous rows in place.
    """

    #: The core Indexer embeds each chunk's lines too (``chunking.units``) and hands them to ``_write``.
    stores_units: ClassVar[bool] = True
    #: Paths are keys of btree indexes, whose entries hold at most 2704 bytes (with the owner): the Indexer
    #: skips a file with a longer path; its ``skipped`` row keeps the path cut to this length.
    max_path_bytes: ClassVar[int] = MAX_PATH_BYTES
    #: The core Indexer's tail state of each transcript (``FileRow.tail``) is kept with its rows, in the same
    #: transaction: a transcript that only grew is read and written only past where the last sync stopped.
    stores_tails: ClassVar[bool] = True

    conn: Any
    schema: str
    owner: str
    hnsw: tuple[int, int] = (16, 64)  # m, ef_construction
    #: A context in which statements may run for as long as the server keeps answering (the HNSW build).
    long_statement: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext
    #: A connection other than ``conn`` (None when this process has none to spare: poolSize in use), on which
    #: :meth:`cache_put` commits the vectors a full build computes, apart from its transaction (:meth:`cache_put`).
    spare: Callable[[], AbstractContextManager[Any]] | None = None
    _new_dims: set[int] = attrs.field(factory=set)
    _known_dims: set[int] = attrs.field(factory=set)

    # ------------------------------------------------------------------ reads

    def _q(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(sql.format(s=self.schema), params)

    def get_meta(self, key: str) -> str | None:
        row = self._q("SELECT value FROM {s}.owner_meta WHERE owner = %s AND key = %s", (self.owner, key)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        """Record one of this owner's sync facts (failed files, the last sync's result)."""
        with self.conn.transaction():
            self._q("INSERT INTO {s}.owner_meta (owner, key, value) VALUES (%s, %s, %s) "
                    "ON CONFLICT (owner, key) DO UPDATE SET value = EXCLUDED.value", (self.owner, key, value))

    @property
    def vec_dims(self) -> int | None:
        """The dimension of this owner's stored vectors, None when it has none."""
        row = self._q("SELECT dims FROM {s}.chunks WHERE owner = %s AND dims IS NOT NULL LIMIT 1",
                      (self.owner,)).fetchone()
        return int(row[0]) if row else None

    def files(self) -> dict[str, FileRow]:
        rows = self._q("SELECT path, source, hash, mtime, size, chunks, bad_utf8, lines FROM {s}.files WHERE owner = %s",
                       (self.owner,)).fetchall()
        return {r[0]: FileRow(path=r[0], source=r[1], hash=r[2], mtime=r[3], size=r[4], chunks=r[5], bad_utf8=r[6],
                              lines=r[7]) for r in rows}

    def transcript_tail(self, path: str) -> str | None:
        """The state the last sync stored for the transcript ``path`` (``FileRow.tail``), or None."""
        row = self._q("SELECT state FROM {s}.transcript_tails WHERE owner = %s AND path = %s",
                      (self.owner, path)).fetchone()
        return None if row is None else str(row[0])

    def skipped_map(self) -> dict[str, str]:
        return dict(self._q("SELECT path, reason FROM {s}.skipped WHERE owner = %s", (self.owner,)).fetchall())

    def pending_count(self) -> int:
        return int(self._q("SELECT count(*) FROM {s}.files WHERE owner = %s AND hash LIKE 'pending:%%'",
                           (self.owner,)).fetchone()[0])

    # ----------------------------------------------------------------- writes

    def touch_file(self, path: str, mtime: float, size: int, lines: int) -> None:
        with self.conn.transaction():
            self._q("UPDATE {s}.files SET mtime = %s, size = %s, lines = %s WHERE owner = %s AND path = %s",
                    (mtime, size, lines, self.owner, path))

    def build_full(self, files: Iterable[tuple[FileRow, list[ChunkRow]]], *, skipped: dict[str, str],
                   meta: dict[str, str]) -> int:
        with self.conn.transaction():
            # The line analyses of the rows about to go, for the chunks written again unchanged (see _write_batch).
            self._q(f"CREATE TEMP TABLE {KEPT} ON COMMIT DROP AS SELECT path, start_line, hash, lines FROM {{s}}.chunks "
                    "WHERE owner = %s AND substring(lines FROM 1 FOR 1) = %s",
                    (self.owner, bytes((LINE_ANALYSIS_VERSION,))))
            self._q(f"CREATE INDEX ON pg_temp.{KEPT} (path)")
            self._q("DELETE FROM {s}.chunks WHERE owner = %s", (self.owner,))
            self._q("DELETE FROM {s}.chunk_units WHERE owner = %s", (self.owner,))
            self._q("DELETE FROM {s}.files WHERE owner = %s", (self.owner,))
            self._q("DELETE FROM {s}.transcript_tails WHERE owner = %s", (self.owner,))
            written = self._write(files, kept_from=f"pg_temp.{KEPT}")
            self._finish(skipped, meta)
        self._ensure_hnsw()
        return written

    def replace_files(self, files: Iterable[tuple[FileRow, list[ChunkRow]]], *, remove: Iterable[str] = (),
                      skipped: dict[str, str] | None = None, meta: dict[str, str] | None = None) -> int:
        with self.conn.transaction():
            gone = list(remove)
            if gone:
                self._drop(gone)
            written = self._write(files, replace=True)
            self._finish(skipped, meta)
        self._ensure_hnsw()
        return written

    def _drop(self, paths: list[str]) -> None:
        self._q("DELETE FROM {s}.chunks WHERE owner = %s AND path = ANY(%s)", (self.owner, paths))
        self._q("DELETE FROM {s}.chunk_units WHERE owner = %s AND path = ANY(%s)", (self.owner, paths))
        self._q("DELETE FROM {s}.files WHERE owner = %s AND path = ANY(%s)", (self.owner, paths))
        self._q("DELETE FROM {s}.transcript_tails WHERE owner = %s AND path = ANY(%s)", (self.owner, paths))

    def _finish(self, skipped: dict[str, str] | None, meta: dict[str, str] | None) -> None:
        if skipped is not None:
            self._q("DELETE FROM {s}.skipped WHERE owner = %s", (self.owner,))
            if skipped:
                with self.conn.cursor() as cur:
                    cut = {_cut_path(p): why for p, why in skipped.items()}
                    cur.executemany(f"INSERT INTO {self.schema}.skipped (owner, path, reason) VALUES (%s, %s, %s)",
                                    [(self.owner, p, why) for p, why in cut.items()])
        for key, value in (meta or {}).items():
            self._q("INSERT INTO {s}.owner_meta (owner, key, value) VALUES (%s, %s, %s) "
                    "ON CONFLICT (owner, key) DO UPDATE SET value = EXCLUDED.value", (self.owner, key, value))

    def _write(self, files: Iterable[tuple[FileRow, list[ChunkRow]]], *, replace: bool = False,
               kept_from: str | None = None) -> int:
        written = 0
        batch: list[tuple[FileRow, list[ChunkRow]]] = []
        for item in files:
            batch.append(item)
            if sum(len(c) for _, c in batch) >= INSERT_BATCH:
                written += self._write_batch(batch, replace, kept_from)
                batch = []
        if batch:
            written += self._write_batch(batch, replace, kept_from)
        return written

    def _write_batch(self, batch: list[tuple[FileRow, list[ChunkRow]]], replace: bool,
                     kept_from: str | None = None) -> int:
        # A chunk written again with the same path, start line and text keeps its stored line analysis (it
        # depends on nothing else): a full reindex (a model change) or an edit further down a file analyses
        # only the chunks that changed. ``kept_from``: a table holding the analyses of rows already deleted.
        batch = self._appends(batch)
        if not batch:
            return 0
        appended = [f for f, _ in batch if f.drop is not None]
        source = kept_from or f"{self.schema}.chunks"
        kept = {(p, int(a), h): bytes(b) for p, a, h, b in self.conn.execute(
            f"SELECT path, start_line, hash, lines FROM {source} WHERE {'true' if kept_from else 'owner = %s'} "
            "AND path = ANY(%s) AND lines IS NOT NULL",
            ([] if kept_from else [self.owner]) + [[f.path for f, _ in batch]]).fetchall()
            if b and b[0] == LINE_ANALYSIS_VERSION} if replace or kept_from else {}
        if replace:
            self._drop([f.path for f, _ in batch if f.drop is None])
        for d in {len(c.embedding) // 4 for _, rows in batch for c in rows if c.embedding} - self._known_dims:
            valid = self._q("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
                            (f"{self.schema}.{hnsw_index_name(d)}",)).fetchone()
            if valid is None or not valid[0]:  # missing, being built elsewhere, or left invalid by a crash
                self._new_dims.add(d)
            self._known_dims.add(d)
        chunk_rows = [(self.owner, c.id, c.path, c.source, c.start_line, c.end_line, c.hash, pg_text(c.text),
                       document_terms(c.text), len(c.embedding) // 4 if c.embedding else None,
                       unpack_vector(c.embedding) if c.embedding else None,
                       kept.get((c.path, c.start_line, c.hash)) or line_analysis(c.path, c.start_line, c.text))
                      for _, rows in batch for c in rows]
        with self.conn.cursor() as cur:
            # COPY into a session-local staging table, then one INSERT ... SELECT: an order of magnitude
            # faster than row-by-row inserts, and the server computes the tsvector. INSERT_BATCH rows at a
            # time, a huge file's too: each statement stays well within syncTimeout however many chunks a
            # file has (one file's thousands of rows in one COPY outlasted a short syncTimeout on a busy host).
            cur.execute(STAGE_DDL)
            for at in range(0, len(chunk_rows), INSERT_BATCH):
                with cur.copy(f"COPY pg_temp.{STAGE} ({STAGE_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(STAGE_TYPES)
                    for row in chunk_rows[at : at + INSERT_BATCH]:
                        copy.write_row(row)
                cur.execute(
                    f"INSERT INTO {self.schema}.chunks (owner, cid, path, source, start_line, end_line, hash, text, "
                    f"terms, dims, embedding, lines) SELECT owner, cid, path, source, start_line, end_line, hash, "
                    f"text, to_tsvector('simple', terms), dims, embedding::vector, lines FROM pg_temp.{STAGE} "
                    "ON CONFLICT (owner, cid) DO NOTHING")
                cur.execute(f"TRUNCATE pg_temp.{STAGE}")
            units = [(self.owner, c.id, c.path, u.start_line, u.end_line, u.embedding)
                     for _, rows in batch for c in rows for u in c.units]
            if units:
                cur.executemany(
                    f"INSERT INTO {self.schema}.chunk_units (owner, cid, path, start_line, end_line, embedding) "
                    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING", units)
            cur.executemany(
                f"INSERT INTO {self.schema}.files (owner, path, source, hash, mtime, size, chunks, bad_utf8, lines) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (owner, path) DO UPDATE SET "
                "source = EXCLUDED.source, hash = EXCLUDED.hash, mtime = EXCLUDED.mtime, size = EXCLUDED.size, "
                "chunks = EXCLUDED.chunks, bad_utf8 = EXCLUDED.bad_utf8, lines = EXCLUDED.lines",
                [(self.owner, f.path, f.source, f.hash, f.mtime, f.size, len(rows), f.bad_utf8, f.lines)
                 for f, rows in batch])
            if appended:  # rows added to the file's: its count is of all of them
                cur.executemany(f"UPDATE {self.schema}.files SET chunks = (SELECT count(*) FROM {self.schema}.chunks "
                                "WHERE owner = %s AND path = %s) WHERE owner = %s AND path = %s",
                                [(self.owner, f.path, self.owner, f.path) for f in appended])
            tails = [(self.owner, f.path, f.tail) for f, _ in batch if f.tail is not None]
            if tails:
                cur.executemany(f"INSERT INTO {self.schema}.transcript_tails (owner, path, state) VALUES (%s, %s, %s) "
                                "ON CONFLICT (owner, path) DO UPDATE SET state = EXCLUDED.state", tails)
            untailed = [f.path for f, _ in batch if f.tail is None and (f.drop is not None or f.source == "sessions")]
            if untailed:
                cur.execute(f"DELETE FROM {self.schema}.transcript_tails WHERE owner = %s AND path = ANY(%s)",
                            (self.owner, untailed))
        return len(chunk_rows)

    def _appends(self, batch: list[tuple[FileRow, list[ChunkRow]]]) -> list[tuple[FileRow, list[ChunkRow]]]:
        """``batch`` with each transcript read only past where the last sync stopped (``FileRow.drop`` set) made
        ready to be added to its rows: the chunks its last chunk became (``drop``) and those its window left
        (``cut``) deleted. One whose rows are no longer those it was read against (another sync wrote the file
        since: another ``hash`` or no tail state) is left out: the next sync reads it on from the rows there."""
        out = []
        for frow, rows in batch:
            if frow.drop is None:
                out.append((frow, rows))
                continue
            there = self._q("SELECT 1 FROM {s}.files f JOIN {s}.transcript_tails t USING (owner, path) "
                            "WHERE f.owner = %s AND f.path = %s AND f.hash = %s",
                            (self.owner, frow.path, frow.base)).fetchone()
            if there is None:
                log.info("%s: written by another sync meanwhile; read again by the next one", frow.path)
                continue
            gone = self._q("DELETE FROM {s}.chunks WHERE owner = %s AND path = %s AND (cid = ANY(%s) OR start_line < %s) "
                           "RETURNING cid", (self.owner, frow.path, list(frow.drop), frow.cut or 0)).fetchall()
            if gone:
                self._q("DELETE FROM {s}.chunk_units WHERE owner = %s AND path = %s AND cid = ANY(%s)",
                        (self.owner, frow.path, [r[0] for r in gone]))
            out.append((frow, rows))
        return out

    def fill_line_analysis(self, batch: int = 500, should_stop: Any = None) -> int:
        """Store the line analysis of every chunk of this owner that has none (written before schema
        version 4) or one of another ``LINE_ANALYSIS_VERSION``, ``batch`` chunks per transaction; returns
        how many were filled. The core Indexer calls it after each sync; once every chunk has one (owner
        meta ``linesVersion``) it costs one read. Searches meanwhile analyse those chunks' text themselves."""
        version = str(LINE_ANALYSIS_VERSION)
        if self.get_meta(LINES_META) == version:
            return 0
        filled, after = 0, 0
        while should_stop is None or not should_stop():
            with self.conn.transaction():
                rows = self._q("SELECT id, path, start_line, text FROM {s}.chunks WHERE owner = %s AND id > %s AND "
                               "(lines IS NULL OR substring(lines FROM 1 FOR 1) <> %s) ORDER BY id LIMIT %s",
                               (self.owner, after, bytes((LINE_ANALYSIS_VERSION,)), batch)).fetchall()
                if rows:
                    after = rows[-1][0]
                    with self.conn.cursor() as cur:
                        cur.executemany(f"UPDATE {self.schema}.chunks SET lines = %s WHERE id = %s",
                                        [(line_analysis(path, start, text), rid) for rid, path, start, text in rows])
                if len(rows) < batch:
                    self._q("INSERT INTO {s}.owner_meta (owner, key, value) VALUES (%s, %s, %s) ON CONFLICT "
                            "(owner, key) DO UPDATE SET value = EXCLUDED.value", (self.owner, LINES_META, version))
            filled += len(rows)
            if len(rows) < batch:
                break
        if filled:
            log.info("postgres: stored the line analysis of %d chunks of %s", filled, self.owner)
        return filled

    def heal_hnsw(self) -> None:
        """Build again the HNSW indexes an interrupted build left invalid (a killed connection, a crash).

        Such an index is neither used by searches (they scan exactly) nor rebuilt by a sync that writes
        no new vectors, so each sync looks for one (one catalog read) and rebuilds it.
        """
        rows = self._q("SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                       "WHERE i.indrelid = to_regclass(%s) AND NOT i.indisvalid AND c.relname ~ '^chunks_hnsw_[0-9]+$'",
                       (f"{self.schema}.chunks",)).fetchall()
        self._new_dims.update(int(name.rsplit("_", 1)[1]) for (name,) in rows)
        self._ensure_hnsw()  # a role that may not rebuild it logs why

    def _ensure_hnsw(self) -> None:
        """Build the HNSW index for vector widths written without one (one column holds every width).

        Runs after the write transaction committed, never inside one: the index
        is built ``CONCURRENTLY`` so other agents keep writing meanwhile, and
        under a session-level advisory lock taken while this session holds no
        table lock, and only tried (never waited for), so two processes never
        deadlock or build it twice.
        """
        import psycopg

        for dims in sorted(self._new_dims):
            name = hnsw_index_name(dims)
            if dims > 2000:
                log.warning("postgres: %d-dimension vectors exceed HNSW's 2000; searches scan them exactly", dims)
                continue
            key = lock_key("hnsw", self.schema, str(dims))
            # Never wait for it: a CONCURRENTLY build waits for every open transaction, a waiter's included.
            # When another process holds it, that one is building the index; searches scan exactly meanwhile.
            if not self.conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
                continue
            try:
                self._build_hnsw(dims, name)
            except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ObjectInUse) as exc:
                # CREATE INDEX needs the table's owner: a role granted only the rows writes them, and searches of
                # this width scan exactly until the owner's next sync (or an operator) builds the index.
                log.warning("postgres: no HNSW index for %d-d vectors in %s (%s); searches scan them exactly until "
                            "the tables' owner builds it", dims, self.schema, " ".join(str(exc).split()))
            finally:
                if not self.conn.closed:
                    self.conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        self._new_dims.clear()

    def _build_hnsw(self, dims: int, name: str) -> None:
        """Build the index ``name`` for ``dims``-d vectors (dropping one a crash left invalid), holding its lock."""
        valid = self._q("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
                        (f"{self.schema}.{name}",)).fetchone()
        if valid is not None and not valid[0]:  # a build interrupted earlier
            self._q(f"DROP INDEX CONCURRENTLY IF EXISTS {{s}}.{name}")
            valid = None
        if valid is not None:
            return
        m, efc = self.hnsw
        log.info("postgres: building the HNSW index for %d-d vectors in %s", dims, self.schema)
        self.conn.execute(f"SET maintenance_work_mem = '{BUILD_MEMORY}'")
        try:
            with self.long_statement():
                self._q(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {{s}}.chunks USING hnsw "
                        f"((embedding::vector({dims})) vector_cosine_ops) WITH (m = {int(m)}, "
                        f"ef_construction = {int(efc)}) WHERE dims = {dims}")
        finally:
            if not self.conn.closed:
                self.conn.execute("RESET maintenance_work_mem")

    # ------------------------------------------------------------------ cache

    def cache_get(self, provider: str, model: str, fingerprint: str, hashes: Sequence[str]) -> dict[str, bytes]:
        if not hashes:
            return {}
        rows = self._q("UPDATE {s}.embedding_cache SET used_at = %s WHERE provider = %s AND model = %s "
                       "AND fingerprint = %s AND hash = ANY(%s) RETURNING hash, embedding",
                       (time.time(), provider, model, fingerprint, list(hashes))).fetchall()
        return {h: bytes(b) for h, b in rows}

    def cache_put(self, provider: str, model: str, fingerprint: str, items: dict[str, bytes]) -> None:
        """Store vectors in the shared cache, committed at once.

        During :meth:`build_full` the sync's connection is inside the build's transaction, where a write is only a
        savepoint: an interrupted rebuild (SIGINT, SIGKILL, a lost connection) would roll back every vector it
        computed with the build, and the next run would ask the provider for all of them again. So they go through
        a spare connection (:attr:`spare`), committed batch by batch, and the next run takes them from the cache.
        Without one to spare (every poolSize connection in use), or once that write failed, they are written in the
        build's transaction (then an interrupted rebuild loses them, as before).
        """
        if self._put_on_spare(provider, model, fingerprint, items, CACHE_LOCK_WAIT_MS) is None:
            with self.conn.transaction(), self.conn.cursor() as cur:
                cur.executemany(self._put_sql(), self._put_rows(provider, model, fingerprint, items))

    def try_cache_put(self, provider: str, model: str, fingerprint: str, items: dict[str, bytes]) -> bool:
        """:meth:`cache_put` waiting at most :data:`SPARE_WRITE_WAIT_MS` for another transaction's lock on a row (and
        the statement at most :data:`SPARE_WRITE_STATEMENT_MS`): False, nothing written, when that was not enough.

        The sync's commits of vectors mid-run are a safety net (a run stopped mid-way keeps them): one that finds
        the rows locked (another agent's build writing the same vectors to the shared cache, in its transaction) or
        the server slow is skipped, the vectors kept for the next, and never fails the rebuild. Written in the
        build's transaction (no spare connection), the wait is bounded the same way, in a savepoint.
        """
        import psycopg

        done = self._put_on_spare(provider, model, fingerprint, items, SPARE_WRITE_WAIT_MS)
        if done is not None:
            return done
        try:
            with self.conn.transaction(), self.conn.cursor() as cur:
                # Local to the transaction, restored below; the savepoint's rollback undoes them on a failure.
                old = cur.execute("SELECT current_setting('lock_timeout'), current_setting('statement_timeout')"
                                  ).fetchone()
                cur.execute("SELECT set_config('lock_timeout', %s, true), set_config('statement_timeout', %s, true)",
                            (str(SPARE_WRITE_WAIT_MS), str(SPARE_WRITE_STATEMENT_MS)))
                cur.executemany(self._put_sql(), self._put_rows(provider, model, fingerprint, items))
                cur.execute("SELECT set_config('lock_timeout', %s, true), set_config('statement_timeout', %s, true)",
                            old)
        except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled) as exc:
            log.debug("postgres: a commit of vectors skipped (%s)", " ".join(str(exc).split()))
            return False
        return True

    def _put_sql(self) -> str:
        return (f"INSERT INTO {self.schema}.embedding_cache (provider, model, fingerprint, hash, embedding, used_at) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (provider, model, fingerprint, hash) "
                "DO UPDATE SET used_at = EXCLUDED.used_at")

    @staticmethod
    def _put_rows(provider: str, model: str, fingerprint: str, items: dict[str, bytes]) -> list[tuple[Any, ...]]:
        now = time.time()
        return [(provider, model, fingerprint, h, b, now) for h, b in items.items()]

    def _put_on_spare(self, provider: str, model: str, fingerprint: str, items: dict[str, bytes],
                      lock_wait_ms: int) -> bool | None:
        """Commit ``items`` on a spare connection while a build's transaction is open: True when written, False
        when a row stayed locked past ``lock_wait_ms`` or the statement took too long (the spare is kept for the
        next try), None with no spare to use (none here, none free, or one that failed: not tried again this sync)."""
        import psycopg

        if self.spare is None or self.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            return None
        try:
            with self.spare() as other:
                if other is None:
                    return None
                with other.transaction(), other.cursor() as cur:
                    # A row the build's transaction holds (its cache_get marks what it reads) is never waited for
                    # long: that wait would be on this very sync. Another transaction's (a fleet's other build writing
                    # the same vectors) is not either.
                    cur.execute("SELECT set_config('lock_timeout', %s, true)", (str(lock_wait_ms),))
                    if lock_wait_ms == SPARE_WRITE_WAIT_MS:
                        cur.execute("SELECT set_config('statement_timeout', %s, true)",
                                    (str(SPARE_WRITE_STATEMENT_MS),))
                    cur.executemany(self._put_sql(), self._put_rows(provider, model, fingerprint, items))
                return True
        except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled) as exc:
            if lock_wait_ms != SPARE_WRITE_WAIT_MS:
                return None  # cache_put: written in the build's transaction instead, as before
            log.debug("postgres: a commit of vectors skipped (%s)", " ".join(str(exc).split()))
            return False
        except (BackendError, psycopg.Error) as exc:
            self.spare = None  # not tried again in this sync (each try could wait out a connect timeout)
            log.info("postgres: the vectors computed in this sync are kept in its transaction (no spare "
                     "connection: %s)", " ".join(str(exc).split()))
            return None

    def cache_prune(self, max_entries: int) -> int:
        """The cache is shared by the fleet: prune only the least recently used entries beyond the limit."""
        with self.conn.transaction():
            n = int(self._q("SELECT count(*) FROM {s}.embedding_cache").fetchone()[0])
            extra = n - max_entries
            if extra <= 0:
                return 0
            self._q("DELETE FROM {s}.embedding_cache WHERE ctid IN (SELECT ctid FROM {s}.embedding_cache "
                    "ORDER BY used_at LIMIT %s)", (extra,))
        return extra

