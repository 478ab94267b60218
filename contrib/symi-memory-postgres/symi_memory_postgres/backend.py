"""The ``postgres`` backend: the core's sync and scoring over rows on a PostgreSQL + pgvector server.

Files stay the truth on the agent's machine: a sync lists and chunks them
with the core's :class:`~symi_memory.indexing.Indexer` and writes the rows to
the server. A search is one SQL statement (keyword side on a GIN-indexed
``tsvector``, vector side on an HNSW-indexed pgvector column, both filtered to
the agent's owners) whose rows the core's :func:`~symi_memory.fusion.score_hits`
fuses; the core pipeline does the rest, as for every backend.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from symi_memory import forking
from symi_memory.chunking import CHARS_PER_TOKEN
from symi_memory.errors import BackendError, EmbeddingError
from symi_memory.fusion import score_hits
from symi_memory.indexing import (
    PARTIAL_META,
    STOP_WORDS,
    Indexer,
    SyncCancelled,
    SyncScheduler,
    all_finite,
    cjk_bigrams,
    fold,
    idf,
)
from symi_memory.specs import DEFAULT_CALIBRATION, BackendContext, ScoreCalibration
from symi_memory.types import (
    BackendResult,
    Candidate,
    Fallback,
    ReadResult,
    SearchQuery,
    SyncProgress,
    SyncReport,
)
from symi_memory.workspace import PathRules

from .settings import PgSettings
from .store import ANALYZE_TIMEOUT_S, PgStore, analyze_after_sync, ensure_schema, hnsw_index_name, lock_key
from .terms import token_expressions, word_terms

__all__ = ["PostgresBackend", "create_backend"]

log = logging.getLogger("symi_memory.postgres")

INSTALL_HINT = 'the postgres backend needs psycopg 3 and psycopg_pool: pip install "psycopg[binary]" psycopg_pool'
KEYWORD_OVERFETCH = 3
DF_CAP = 20_000
PRUNE_MIN_CHUNKS = 50
SHARED_PREFIX = "@"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


@attrs.define
class Owner:
    """One set of rows this agent syncs and searches: its own, or a shared scope's (``@NAME``)."""

    name: str
    prefix: str  # prepended to paths in results ("" or "@team/")
    indexer: Indexer
    rules: PathRules


@attrs.define
class PostgresBackend:
    agent: Any
    settings: PgSettings
    pool: Any
    choice: Any
    owners: list[Owner]
    scheduler: SyncScheduler | None = None
    last_error: str | None = None
    _schema_ready: bool = False
    _sync_lock: threading.Lock = attrs.field(factory=threading.Lock)
    _closing: bool = False
    _pool_behind: bool = False
    _held: int = 0  # connections this process holds (pooled or direct): at most poolSize
    _held_lock: threading.Lock = attrs.field(factory=threading.Lock)
    _sql_cache: dict[tuple[Any, ...], str] = attrs.field(factory=dict)
    #: The rebuilds :meth:`_announce_rebuild` logged: once each, as a rebuild that waits (its workspace away) is
    #: tried again at every sync.
    _announced: set[tuple[str, str]] = attrs.field(factory=set)
    watchdog: Any = None  # guard.Watchdog: cuts waits on a server that stopped answering
    #: (backend pid, backend_start, the sync's application_name) of sync sessions whose connection was lost: on a
    #: network path that dropped packets the server may keep them (and the owner's lock, the open transaction's
    #: row locks).
    _abandoned: list[tuple[int, Any, str]] = attrs.field(factory=list)
    on_synced: Callable[[SyncReport], None] | None = None  # NotifiesSyncs: `symi-memory watch` prints each sync
    #: Makes a pool like ``pool`` (not opened) for a watchdog: a forked child's own (:meth:`_after_fork_in_child`).
    make_pool: Callable[[Any], Any] | None = None
    #: A forked child's pool, opened at its first use (a child that never uses memory connects to nothing).
    _open_on_use: bool = False

    def __attrs_post_init__(self) -> None:
        forking.track(self)

    def _after_fork_in_child(self) -> None:
        """In a forked child: the pooled connections are the parent's sockets (a query on one would interleave with
        the parent's on the server), the pool's and the watchdog's threads are the parent's, and a lock they or a
        sync held stays held. The child gets a new pool and watchdog; the parent's pool is kept, never closed
        (closing would end the parent's sessions on the server)."""
        self._sync_lock, self._held_lock, self._held = threading.Lock(), threading.Lock(), 0
        if self.make_pool is None:
            return
        from .guard import Watchdog

        forking.keep(self.pool)
        self.watchdog = Watchdog()
        self.pool = self.make_pool(self.watchdog)
        self._open_on_use = True

    # ------------------------------------------------------------- plumbing

    def start(self) -> None:
        self.scheduler = SyncScheduler(agent=self.agent, run_sync=self._background_sync,
                                       check_stale=lambda for_search: self.is_stale(any_session_change=for_search))
        self.scheduler.start()

    @contextlib.contextmanager
    def _connection(self, timeout: float | None = None) -> Iterator[Any]:
        """A pooled connection; a connection of its own while the pool waits out its reconnect backoff.

        After an outage the pool retries with exponential backoff, so once the server is back it could
        wait about as long again (minutes) before it reconnects, every sync and search failing with
        "couldn't get a connection" meanwhile. When the pool does not hand one out in time, one direct
        attempt is made (its error, if any, says why); while the pool is behind, it is waited for
        only briefly, until it hands out a connection again.
        """
        from psycopg_pool import PoolTimeout

        wait = timeout or self.settings.connect_timeout
        size = self.settings.pool_size
        if self._open_on_use:
            with self._held_lock:
                if self._open_on_use:
                    self._open_on_use = False
                    self.pool.open(wait=False)
        try:
            conn = self.pool.getconn(timeout=min(wait, 0.05) if self._pool_behind and self._held < size else wait)
        except PoolTimeout:
            # Every connection in use (a busy process, not an outage): a direct one would pass poolSize.
            with self._held_lock:
                busy = self._held >= size
                self._held += 0 if busy else 1
            if busy:
                raise BackendError(f"postgres: all {size} connections of this process (memorySearch.store.postgres."
                                   f"poolSize) are in use; none came free within {wait:g} s "
                                   f"({self.settings.safe_dsn})") from None
            try:
                with self._connect() as direct:
                    self._pool_behind = True
                    yield direct
            finally:
                with self._held_lock:
                    self._held -= 1
            return
        self._pool_behind = False
        with self._held_lock:
            self._held += 1
        try:
            yield conn
        finally:
            with self._held_lock:
                self._held -= 1
            self.pool.putconn(conn)

    def _connect(self, answer_within: float | None = None) -> Any:
        """A connection of its own (not pooled), its waits bounded like the pool's."""
        from .guard import GuardedConnection

        conn = GuardedConnection.connect(self.settings.dsn, **connect_kwargs(self.settings))
        _bound(conn, self.watchdog, self.settings.search_timeout if answer_within is None else answer_within,
               SEARCH_SETTING)
        return conn

    def _ensure(self, conn: Any, within: float | None = None) -> None:
        if not self._schema_ready:
            ensure_schema(conn, self.settings.schema, within=within or self.settings.search_timeout)
            self._claim_workspace(conn)
            self._schema_ready = True

    def _claim_workspace(self, conn: Any) -> None:
        """Make the agent's rows this workspace's own, or move to rows of the workspace's own.

        Rows are scoped by agent id, so one agent id used with two workspaces (two hosts with
        different folders, or one host serving several) would share them: each sync would delete
        the other workspace's files, and a search could answer from the wrong workspace. The first
        workspace to sync claims the agent's rows (``owner_meta`` key ``workspace``, one statement,
        so of two claiming at once exactly one wins). A workspace at another path gets rows of its
        own under ``<agentId>-ws-<hash>``. The same path on any host is the same workspace (a shared
        volume, or a pod restarted under a new host name). A claim recorded on this host for a folder
        that no longer exists (moved or removed) is taken over by a workspace without rows of its own.
        """
        own = self.owners[0]
        here = str(self.agent.workspace)
        host = socket.gethostname()
        base = self.settings.owner
        digest = hashlib.sha256(here.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        mine = f"{base}-ws-{digest}"
        for name in (base, mine):
            claimed = _claim(conn, self.settings.schema, name, {"path": here, "host": host})
            path = str(claimed.get("path", ""))
            gone_here = claimed.get("host") == host and not os.path.isdir(path)
            if name == base and path != here and _recorded(conn, self.settings.schema, mine).get("path") == here:
                continue  # rows of its own already: kept, not traded for the agent's (a full reindex)
            if path != here and (gone_here or name != base):
                log.info("postgres rows of %s belonged to workspace %s, which is gone; %s takes them over",
                         name, path, here)
                # Compare-and-set: of two workspaces taking over one gone claim at once, one wins.
                if _take_over(conn, self.settings.schema, name, claimed, {"path": here, "host": host}):
                    path = here
                else:
                    path = str(_recorded(conn, self.settings.schema, name).get("path", ""))
            if path == here:
                break
            log.info("postgres rows of agent %r belong to workspace %s; workspace %s uses owner %s-ws-%s",
                     base, path, here, base, digest)
        if own.name != name:
            own.name = name
            self.settings = attrs.evolve(self.settings, owner=name)

    def _failure(self, exc: BaseException) -> str:
        return self._explain(exc)[0]

    def _explain(self, exc: BaseException) -> tuple[str, bool]:
        """One line saying why, and whether the server answered at all (``status``: ``server.reachable``)."""
        if isinstance(exc, BackendError):  # the server answered: no pgvector, a newer schema, a timeout
            return self.settings.scrub(str(exc)), True
        from psycopg_pool import PoolTimeout

        if isinstance(exc, PoolTimeout):
            exc = self._diagnose() or exc
        state = getattr(exc, "sqlstate", None) or ""
        text = _one_line(exc)
        hint = ""
        # No SQLSTATE (the connection broke), connection exceptions (08) and shutdowns (57P): the server is gone,
        # unless it answered the connection attempt with a refusal (a wrong password, an unknown database or role).
        if (not state or state.startswith("08")) and "failed: FATAL:" in text:
            what, reachable = "server refused the connection", True
        elif not state or state.startswith(("08", "57P")):
            what, reachable = "server unreachable", False
        else:
            what, reachable = f"server error {state}", True
            if state == "42501" and "temporary" in text:
                hint = ("; grant the role TEMPORARY on the database (a sync stages its rows in a temporary table)")
            elif state == "42501":
                hint = (f"; grant the role CREATE on the database (schema {self.settings.schema} and its tables are "
                        "created on first use), or the privileges on that schema and its tables")
        return self.settings.scrub(f"postgres {what} ({self.settings.safe_dsn}): {text}{hint}"), reachable

    def _diagnose(self) -> BaseException | None:
        """The pool only says it timed out; one direct attempt tells why (refused, unknown host, auth, ...)."""
        import psycopg

        try:
            psycopg.connect(self.settings.dsn, connect_timeout=max(1, int(self.settings.connect_timeout))).close()
        except psycopg.Error as exc:
            return exc
        return None

    def _transient(self) -> tuple[type[BaseException], ...]:
        import psycopg
        from psycopg_pool import PoolTimeout

        return (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout)

    def _server_errors(self) -> tuple[type[BaseException], ...]:
        import psycopg

        return (psycopg.Error,)

    def _with_conn(self, work: Callable[[Any], Any], *, timeout: float | None = None) -> Any:
        """Run the reads ``work(conn)`` (searches, status), each statement bounded by ``searchTimeout``;
        once more on a fresh connection when the pooled one died (a server restart).

        Without the bound a search waited as long as another session held a lock on the tables (a
        ``VACUUM FULL``, a ``REINDEX``, an ``ALTER TABLE``): the caller hung. A server that stopped
        answering altogether (paused, frozen, a network path dropping packets) enforces no
        ``statement_timeout``: each wait for it is cut ``WATCHDOG_GRACE`` seconds after (guard.py).
        """
        import psycopg

        from .guard import ServerSilent

        transient = self._transient()
        limit = self.settings.search_timeout
        for attempt in (1, 2):
            connected = False
            try:
                with self._connection(timeout) as conn:
                    connected = True
                    _bound(conn, self.watchdog, limit, SEARCH_SETTING)
                    self._ensure(conn)
                    with conn.transaction():
                        conn.execute(f"SET LOCAL statement_timeout = {max(1, int(limit * 1000))}")
                        return work(conn)
            except (psycopg.errors.QueryCanceled, ServerSilent) as exc:
                self._after_silence(exc)
                raise self._late(limit, SEARCH_SETTING) from None
            except transient:
                if attempt == 2 or not connected:  # no connection to be had: trying again would wait as long
                    raise
                self._after_lost(conn)
        raise AssertionError("unreachable")

    def _after_silence(self, exc: BaseException) -> None:
        """A wait was cut off (the server did not answer it): every connection opened before is suspect (a frozen
        server, a network path that went away), so the pool opens new ones rather than hand those out again."""
        from .guard import ServerSilent

        drain = getattr(self.pool, "drain", None)  # psycopg_pool 3.3
        if isinstance(exc, ServerSilent) and drain is not None:
            drain()

    def _late(self, seconds: float, setting: str, *, lock: bool = False) -> BackendError:
        what = (f"waited {seconds:g} s for a lock another session holds" if lock else
                f"the server did not answer within {seconds:g} s")
        why = ("a lock held by another session" if lock else
               "a lock held by another session, an overloaded, paused or unreachable server")
        return BackendError(f"postgres: {what} ({setting}; {why}) ({self.settings.safe_dsn})")

    # ------------------------------------------------------------------ sync

    def sync(self, *, reason: str = "manual", force: bool = False,
             progress: Callable[[SyncProgress], None] | None = None) -> SyncReport:
        with self._sync_lock:
            if self._closing:
                raise SyncCancelled("sync cancelled: the memory manager is closing")
            started = time.perf_counter()
            changes = self.scheduler.changes if self.scheduler else 0
            reports: list[SyncReport] = []
            try:
                with self._sync_connection() as conn:
                    self._ensure(conn, self.settings.sync_timeout)
                    for owner in self.owners:
                        reports.append(self._sync_owner(conn, owner, reason, force, progress))
                    self._store(conn, self.owners[0].name).heal_hnsw()
                    # The planner's statistics of what the sync wrote, now rather than at autovacuum's next round.
                    written = {o.name: r.chunks_written for o, r in zip(self.owners, reports, strict=True)}
                    analyze_after_sync(conn, self.settings.schema, written,
                                       within=min(ANALYZE_TIMEOUT_S, max(1.0, self.settings.sync_timeout / 2)))
            except SyncCancelled:
                raise
            except (BackendError, *self._transient(), *self._server_errors()) as exc:
                msg = self._failure(self._sync_late(exc) or exc)
                self.last_error = f"sync failed, the last synced state stays searchable: {msg}"
                raise BackendError(f"postgres: {self.last_error}" if not msg.startswith("postgres:") else
                                   f"{msg} (sync failed; the last synced state stays searchable)") from None
            self.last_error = None
        if self.scheduler:
            self.scheduler.mark_clean(changes)
        report = _merge(reports, reason, time.perf_counter() - started)
        if self.on_synced:
            self.on_synced(report)
        return report

    def _sync_late(self, exc: BaseException) -> BackendError | None:
        """A sync's statement past ``syncTimeout`` (or its wait for a server that stopped answering), as one line."""
        import psycopg

        from .guard import ServerSilent

        limit = self.settings.sync_timeout
        self._after_silence(exc)
        if isinstance(exc, ServerSilent):
            return self._late(exc.seconds - WATCHDOG_GRACE if exc.setting == SYNC_SETTING else exc.seconds,
                              exc.setting)
        if isinstance(exc, psycopg.errors.LockNotAvailable):
            return self._late(limit, SYNC_SETTING, lock=True)
        if isinstance(exc, psycopg.errors.QueryCanceled):
            return self._late(limit, SYNC_SETTING)
        return None

    @contextlib.contextmanager
    def _sync_connection(self) -> Iterator[Any]:
        """A connection set up for a sync (``_sync_session``); another one while those the pool hands out turn out
        dead before the sync began (a server restarted since they were opened: they look idle until used)."""
        import psycopg

        from .guard import ServerSilent

        for attempt in range(self.settings.pool_size + 1):
            started, conn = False, None
            try:
                with self._connection() as conn, self._sync_session(conn):
                    started = True
                    yield conn
                return
            except psycopg.OperationalError as exc:
                if (started or conn is None or isinstance(exc, ServerSilent) or not conn.closed
                        or attempt == self.settings.pool_size):
                    raise
                self._after_lost(conn)

    def _after_lost(self, conn: Any) -> None:
        """``conn`` turned out dead (a server restart): the pool's other connections opened before it are too."""
        drain = getattr(self.pool, "drain", None)  # psycopg_pool 3.3
        if conn.closed and drain is not None:
            drain()

    @contextlib.contextmanager
    def _sync_session(self, conn: Any) -> Iterator[None]:
        """Bound every statement of the sync on ``conn`` by ``syncTimeout`` (server and client side), and end the
        server sessions of syncs whose connection was lost before (they may hold this owner's locks)."""
        import psycopg

        limit = self.settings.sync_timeout
        _bound(conn, self.watchdog, limit, SYNC_SETTING)
        ms = str(max(1, int(limit * 1000)))
        # A name no other session has (application_name is the server's to show, and a pooler's to change when
        # it hands the session to another client): only a session still showing it is ended as ours.
        name = f"{SYNC_APPLICATION_NAME} {os.getpid()} {secrets.token_hex(8)}"
        # The server's keepalives too: a session whose client vanished (a network path gone) ends within
        # about a minute, letting go of its locks, instead of after the kernel's two hours.
        pid, started = conn.execute(
            "SELECT pg_backend_pid(), (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()), "
            "set_config('application_name', %s, false), "
            "set_config('statement_timeout', %s, false), set_config('lock_timeout', %s, false), "
            "set_config('tcp_keepalives_idle', '20', false), set_config('tcp_keepalives_interval', '10', false), "
            "set_config('tcp_keepalives_count', '3', false)", (name, ms, ms)).fetchone()[:2]
        self._end_abandoned(conn)
        try:
            yield
        finally:
            if conn.closed:
                self._abandoned.append((pid, started, name))
            else:
                try:
                    conn.execute("RESET statement_timeout; RESET lock_timeout; RESET application_name")
                except psycopg.Error:
                    conn.close()  # never back to the pool with a sync's bounds
            _bound(conn, self.watchdog, self.settings.search_timeout, SEARCH_SETTING)

    def _end_abandoned(self, conn: Any) -> None:
        """Terminate the server sessions of this process's earlier syncs that lost their connection, if still there.

        A network path that dropped packets leaves the server's side of the connection open: that session keeps
        the owner's advisory lock and its transaction's row locks, and the next sync would wait for them.

        Only a session still showing the lost sync's own application_name is ended. Behind a pooler (pgbouncer,
        Odyssey) the same server session, pid and backend_start alike, may serve another client once ours is
        gone: the pooler resets the session (DISCARD ALL or RESET ALL, or sets that client's application_name),
        so it no longer shows the name, and is left alone.
        """
        import psycopg

        gone, self._abandoned = self._abandoned, []
        for pid, started, name in gone:
            try:
                ended = conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = %s "
                                     "AND backend_start = %s AND application_name = %s",
                                     (pid, started, name)).fetchone()
            except psycopg.errors.InsufficientPrivilege as exc:
                log.warning("postgres: the session of an earlier sync (pid %d) lost its connection and could not be "
                            "ended (%s); this sync may wait for its locks", pid, _one_line(exc))
                continue
            if ended and ended[0]:
                log.info("postgres: ended the server session of an earlier sync (pid %d) that lost its connection", pid)
            else:
                log.info("postgres: the server session of an earlier sync (pid %d) that lost its connection is gone "
                         "or serves another client now (a pooler's): left alone", pid)

    @contextlib.contextmanager
    def _long_statement(self, conn: Any) -> Iterator[None]:
        """No server-side bound for the statements inside (an HNSW build may rightly take minutes), and a client-side
        one only while the server answers a fresh connection (``_alive``): a frozen server is still cut off."""
        conn.execute("SELECT set_config('statement_timeout', '0', false), set_config('lock_timeout', '0', false)")
        conn.alive = self._alive
        try:
            yield
        finally:
            conn.alive = None
            if not conn.closed:
                ms = str(max(1, int(self.settings.sync_timeout * 1000)))
                conn.execute("SELECT set_config('statement_timeout', %s, false), "
                             "set_config('lock_timeout', %s, false)", (ms, ms))

    def _alive(self) -> bool:
        """Whether the server answers a fresh connection within ``connectTimeout`` (a login it refuses counts)."""
        import psycopg

        try:
            with self._connect(self.settings.connect_timeout) as probe:
                probe.execute("SELECT 1")
        except psycopg.Error as exc:
            return "FATAL:" in str(exc)  # it answered: too many clients, starting up, shutting down
        return True

    def _sync_owner(self, conn: Any, owner: Owner, reason: str, force: bool,
                    progress: Callable[[SyncProgress], None] | None) -> SyncReport:
        # A session-level advisory lock per owner: two processes (on any hosts) syncing the same agent or
        # scope take turns; the second then finds the first one's rows and has little left to do.
        key = lock_key("owner", self.settings.schema, owner.name)
        _acquire(conn, key, owner.name, owner.indexer.cancel)
        try:
            owner.indexer.store = self._store(conn, owner.name)
            self._announce_rebuild(owner)
            return owner.indexer.sync(reason=reason, force=force, progress=progress)
        finally:
            if not conn.closed:
                try:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
                except Exception:  # the session is gone, and its locks with it
                    pass

    def _store(self, conn: Any, owner: str) -> PgStore:
        return PgStore(conn=conn, schema=self.settings.schema, owner=owner,
                       hnsw=(self.settings.m, self.settings.ef_construction),
                       long_statement=lambda: self._long_statement(conn), spare=self._spare_connection)

    @contextlib.contextmanager
    def _spare_connection(self) -> Iterator[Any]:
        """A pooled connection beside the sync's, for the vectors a full build commits apart from its transaction
        (:meth:`PgStore.cache_put`); None when every connection this process may hold (poolSize) is in use."""
        if self._held >= self.settings.pool_size:
            yield None
            return
        with self._connection(timeout=min(1.0, self.settings.connect_timeout)) as conn:
            yield conn

    def _announce_rebuild(self, owner: Owner) -> None:
        raw = owner.indexer.store.get_meta("identity")
        if raw is None:
            return
        stored = json.loads(raw)
        now = owner.indexer.index_identity()
        if stored != now:
            changed = ", ".join(f"{k} {stored.get(k)!r} -> {now[k]!r}" for k in now if stored.get(k) != now[k])
            if (owner.name, changed) in self._announced:
                return
            self._announced.add((owner.name, changed))
            log.warning("postgres: %s's index was built with other settings (%s): rebuilding it; until it lands "
                        "searches use its keyword side only", owner.name, changed)

    def _background_sync(self, reason: str) -> None:
        if self._closing:
            return
        try:
            self.sync(reason=reason)
        except SyncCancelled:
            pass
        except Exception as exc:  # a background sync must never crash the host
            log.warning("background sync (%s) failed: %s", reason, self.settings.scrub(_one_line(exc)))

    def is_stale(self, *, retry_pending: bool = True, any_session_change: bool = True,
                 scans: dict[str, Any] | None = None) -> bool:
        """True when any file differs from the server's rows or the index identity changed.

        As builtin-sqlite's: a transcript that grew counts at once, unless ``any_session_change``
        is false (the background check), then only past the delta thresholds. Raises
        :class:`~symi_memory.errors.BackendError` (one line) when the server cannot be reached. ``scans``: each
        owner's :meth:`~symi_memory.indexing.Indexer.scan` by name, when the caller has just listed.
        """
        try:
            return bool(self._with_conn(lambda conn: self._stale_on(conn, retry_pending=retry_pending,
                                                                   any_session_change=any_session_change, scans=scans)))
        except (*self._transient(), *self._server_errors()) as exc:
            raise BackendError(self._failure(exc)) from None

    def _stale_on(self, conn: Any, *, retry_pending: bool = True, any_session_change: bool = True,
                  scans: dict[str, Any] | None = None) -> bool:
        """:meth:`is_stale`, read through ``conn`` (in the caller's transaction)."""
        for owner in self.owners:
            store = self._store(conn, owner.name)
            ident = store.get_meta("identity")
            if ident is None or json.loads(ident) != owner.indexer.index_identity():
                return True
            # A copy reads through this check's connection: the owner's Indexer may be syncing (another
            # thread) through its store, which must stay on the sync's connection.
            indexer = copy.copy(owner.indexer)
            indexer.store = store
            # Listed with what cannot be listed now: a folder that cannot be read keeps its files, not "removed".
            # (an owner claimed since, under another name, is listed now)
            files, absent = (scans or {}).get(owner.name) or indexer.scan()
            changed, removed = indexer.changed_files(
                files, retry_pending=retry_pending and indexer.retry_due(), retry_failed=False, absent=absent)
            if removed or any(f.source != "sessions" for f in changed):
                return True
            if any_session_change and changed:
                return True
            if changed:
                indexed = store.files()
                if any(owner.indexer.session_due(f, indexed.get(f.path)) for f in changed):
                    return True
        return False

    def _stale_in(self, conn: Any, scans: dict[str, Any]) -> bool:
        """Whether the index is stale, for ``status``: read in its transaction (the snapshot its counts are of). A
        check that fails says so (True: the next sync looks again), never "clean"."""
        try:
            with conn.transaction():  # a savepoint: a failed check leaves the status's transaction usable
                return self._stale_on(conn, scans=scans)
        except Exception as exc:
            log.info("postgres: could not tell whether the index is up to date (%s: %s); status says dirty",
                     type(exc).__name__, exc)
            return True

    # ---------------------------------------------------------------- search

    def search(self, query: SearchQuery) -> BackendResult:
        if self.scheduler:
            self.scheduler.on_search(query.session_key)
        provider = self.choice.provider
        qvec: list[float] | None = None
        if provider is not None:
            try:
                qvec = provider.embed_query(query.text)
            except EmbeddingError as exc:
                log.warning("query embedding failed (%s); keyword results only", exc)
            except Exception as exc:
                # A third-party provider's own exception (its HTTP client's, its parser's) is a failed call too, as
                # on the builtin backends; a builtin's is a bug of symi-memory, raised.
                if not getattr(self.choice, "guarded", False):
                    raise
                log.warning("query embedding by %s failed (%s: %s); keyword results only", provider.id,
                            type(exc).__name__, exc)
        if qvec is not None and not any(qvec):
            qvec = None
        if qvec is not None and provider is not None and not all_finite(qvec):
            # NaN or infinity (a provider's bug): pgvector refuses such a vector, and the search answered nothing.
            log.warning("query embedding by %s held non-finite values (NaN or infinity); keyword results only",
                        provider.id)
            qvec = None
        try:
            return self._with_conn(lambda conn: self._search(conn, query, qvec), timeout=self.settings.connect_timeout)
        except (BackendError, *self._transient(), *self._server_errors()) as exc:
            msg = self._failure(exc)
            log.warning("postgres: search answered nothing: %s", msg)
            return BackendResult(candidates=(), mode="unavailable", provider=provider.id if provider else "none",
                                 model=provider.model if provider else None,
                                 fallback=Fallback(from_="postgres", reason=msg))

    def _sql(self, *, text: bool, vector: bool, dims: int | None) -> str:
        key = (text, vector, dims)
        cached = self._sql_cache.get(key)
        if cached is not None:
            return cached
        s = self.settings.schema
        if text:
            # Document frequency of each query token among the agent's chunks (capped), and their total: BM25's
            # IDF, and which tokens are too common to match on (in more than half the chunks, as builtin-sqlite).
            ctes = [
                f"tok AS (SELECT u.ord, u.expr, (SELECT count(*) FROM (SELECT 1 FROM {s}.chunks c "
                "WHERE c.owner = ANY(%(owners)s) AND c.source = ANY(%(sources)s) "
                f"AND c.terms @@ to_tsquery('simple', u.expr) LIMIT {DF_CAP}) x) AS n "
                "FROM unnest(%(exprs)s::text[]) WITH ORDINALITY AS u(expr, ord))",
                f"tot AS (SELECT coalesce(sum(f.chunks), 0)::bigint AS n FROM {s}.files f "
                "WHERE f.owner = ANY(%(owners)s) AND f.source = ANY(%(sources)s))",
                "q AS (SELECT to_tsquery('simple', coalesce((SELECT string_agg(tok.expr, ' | ') FROM tok, tot "
                f"WHERE tok.n > 0 AND (tok.n <= tot.n / 2 OR tot.n < {PRUNE_MIN_CHUNKS} "
                "OR tok.n = (SELECT min(t2.n) FROM tok t2 WHERE t2.n > 0))), '')) AS q)",
            ]
            stats = "(SELECT array_agg(n ORDER BY ord) FROM tok), (SELECT n FROM tot)"
        else:
            ctes = ["q AS (SELECT ''::tsquery AS q)"]
            stats = "NULL::bigint[], NULL::bigint"
        sides = []
        if text:
            ctes.append(
                f"kw AS (SELECT c.id FROM {s}.chunks c, q WHERE c.owner = ANY(%(owners)s) "
                "AND c.source = ANY(%(sources)s) AND c.terms @@ q.q "
                "ORDER BY ts_rank_cd(c.terms, q.q, 32) DESC, c.id LIMIT %(klim)s)")
            sides.append("SELECT id FROM kw")
        vexpr = f"(c.embedding::vector({dims}))" if dims else ""
        comparable = "NULL::text[]"
        if vector:
            # Which owners' vectors come from the query's provider/model/chunking: their recorded identity, read
            # in the same snapshot as the vectors (a rebuild with another model of the same width commits rows and
            # identity together). The vector side itself filters by the owners assumed comparable (a literal
            # array: the planner weighs it by the column's statistics, choosing HNSW or an exact scan as before);
            # _search runs the statement again in the rare case the two differ.
            ctes.append(
                f"vo AS (SELECT coalesce(array_agg(m.owner), '{{}}'::text[]) AS a FROM {s}.owner_meta m "
                "JOIN unnest(%(owners)s::text[], %(idents)s::text[]) AS u(o, i) ON m.owner = u.o AND m.value = u.i "
                "WHERE m.key = 'identity')")
            comparable = "(SELECT a FROM vo)"
            ctes.append(
                f"vec AS (SELECT c.id FROM {s}.chunks c WHERE c.dims = {dims} AND c.owner = ANY(%(vowners)s) "
                f"AND c.source = ANY(%(sources)s) ORDER BY {vexpr} <=> %(qv)s::vector({dims}) LIMIT %(vlim)s)")
            sides.append("SELECT id FROM vec")
        tscore = "CASE WHEN c.terms @@ q.q THEN ts_rank_cd(c.terms, q.q, 32) END"
        vscore = (f"CASE WHEN c.dims = {dims} AND c.owner = ANY(%(vowners)s) "
                  f"THEN 1 - ({vexpr} <=> %(qv)s::vector({dims})) END") if vector else "NULL::float8"
        in_kw = "c.id IN (SELECT id FROM kw)" if text else "false"
        in_vec = "c.id IN (SELECT id FROM vec)" if vector else "false"
        # One row at least (id NULL when nothing matched): it carries the statistics and the comparable owners.
        sql = (f"WITH {', '.join(ctes)}, ids AS ({' UNION '.join(sides)}), hits AS (SELECT c.id, c.cid, c.owner, "
               f"c.path, c.source, c.start_line, c.end_line, c.text, {tscore} AS t, {vscore} AS v, f.mtime, "
               f"{in_kw} AS in_kw, {in_vec} AS in_vec FROM ids JOIN {s}.chunks c ON c.id = ids.id CROSS JOIN q "
               f"LEFT JOIN {s}.files f ON f.owner = c.owner AND f.path = c.path) "
               f"SELECT h.*, {stats}, {comparable} FROM (SELECT 1) one LEFT JOIN hits h ON true")
        self._sql_cache[key] = sql
        return sql

    def _search(self, conn: Any, query: SearchQuery, qvec: list[float] | None) -> BackendResult:
        hybrid = self.agent.memory_search["query"]["hybrid"]
        sources = [s for s in query.sources if s in ("memory", "sessions")] or ["memory"]
        provider = self.choice.provider
        # Stop words carry nothing to look for (a query of only those finds nothing, as on builtin-sqlite).
        exprs = token_expressions(query.text, skip=STOP_WORDS)
        if not exprs:
            # The mode the search would have run in (behaviour §5 names four; "none" was a fifth no caller knew).
            mode = "fts-only" if provider is None else "hybrid" if hybrid["enabled"] else "vector"
            return BackendResult(candidates=(), mode=mode, provider=provider.id if provider else "none",
                                 model=provider.model if provider else None, fallback=self.choice.fallback)
        tsq = " | ".join(dict.fromkeys(exprs.values())) or None
        use_vec = qvec is not None
        use_text = (hybrid["enabled"] or not use_vec) and tsq is not None
        owners = [o.name for o in self.owners]
        # Owners whose rows were built by this provider/model/chunking: their vectors compare with the query's.
        ident = self._identities()
        empty = BackendResult(candidates=(), mode="fts-only" if not use_vec else ("hybrid" if hybrid["enabled"] else "vector"),
                              provider=provider.id if provider else "none", model=provider.model if provider else None,
                              fallback=self.choice.fallback)
        if not use_text and not use_vec:
            return empty
        limit = query.candidate_limit
        params: dict[str, Any] = {"exprs": list(exprs.values()), "owners": owners, "sources": sources,
                                  "klim": limit * KEYWORD_OVERFETCH}
        if use_vec:
            assert qvec is not None
            params.update(qv="[" + ",".join(repr(float(x)) for x in qvec) + "]", vlim=limit)
        sql = self._sql(text=use_text, vector=use_vec, dims=len(qvec) if qvec else None)
        comparable = list(ident)
        if use_vec:
            params.update(owners=list(ident), idents=list(ident.values()))
            # Inside _with_conn's transaction: one round trip for both.
            conn.execute(f"SET LOCAL hnsw.ef_search = {int(self.settings.ef_search)}; "
                         "SET LOCAL hnsw.iterative_scan = relaxed_order")
            comparable = self._vowners if self._vowners is not None else list(ident)
        for attempt in range(3):
            params["vowners"] = comparable
            rows = conn.execute(sql, params).fetchall()
            if not use_vec:
                break
            # The owners whose vectors the statement compared must be comparable in its own snapshot; they differ
            # only right after a rebuild with another model (here or in another process): run it again with those
            # (a third time with none, should they change once more meanwhile).
            now = list(rows[0][-1] or [])
            self._vowners = now
            if set(comparable) == set(now) or (attempt and set(comparable) <= set(now)):
                break
            comparable = now if attempt == 0 else []
        matched: dict[int, str] = {}
        keyword: set[int] = set()
        vec_hits: dict[int, float] = {}
        texts: dict[int, str] = {}
        info: dict[int, tuple[Any, ...]] = {}
        dfs: list[int] = []
        total = 0
        for (rid, cid, owner, path, source, start, end, body, t, v, mtime, in_kw, in_vec, df, tot, _) in rows:
            dfs, total = list(df or []), int(tot or 0)
            if rid is None:  # nothing matched: the row only carries the statistics
                continue
            info[rid] = (cid, owner, path, source, start, end, body, mtime)
            texts[rid] = body
            if t is not None:
                matched[rid] = body
                if in_kw:
                    keyword.add(rid)
            if v is not None and (in_vec or hybrid["enabled"]):
                vec_hits[rid] = float(v)
        use_vec = use_vec and bool(comparable)
        terms = list(exprs)
        # Each query term's IDF among the agent's chunks (document counts from the server): the same
        # query-normalised BM25 and calibration as builtin-sqlite, so minScore means the same here.
        weights = {t: idf(n, total) for t, n in zip(terms, dfs, strict=True)} if len(dfs) == len(terms) else {}
        scored = score_hits(query.text, hybrid, texts=texts, keyword_ids=keyword, vector_hits=vec_hits,
                            term_weights=weights, term_counts=lambda k: _term_counts(texts[k], terms),
                            chunk_chars=max(1, int(self.agent.memory_search["chunking"]["tokens"])) * CHARS_PER_TOKEN,
                            calibration=self._calibration(), use_vector=use_vec)
        mode, text_scores, idents = scored.mode, scored.text_scores, scored.identifiers
        prefixes = {o.name: o.prefix for o in self.owners}
        ordered = scored.order()  # equal scores by the fused score before the exact-match floor
        candidates = tuple(
            Candidate(id=prefixes.get(info[k][1], "") + info[k][0], path=prefixes.get(info[k][1], "") + info[k][2], source=info[k][3],
                      start_line=info[k][4], end_line=info[k][5], text=info[k][6], score=score,
                      vector_score=scored.vector_scores.get(k), text_score=text_scores.get(k), mtime=info[k][7],
                      identifier_match=k in idents)
            for k, score in ordered
        )
        return attrs.evolve(empty, candidates=candidates, mode=mode,
                            query_vector=tuple(qvec) if use_vec and qvec is not None else None)

    def _calibration(self) -> ScoreCalibration:
        """The active provider's declared cosine calibration (the documented default when it declares none)."""
        provider = self.choice.provider
        plugins = self.owners[0].indexer.plugins if self.owners else None
        if provider is None or plugins is None:
            return DEFAULT_CALIBRATION
        spec = plugins.providers.get(provider.id)
        # No line vectors here: the provider's fit for chunk vectors alone, where it declares one.
        return spec.calibration_for(provider.model, line_aware=False) if spec is not None else DEFAULT_CALIBRATION

    # ------------------------------------------------ supersession and dedup

    #: The owners whose recorded identity the last search found equal to this process's (None: not searched yet).
    _vowners: list[str] | None = None

    def _identities(self) -> dict[str, str]:
        """Each owner's index identity as its sync records it (owner_meta ``identity``): rows built with it hold
        vectors comparable with this process's."""
        return {o.name: json.dumps(o.indexer.index_identity(), sort_keys=True) for o in self.owners}

    def _split_id(self, cid: str) -> tuple[str, str]:
        """A candidate id back to (owner, chunk id): shared scopes' ids carry their ``@NAME/`` prefix."""
        if cid.startswith(SHARED_PREFIX) and "/" in cid:
            scope, rest = cid.split("/", 1)
            return scope, rest
        return self.settings.owner, cid

    def candidate_vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """Stored vectors of these candidates (``StoredVectors``), read from the server, never re-embedded.

        Only vectors comparable with this agent's (owners indexed by the current provider and model)
        come back; a candidate without one is judged without it. The server unreachable: none.
        """
        wanted = {cid: self._split_id(cid) for cid in ids}
        if not wanted:
            return {}
        ident = self._identities()

        def work(conn: Any) -> dict[str, list[float]]:
            owners = sorted({o for o, _ in wanted.values() if o in ident})
            if not owners:
                return {}
            rows = conn.execute(f"SELECT owner, cid, embedding::real[] FROM {self.settings.schema}.chunks "
                                f"WHERE owner = ANY(%s) AND cid = ANY(%s) AND embedding IS NOT NULL AND {_comparable(self.settings.schema)}",
                                (owners, sorted({c for _, c in wanted.values()}), list(ident),
                                 list(ident.values()))).fetchall()
            got = {(o, c): list(v) for o, c, v in rows}
            return {cid: got[key] for cid, key in wanted.items() if key in got}

        try:
            return dict(self._with_conn(work, timeout=self.settings.connect_timeout))
        except (BackendError, *self._transient(), *self._server_errors()) as exc:
            log.warning("postgres: stored vectors unavailable, supersession skipped: %s", self._failure(exc))
            return {}

    def candidate_line_vectors(self, ids: Sequence[str]) -> dict[str, list[tuple[int, int, Any]]]:
        """Stored line vectors of these candidates (``StoredLineVectors``), in line order, read from the server.

        Like ``candidate_vectors``: only owners indexed by the current provider and model; the server
        unreachable: none (supersession then judges by chunk vectors).
        """
        import numpy as np

        wanted = {cid: self._split_id(cid) for cid in ids}
        if not wanted:
            return {}
        ident = self._identities()

        def work(conn: Any) -> dict[str, list[tuple[int, int, Any]]]:
            owners = sorted({o for o, _ in wanted.values() if o in ident})
            if not owners:
                return {}
            rows = conn.execute(f"SELECT owner, cid, start_line, end_line, embedding FROM {self.settings.schema}."
                                f"chunk_units WHERE owner = ANY(%s) AND cid = ANY(%s) AND {_comparable(self.settings.schema)} "
                                "ORDER BY owner, cid, start_line, end_line",
                                (owners, sorted({c for _, c in wanted.values()}), list(ident),
                                 list(ident.values()))).fetchall()
            got: dict[tuple[str, str], list[tuple[int, int, Any]]] = {}
            for o, c, a, b, blob in rows:
                got.setdefault((o, c), []).append((int(a), int(b), np.frombuffer(bytes(blob), dtype=np.float32)))
            return {cid: got[key] for cid, key in wanted.items() if key in got}

        try:
            return dict(self._with_conn(work, timeout=self.settings.connect_timeout))
        except (BackendError, *self._transient(), *self._server_errors()) as exc:
            log.warning("postgres: stored line vectors unavailable, supersession judges by chunks: %s",
                        self._failure(exc))
            return {}

    def candidate_line_analysis(self, ids: Sequence[str]) -> dict[str, bytes]:
        """Line analyses stored when these candidates were indexed (``StoredLineAnalysis``), in one read.

        Chunks without one (written before schema version 4, filled at the owner's next sync) are left
        out, and so is every candidate while the server is unreachable: supersession analyses their text.
        """
        wanted = {cid: self._split_id(cid) for cid in ids}
        if not wanted:
            return {}

        def work(conn: Any) -> dict[str, bytes]:
            rows = conn.execute(f"SELECT owner, cid, lines FROM {self.settings.schema}.chunks WHERE owner = ANY(%s) "
                                "AND cid = ANY(%s) AND lines IS NOT NULL",
                                (sorted({o for o, _ in wanted.values()}), sorted({c for _, c in wanted.values()}))
                                ).fetchall()
            got = {(o, c): bytes(b) for o, c, b in rows}
            return {cid: got[key] for cid, key in wanted.items() if key in got}

        try:
            return dict(self._with_conn(work, timeout=self.settings.connect_timeout))
        except (BackendError, *self._transient(), *self._server_errors()) as exc:
            log.warning("postgres: stored line analyses unavailable, supersession analyses the text: %s",
                        self._failure(exc))
            return {}

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]] | None:
        """Embed ``texts`` with the index's provider (``EmbedsTexts``: dedup compares lines by meaning).

        None without a provider, or while this agent's stored vectors come from another provider or
        model (a rebuild pending): they would not be comparable.
        """
        provider = self.choice.provider
        if provider is None:
            return None
        own = self.owners[0]
        try:
            stored = self._with_conn(lambda conn: self._store(conn, own.name).get_meta("identity"),
                                     timeout=self.settings.connect_timeout)
        except (BackendError, *self._transient(), *self._server_errors()):
            stored = None
        if stored is None or json.loads(stored) != own.indexer.index_identity():
            return None
        return provider.embed_documents(list(texts))

    # ----------------------------------------------------------------- other

    def read_file(self, path: str, *, from_line: int | None = None, lines: int | None = None) -> ReadResult:
        for owner in self.owners:
            if owner.prefix and path.startswith(owner.prefix):
                got = owner.rules.read(path[len(owner.prefix):], from_line=from_line, lines=lines)
                return attrs.evolve(got, path=owner.prefix + got.path)
        return self.owners[0].rules.read(path, from_line=from_line, lines=lines)

    def status(self) -> dict[str, Any]:
        ms = self.agent.memory_search
        p = self.choice.provider
        base: dict[str, Any] = {
            "backend": "postgres",
            "plugin": "postgres",
            "workspaceDir": str(self.agent.workspace),
            "dsn": self.settings.safe_dsn,
            "schema": self.settings.schema,
            "agentId": self.settings.owner,
            "sharedScopes": list(self.settings.shared),
            "provider": p.id if p else "none",
            "model": p.model if p else None,
            "requestedProvider": self.choice.requested,
            "providerReason": self.choice.reason,
            "sources": list(ms.get("sources") or []),
            "extraPaths": list(ms.get("extraPaths") or []),
            "fallback": self.choice.fallback.to_dict() if self.choice.fallback else None,
        }
        try:
            # Each owner's files listed once, for the warnings and for dirty.
            scans = {owner.name: owner.indexer.scan() for owner in self.owners}
            def snapshot(conn: Any) -> tuple[dict[str, Any], bool]:
                # The counts and the comparison of the files with the rows read one snapshot: in separate
                # transactions, another process's sync committing in between made status say dirty: false beside
                # the counts from before that sync.
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                live = self._live_status(conn, scans)
                dirty = self.scheduler.dirty if self.scheduler else None
                return live, bool(dirty) or self._stale_in(conn, scans)

            live, dirty = self._with_conn(snapshot)
            # The rows this workspace uses, known once the server was reached (see _claim_workspace).
            base.update(live, dirty=dirty, agentId=self.settings.owner)
        except (BackendError, *self._transient(), *self._server_errors()) as exc:
            error, reachable = self._explain(exc)
            base["server"] = {"available": False, "reachable": reachable, "error": error}
        errors = [self.last_error] + [o.indexer.last_error for o in self.owners]
        base["lastError"] = next((e for e in errors if e), None)
        return base

    def _live_status(self, conn: Any, scans: dict[str, Any]) -> dict[str, Any]:
        s = self.settings.schema
        names = [o.name for o in self.owners]
        version = conn.execute("SHOW server_version").fetchone()[0]
        vector_version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        files = conn.execute(f"SELECT owner, source, count(*), coalesce(sum(chunks), 0), count(*) FILTER "
                             f"(WHERE bad_utf8 > 0), count(*) FILTER (WHERE hash LIKE 'pending:%%') FROM {s}.files "
                             "WHERE owner = ANY(%s) GROUP BY owner, source", (names,)).fetchall()
        chunk_rows = conn.execute(f"SELECT owner, count(*), count(embedding), max(dims) FROM {s}.chunks "
                                  "WHERE owner = ANY(%s) GROUP BY owner", (names,)).fetchall()
        cache = conn.execute(f"SELECT count(*) FROM {s}.embedding_cache").fetchone()[0]
        skipped = conn.execute(f"SELECT owner, path, reason FROM {s}.skipped WHERE owner = ANY(%s) ORDER BY path",
                               (names,)).fetchall()
        # Transcripts only partly indexed (their messages exceed sync.maxFileBytes), as each owner's last sync recorded.
        partial = sorted((o, path, why) for o, raw in conn.execute(
            f"SELECT owner, value FROM {s}.owner_meta WHERE owner = ANY(%s) AND key = %s", (names, PARTIAL_META)).fetchall()
            for path, why in _json_object(_json_object(raw).get("partial")).items())
        # Valid indexes only: one an interrupted build left invalid is not used (the next sync rebuilds it).
        indexes = {r[0] for r in conn.execute("SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                                              "WHERE i.indrelid = to_regclass(%s) AND i.indisvalid",
                                              (f"{s}.chunks",)).fetchall()}
        own = self.settings.owner
        dims = next((int(d) for o, _, _, d in chunk_rows if d and o == own), None) or next(
            (int(d) for _, _, _, d in chunk_rows if d), None)
        hnsw_name = hnsw_index_name(dims) if dims else None
        hnsw_used = False
        if dims and hnsw_name in indexes:
            # Ask the planner what this agent's vector query would run on now.
            probe = "[" + ",".join(["0"] * (dims - 1) + ["1"]) + "]"
            with conn.transaction():
                conn.execute(f"SET LOCAL hnsw.ef_search = {int(self.settings.ef_search)}")
                plan = conn.execute(
                    f"EXPLAIN SELECT id FROM {s}.chunks c WHERE c.dims = {dims} AND c.owner = ANY(%s) "
                    f"ORDER BY (c.embedding::vector({dims})) <=> %s::vector({dims}) LIMIT 24", (names, probe)).fetchall()
            hnsw_used = any(hnsw_name in r[0] for r in plan)
        per_owner = {o: {"files": 0, "chunks": 0} for o in names}
        source_counts: dict[str, dict[str, int]] = {}
        pending = bad = 0
        for o, source, n, nchunks, nbad, npending in files:
            per_owner[o]["files"] += n
            per_owner[o]["chunks"] += nchunks
            if o == own:
                source_counts[source] = {"files": n, "chunks": nchunks}
            pending += npending
            bad += nbad
        mine = {o: (n, nv) for o, n, nv, _ in chunk_rows}
        cache_cfg = self.agent.memory_search["cache"]
        warnings: list[str] = []
        for owner in self.owners:  # what cannot be listed or read now, as each owner's sync says it
            indexer = copy.copy(owner.indexer)  # reads through this connection (the owner's may be syncing)
            indexer.store = self._store(conn, owner.name)
            warnings += [w for w in indexer.away_warnings(scans.get(owner.name)) if w not in warnings]
        # What built this agent's rows (as builtin-sqlite's status says): after a switch of provider or model it
        # differs from `provider`/`model` until the next sync has rebuilt them.
        meta = self._store(conn, own)
        ident, last = (_json_object(meta.get_meta(key)) for key in ("identity", "lastSync"))
        return {
            "warnings": warnings,
            "index": {"provider": ident.get("provider"), "model": ident.get("model") or None,
                      "lastSync": last.get("reason")},
            "files": per_owner[own]["files"],
            "chunks": mine.get(own, (0, 0))[0],
            "pendingFiles": pending,
            "sourceCounts": source_counts,
            "invalidUtf8Files": bad,
            "skipped": [{"path": ("" if o == own else o + "/") + path, "reason": why} for o, path, why in skipped],
            "partial": [{"path": ("" if o == own else o + "/") + path, "reason": str(why)} for o, path, why in partial],
            "owners": {o: {**per_owner[o], "chunkRows": mine.get(o, (0, 0))[0], "vectors": mine.get(o, (0, 0))[1]}
                       for o in names},
            "cache": {"enabled": cache_cfg["enabled"], "entries": int(cache), "maxEntries": cache_cfg["maxEntries"],
                      "shared": True},
            "server": {"available": True, "reachable": True, "version": version},
            "fts": {"enabled": True, "available": True, "index": "gin" if "chunks_terms" in indexes else None},
            "vector": {
                "enabled": self.agent.memory_search["store"]["vector"]["enabled"],
                "available": vector_version is not None,
                "pgvector": vector_version[0] if vector_version else None,
                "dims": dims,
                "index": "hnsw" if hnsw_name in indexes else ("exact" if dims else None),
                "hnswUsed": hnsw_used,
                "hnsw": {"m": self.settings.m, "efConstruction": self.settings.ef_construction,
                         "efSearch": self.settings.ef_search},
            },
        }

    def close(self) -> None:
        self._closing = True
        for owner in self.owners:
            owner.indexer.cancel.set()
        if self.scheduler:
            self.scheduler.stop()
        with self._sync_lock:
            pass
        close = getattr(self.choice.provider, "close", None)  # optional (Closeable): a provider may have none
        if close is not None:
            close()
        self.pool.close(timeout=2.0)
        if self.watchdog is not None:
            self.watchdog.stop()


def _comparable(schema: str) -> str:
    """A chunks/chunk_units row whose owner's recorded identity is the one given (parameters: owners, identities),
    read in the statement's own snapshot: never a vector of a model another process switched the owner to."""
    return (f"owner IN (SELECT m.owner FROM {schema}.owner_meta m JOIN unnest(%s::text[], %s::text[]) AS u(o, i) "
            "ON m.owner = u.o AND m.value = u.i WHERE m.key = 'identity')")


OWNER_LOCK_WAIT = 900.0
#: Seconds past searchTimeout (syncTimeout) after which a wait that the server still has not answered is cut off.
WATCHDOG_GRACE = 2.0
SEARCH_SETTING = "memorySearch.store.postgres.searchTimeout"
#: The application_name of a sync's session (then the process id and a random token): pg_stat_activity shows it.
SYNC_APPLICATION_NAME = "symi-memory sync"
SYNC_SETTING = "memorySearch.store.postgres.syncTimeout"


def _bound(conn: Any, watchdog: Any, seconds: float, setting: str) -> None:
    """Each wait of ``conn`` for the server ends within ``seconds`` + ``WATCHDOG_GRACE`` (guard.GuardedConnection)."""
    conn.watchdog = watchdog
    conn.answer_within = seconds + WATCHDOG_GRACE
    conn.setting = setting


def _acquire(conn: Any, key: int, owner: str, cancel: threading.Event | None = None) -> None:
    """Take the owner's session-level advisory lock, polling rather than waiting in the server.

    A statement blocked in ``pg_advisory_lock`` keeps a snapshot open, and a
    ``CREATE INDEX CONCURRENTLY`` run by the lock holder waits for every such
    snapshot: a deadlock. Short ``pg_try_advisory_lock`` calls never block.
    ``cancel`` set (the manager closing) ends the wait with :class:`SyncCancelled`.
    """
    deadline = time.monotonic() + OWNER_LOCK_WAIT
    pause = 0.02
    while not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
        if time.monotonic() > deadline:
            raise BackendError(f"postgres: another process has been syncing {owner} for {OWNER_LOCK_WAIT:.0f} s; "
                               "try again later")
        if cancel is None:
            time.sleep(pause)
        elif cancel.wait(pause):
            raise SyncCancelled("sync cancelled: the memory manager is closing")
        pause = min(0.5, pause * 2)


def _merge(reports: list[SyncReport], reason: str, seconds: float) -> SyncReport:
    return SyncReport(
        reason=reason, full=any(r.full for r in reports), files_scanned=sum(r.files_scanned for r in reports),
        files_indexed=sum(r.files_indexed for r in reports), files_removed=sum(r.files_removed for r in reports),
        chunks_written=sum(r.chunks_written for r in reports),
        embeddings_computed=sum(r.embeddings_computed for r in reports),
        embeddings_cached=sum(r.embeddings_cached for r in reports), seconds=seconds,
        errors=tuple(e for r in reports for e in r.errors),
        warnings=tuple(dict.fromkeys(w for r in reports for w in r.warnings)),  # a root away, a rebuild waiting
    )


def _json_object(raw: Any) -> dict[str, Any]:
    """A JSON object, or one as stored in owner_meta (text); {} for anything else."""
    try:
        value = json.loads(raw or "{}") if isinstance(raw, str | None) else raw
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _configure_logging_once() -> None:
    # psycopg_pool logs each failed connection attempt at WARNING with libpq's text (never the password);
    # one line per search/sync failure from us is enough.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)


def create_backend(ctx: BackendContext) -> PostgresBackend:
    try:
        import psycopg  # noqa: F401
        from psycopg_pool import ConnectionPool
    except ImportError as exc:
        raise BackendError(f"{INSTALL_HINT} ({exc})") from None
    agent = ctx.agent
    settings = PgSettings.from_agent(agent, os.environ)
    _configure_logging_once()
    choice = ctx.services.choose_provider()
    models = ctx.config.data.get("models") or {}
    ms = agent.memory_search

    def indexer_for(view: Any) -> Indexer:
        return Indexer(store=None, agent=view, choice=choice, plugins=ctx.services.plugins, models=models)  # type: ignore[arg-type]

    owners = [Owner(name=settings.owner, prefix="", indexer=indexer_for(agent),
                    rules=PathRules.from_workspace(agent.workspace, ms.get("extraPaths") or []))]
    for name in settings.shared:
        assert settings.shared_root is not None
        folder = settings.shared_root / name
        view = attrs.evolve(agent, workspace=folder, memory_search={**ms, "sources": ["memory"], "extraPaths": []})
        owners.append(Owner(name=SHARED_PREFIX + name, prefix=f"{SHARED_PREFIX}{name}/", indexer=indexer_for(view),
                            rules=PathRules.from_workspace(folder, [])))
    from .guard import GuardedConnection, Watchdog

    def make_pool(watchdog: Watchdog) -> Any:
        return ConnectionPool(settings.dsn, min_size=1, max_size=settings.pool_size, open=False, name="symi-memory",
                              timeout=settings.connect_timeout, kwargs=connect_kwargs(settings),
                              connection_class=GuardedConnection,
                              configure=lambda conn: _bound(conn, watchdog, settings.search_timeout, SEARCH_SETTING))

    watchdog = Watchdog()
    pool = make_pool(watchdog)
    pool.open(wait=False)
    return PostgresBackend(agent=agent, settings=settings, pool=pool, choice=choice, owners=owners, watchdog=watchdog,
                           make_pool=make_pool)


#: TCP keepalives of every connection: a connection whose network path went away errors within about
#: KEEPALIVE_IDLE + KEEPALIVE_INTERVAL * KEEPALIVE_COUNT seconds (a pooled one before its next use), and sent
#: data left unacknowledged for TCP_USER_TIMEOUT_MS fails the connection too.
KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT = 20, 10, 3
TCP_USER_TIMEOUT_MS = 60_000


def connect_kwargs(settings: PgSettings) -> dict[str, Any]:
    """libpq/psycopg options of every connection, pooled or not."""
    import psycopg

    kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": max(1, int(settings.connect_timeout)),
                              "application_name": "symi-memory", "keepalives": 1, "keepalives_idle": KEEPALIVE_IDLE,
                              "keepalives_interval": KEEPALIVE_INTERVAL, "keepalives_count": KEEPALIVE_COUNT}
    if psycopg.pq.version() >= 120000:  # libpq 12 added it
        kwargs["tcp_user_timeout"] = TCP_USER_TIMEOUT_MS
    # The DSN's own keepalive choices win (an operator's, or keepalives=0).
    given = settings.conninfo_keys
    return {k: v for k, v in kwargs.items() if not (k.startswith(("keepalives", "tcp_")) and k in given)}


def _claim(conn: Any, schema: str, owner: str, value: dict[str, str]) -> dict[str, Any]:
    """Record ``value`` as ``owner``'s workspace unless one is recorded; return the one in force."""
    conn.execute(f"INSERT INTO {schema}.owner_meta (owner, key, value) VALUES (%s, 'workspace', %s) "
                 "ON CONFLICT (owner, key) DO NOTHING", (owner, json.dumps(value, sort_keys=True)))
    return _recorded(conn, schema, owner)


def _recorded(conn: Any, schema: str, owner: str) -> dict[str, Any]:
    """The workspace recorded as ``owner``'s, ``{}`` when none is."""
    row = conn.execute(f"SELECT value FROM {schema}.owner_meta WHERE owner = %s AND key = 'workspace'",
                       (owner,)).fetchone()
    try:
        got = json.loads(row[0]) if row else {}
    except ValueError:
        got = {}
    return got if isinstance(got, dict) else {}


def _take_over(conn: Any, schema: str, owner: str, old: dict[str, Any], new: dict[str, str]) -> bool:
    """Replace ``owner``'s recorded workspace ``old`` by ``new``; False when another process changed it first."""
    cur = conn.execute(f"UPDATE {schema}.owner_meta SET value = %s WHERE owner = %s AND key = 'workspace' "
                       "AND value = %s", (json.dumps(new, sort_keys=True), owner, json.dumps(old, sort_keys=True)))
    return bool(cur.rowcount == 1)


def _term_counts(text: str, terms: list[str]) -> tuple[dict[str, int], int]:
    """How often each query term occurs in ``text`` (tokenized as it was indexed), and its length in characters.

    A CJK term counts as a substring, as the bigram phrase on the server matches it.
    """
    words = word_terms(text)
    wanted = set(terms)
    counts: dict[str, int] = {}
    for w in words:
        if w in wanted:
            counts[w] = counts.get(w, 0) + 1
    folded = ""
    for t in terms:
        if t not in counts and cjk_bigrams(t):
            folded = folded or fold(text)
            n = folded.count(t)
            if n:
                counts[t] = n
    return counts, len(text)
