"""The MemoryManager: one agent's memory behind whichever backend config selects."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from . import arguments
from .as_of import parse_as_of
from .config import AgentView, Config
from .errors import BackendError, PluginError, SymiMemoryError
from .host import load_config
from .plugins import OWN_DISTRIBUTION, Plugins, load_plugins, resolve_backend_name
from .presentation import present
from .specs import (
    BackendContext,
    BackendSpec,
    ChecksIntegrity,
    MemoryBackend,
    PreparesQueries,
    ProviderUnavailable,
    RerankerContext,
    StartableBackend,
    StoredLineAnalysis,
    StoredLineVectors,
    StoredPlain,
    StoredVectors,
)
from .types import (
    BackendResult,
    Candidate,
    History,
    ReadResult,
    SearchQuery,
    SearchResponse,
    SyncProgress,
    SyncReport,
)

if TYPE_CHECKING:
    from .embedding import EmbeddingChoice
    from .pipeline import Pipeline

__all__ = ["MemoryManager", "Services", "configured_slots", "configured_stages", "open_memory", "parse_as_of"]

log = logging.getLogger("symi_memory.manager")

#: How long :meth:`MemoryManager.close` waits for calls running in other threads (searches, status, the dedup
#: lookup of an append) before it closes the index under them anyway.
CLOSE_WAIT_SECONDS = 30.0

#: One lock per workspace (its resolved path) for :meth:`MemoryManager.append`: the dedup lookup, the write and
#: the indexing of one append finish before the next append's lookup starts, so notes appended at once from
#: several threads (or managers of this process) are judged against each other, not all written as new.
#: Other processes on the same state dir are kept out by a lock file (:func:`_append_lock_path`).
_APPEND_LOCKS: dict[str, threading.Lock] = {}
_APPEND_LOCKS_GUARD = threading.Lock()


def _append_lock(workspace: str | os.PathLike[str]) -> threading.Lock:
    key = str(Path(workspace).expanduser().resolve())
    with _APPEND_LOCKS_GUARD:
        lock = _APPEND_LOCKS.get(key)
        if lock is None:
            lock = _APPEND_LOCKS[key] = threading.Lock()
        return lock


def _append_lock_path(state_dir: Path, workspace: str | os.PathLike[str]) -> Path:
    """``<state dir>/locks/append-<name>-<hash>.lock``: the lock file appends to one workspace share."""
    import hashlib

    root = Path(workspace).expanduser().resolve()
    digest = hashlib.sha256(str(root).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in root.name)[:40]
    return state_dir / "locks" / f"append-{name}-{digest}.lock"


#: Workspace key -> the moment (monotonic) an append of this process holding its locks last said it is alive.
_APPEND_BEATS: dict[str, float] = {}
#: Workspace key -> the lock file (None: none could be made) of the appends of this process holding their locks.
_APPEND_HELD: dict[str, Path | None] = {}
#: Workspace key -> when (``time.time()``) the append of this process holding its locks took them.
_APPEND_SINCE: dict[str, float] = {}
#: The default of ``sync.appendWaitSeconds``: how long in all an append waits for another append that is alive.
DEFAULT_APPEND_WAIT_SECONDS = 300.0
_APPEND_BEATER: list[int] = []  # the pid whose beater thread runs
_NO_LOCK_FILE: set[Path] = set()  # lock files that could not be made (logged once each)
_BEAT_WAKE = threading.Event()  # set when an append takes its locks: the beater starts its count again


def _beat(key: str, path: Path | None) -> None:
    """Say that this process's append holding ``key`` is alive: to its threads, and (the lock file's mtime) to
    other processes."""
    _APPEND_BEATS[key] = time.monotonic()
    if path is not None:
        with contextlib.suppress(OSError):
            os.utime(path)


def _beater() -> None:
    """While appends of this process hold their locks, :func:`_beat` for each every LOCK_WAIT_SECONDS / 6: the
    waiters wait as long as the holder is alive (an embedding provider slow to index the note), and give up
    once it has not beaten for LOCK_WAIT_SECONDS (a stopped process: its threads stop too)."""
    from . import writing

    while True:
        _BEAT_WAKE.wait(max(0.01, min(5.0, writing.LOCK_WAIT_SECONDS / 6)))
        _BEAT_WAKE.clear()  # woken by a new hold: the wait is measured from now (LOCK_WAIT_SECONDS may differ)
        with _APPEND_LOCKS_GUARD:
            held = list(_APPEND_HELD.items())
        for key, path in held:
            _beat(key, path)


def _start_beater() -> None:
    with _APPEND_LOCKS_GUARD:  # one thread per process (a forked child starts its own)
        if _APPEND_BEATER and _APPEND_BEATER[0] == os.getpid():
            return
        _APPEND_BEATER[:] = [os.getpid()]
    threading.Thread(target=_beater, name="symi-append-beat", daemon=True).start()


def _forget_appends_after_fork() -> None:
    """In a forked child: the append locks a parent's thread held stay held, with no thread here to let them go
    (every append of the child waited and failed). The child starts with none; its own lock file descriptors
    are its own, so the parent's append still excludes the child's through the state dir's lock."""
    global _APPEND_LOCKS_GUARD, _BEAT_WAKE
    _APPEND_LOCKS_GUARD = threading.Lock()
    _BEAT_WAKE = threading.Event()
    _APPEND_LOCKS.clear()
    _APPEND_HELD.clear()
    _APPEND_BEATS.clear()
    _APPEND_SINCE.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_appends_after_fork)


def _say_holder(fd: int, key: str) -> None:
    """Write who holds the append lock (``pid`` and since when) into the lock file, for a waiter's error. Past its
    first byte: Windows locks that byte, and another process could not read it. Taken out again before the lock
    is let go (:func:`_appending`)."""
    since = _APPEND_SINCE.get(key, time.time())
    data = f" {os.getpid()} {since:.3f}\n".encode()
    with contextlib.suppress(OSError):
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, data)
        os.ftruncate(fd, len(data))


def _holder_of(path: Path, key: str) -> tuple[int, float] | None:
    """``(pid, since)`` of the append holding ``key``'s locks: this process's (a thread) or the one the lock file
    names; None when unknown (an older release holds it, or the file says nothing)."""
    since = _APPEND_SINCE.get(key)
    if since is not None:
        return os.getpid(), since
    try:
        with open(path, "rb") as fh:
            fh.seek(1)
            pid, when = fh.read(64).split()[:2]
        return int(pid), float(when)
    except (OSError, ValueError):
        return None


def _append_wait_limit(agent: AgentView) -> float:
    try:
        return max(0.0, float(agent.memory_search["sync"].get("appendWaitSeconds", DEFAULT_APPEND_WAIT_SECONDS)))
    except (KeyError, TypeError, ValueError):
        return DEFAULT_APPEND_WAIT_SECONDS


class _Holder:
    """Whether the append holding a workspace's locks (in this process or another) still shows signs of life, and
    whether this append has waited for it as long as it may (``limit``: sync.appendWaitSeconds) even so."""

    def __init__(self, key: str, path: Path, wait: float, closed: Callable[[], bool],
                 busy: Exception, limit: float = DEFAULT_APPEND_WAIT_SECONDS,
                 workspace: object = None) -> None:
        self.key, self.path, self.wait, self.closed, self.busy = key, path, wait, closed, busy
        self.since = self.started = time.monotonic()
        self.limit, self.workspace = limit, workspace
        self.seen = self._mtime()

    def _mtime(self) -> int | None:
        try:
            return os.stat(self.path).st_mtime_ns
        except OSError:
            return None

    def check(self) -> None:
        """Raise ``busy`` once the holder has shown no sign of life for ``wait`` seconds, or SymiMemoryError
        once this manager is closed (a stopping server does not wait)."""
        if self.closed():
            raise SymiMemoryError("this memory manager is closed; nothing was written")
        now = time.monotonic()
        seen = self._mtime()
        if seen != self.seen:
            self.seen, self.since = seen, now
        self.since = max(self.since, _APPEND_BEATS.get(self.key, 0.0))
        if now - self.since >= self.wait:
            raise self.busy
        if now - self.started >= self.limit:
            raise self.too_long(now - self.started)

    def too_long(self, waited: float) -> Exception:
        """The error of an append that waited ``limit`` for a holder still alive: it names the holder."""
        from .index.indexer import _duration
        from .writing import MemoryWriteError

        found = _holder_of(self.path, self.key)
        if found is None:
            who = f"a process holding lock file {self.path}"
        else:
            pid, since = found
            mine = " (this process: another thread's append)" if pid == os.getpid() else ""
            who = (f"pid {pid}{mine}, holding lock file {self.path} for "
                   f"{_duration(max(0.0, time.time() - since))}")
        return MemoryWriteError(
            f"could not append to {self.workspace}: another append to it ({who}) is still running after this one "
            f"waited {_duration(waited)} (sync.appendWaitSeconds = {self.limit:g}); nothing was written. That "
            "append goes on (an embedding provider call may be hanging): try again later, or stop that process "
            "if it is stuck")


@contextlib.contextmanager
def _appending(agent: AgentView, closed: Callable[[], bool] = lambda: False) -> Iterator[None]:
    """Hold the append lock of ``agent``'s workspace: this process's (threads) and the state dir's (processes).

    Waits while the holder is alive: it gives up once the append holding the lock has shown no sign of life
    (a beat, :func:`_beater`) for :data:`symi_memory.writing.LOCK_WAIT_SECONDS`, raising
    :class:`~symi_memory.writing.MemoryWriteError`, or at once when ``closed()``. A holder alive but hung (a
    provider call that never returns) is waited for at most ``sync.appendWaitSeconds`` in all: the error names its
    pid and how long it has held the lock (the holder writes both into the lock file); the holder goes on. A state dir where the lock file
    cannot be made (read-only) or that keeps no locks leaves the per-process lock alone; the memory file's own
    lock still keeps lines whole.
    """
    from . import writing
    from .locks import lock_exclusive, unlock

    wait = writing.LOCK_WAIT_SECONDS
    poll = max(0.005, min(0.25, wait / 8))
    key = str(Path(agent.workspace).expanduser().resolve())
    path = _append_lock_path(agent.state_dir, agent.workspace)
    busy = writing.MemoryWriteError(
        f"could not append to {agent.workspace}: another append to it has shown no sign of life for {wait:g} s "
        f"(a stopped or stuck process holds lock file {path}); nothing was written, try again")
    holder = _Holder(key, path, wait, closed, busy, _append_wait_limit(agent), agent.workspace)
    lock = _append_lock(agent.workspace)
    while not lock.acquire(timeout=poll):
        holder.check()
    try:
        fd: int | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            if path not in _NO_LOCK_FILE:
                _NO_LOCK_FILE.add(path)
                log.warning("no append lock file %s (%s): appends from other processes are not serialized with "
                            "this one's", path, exc.strerror or exc)
        locked = False
        try:
            while fd is not None:
                try:
                    locked = lock_exclusive(fd, poll)
                    break
                except TimeoutError:
                    holder.check()
            _start_beater()
            with _APPEND_LOCKS_GUARD:
                _APPEND_HELD[key] = path if locked else None
                _APPEND_SINCE[key] = time.time()
            if locked and fd is not None:
                _say_holder(fd, key)
            _beat(key, path if locked else None)
            _BEAT_WAKE.set()
            try:
                yield
            finally:
                with _APPEND_LOCKS_GUARD:
                    _APPEND_HELD.pop(key, None)
                    _APPEND_SINCE.pop(key, None)
        finally:
            if locked and fd is not None:
                with contextlib.suppress(OSError):
                    # Its name out before it lets go: a holder that writes none (an older release) is not taken
                    # for this one, whose pid may be another program's by then.
                    os.ftruncate(fd, 0)
                with contextlib.suppress(OSError):
                    unlock(fd)
            if fd is not None:
                os.close(fd)
    finally:
        lock.release()


def _capped(query: str) -> tuple[str, str | None]:
    """:func:`~symi_memory.index.analysis.capped_query` of a search's query, for every backend, logged when cut."""
    from .index.analysis import capped_query

    text, warning = capped_query(query)
    if warning:
        log.info("%s", warning)
    return text, warning


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _version_day(seconds: float, path: str) -> str | None:
    """``YYYY-MM-DD`` of a version's moment (before 1970 too: a negative one), None when no date is known. A
    moment of 0 is the one a line no date was found for gets, unless its note is dated 1970-01-01."""
    from .chronology import file_date

    if seconds == 0 and file_date(path) != 0:
        return None
    try:
        return (_EPOCH + timedelta(seconds=seconds)).date().isoformat()  # fromtimestamp() refuses < 0 on Windows
    except (OverflowError, ValueError):
        return None


@attrs.define
class Services:
    """Core machinery handed to backend factories (``BackendContext.services``)."""

    plugins: Plugins
    config: Config
    agent: AgentView

    def choose_provider(self) -> EmbeddingChoice:
        from .embedding import choose_provider

        return choose_provider(self.plugins, self.agent, self.config.data.get("models") or {})

    def create_backend(self, name: str) -> MemoryBackend:
        """Build another registered backend for the same agent (qmd uses this for its fallback)."""
        spec = self.plugins.backend(name)
        own = self.plugins.entry_settings("backends", name, self.agent.plugin_entries)
        return _create_backend(self.plugins, spec, BackendContext(config=self.config, agent=self.agent, services=self,
                                                                  spec=spec, plugin_settings=own))


def _create_backend(plugins: Plugins, spec: BackendSpec, ctx: BackendContext,
                    key: str = "plugins.slots.memory") -> MemoryBackend:
    """Run ``spec``'s factory; a third party's factory failing is a :class:`PluginError` naming ``key`` and its plugin.

    Our errors and ``OSError`` pass through as they are (the CLI explains them), and so does anything the
    builtins' factories raise (an index database error has its own message); a factory returning
    something that is not a backend (None, by a forgotten ``return``) is refused here, not taken for
    memory being off.
    """
    owner = plugins.owners.get("backends", {}).get(spec.name, "?")
    try:
        backend = spec.factory(ctx)
    except (SymiMemoryError, OSError):
        raise
    except Exception as exc:
        if plugins.dists.get(owner, ("?",))[0] == OWN_DISTRIBUTION:
            raise
        raise PluginError(
            f"{key} = {spec.name!r}: the backend of plugin {owner!r} failed to start ({type(exc).__name__}: "
            f"{exc}); fix or uninstall the plugin, or choose another backend"
        ) from exc
    if not isinstance(backend, MemoryBackend):
        missing = [m for m in ("search", "sync", "read_file", "status", "close") if not hasattr(backend, m)]
        lacks = f"it has no {', '.join(missing)}" if backend is not None and missing else \
            "search, sync, read_file, status and close"
        raise PluginError(
            f"{key} = {spec.name!r}: the factory of plugin {owner!r} returned {'None' if backend is None else type(backend).__name__}, not a "
            f"MemoryBackend ({lacks}); fix or uninstall the plugin, or choose another backend"
        )
    return backend


def _reranker(plugins: Plugins, config: Config, agent: AgentView) -> tuple[Any, str | None]:
    """The configured reranker (None when none is, or it cannot be used) and why it is not used."""
    rerank = agent.memory_search["query"]["rerank"]
    name = rerank.get("provider") or "none"
    if name == "none":
        return None, None
    spec = plugins.reranker(name)
    ctx = RerankerContext(settings=rerank, models=config.data.get("models") or {}, env=dict(os.environ),
                          model=rerank.get("model") or spec.default_model,
                          plugin_settings=plugins.entry_settings("rerankers", name, agent.plugin_entries))
    try:
        reranker = spec.factory(ctx)
    except ProviderUnavailable as exc:
        # A reranker is an optional refinement: without it, search still answers in fused order.
        log.warning("reranker %s unavailable (%s); searching without reranking", name, exc)
        return None, f"unavailable: {exc}"
    except SymiMemoryError:
        raise  # said on purpose (a ConfigError naming the key to fix)
    except Exception as exc:
        owner = plugins.owners.get("rerankers", {}).get(name, "?")
        if plugins.dists.get(owner, ("",))[0] == OWN_DISTRIBUTION:
            raise  # a bug of ours, shown as one
        # Another plugin's bug: the search still answers, in fused order, as when its rerank call fails.
        log.warning("reranker %s of plugin %r failed to start (%s: %s); searching without reranking",
                    name, owner, type(exc).__name__, exc)
        return None, f"failed to start ({type(exc).__name__}: {exc})"
    if not callable(getattr(reranker, "rerank", None)):
        # Checked once here, not by every search's call: status and the log say why no reranking happens.
        from .pipeline import answer_shape

        owner = plugins.owners.get("rerankers", {}).get(name, "?")
        why = f"failed to start (its factory returned {answer_shape(reranker)}, not a Reranker: it has no rerank method)"
        log.warning("reranker %s of plugin %r %s; searching without reranking", name, owner, why)
        return None, why
    return reranker, None


@attrs.define
class MemoryManager:
    """Thread-safe facade: search, read_file, sync, status, close.

    :meth:`close` lets calls already running in other threads finish (at most :data:`CLOSE_WAIT_SECONDS`), then
    closes the index; a call made after it raises :class:`~symi_memory.errors.SymiMemoryError`.
    """

    config: Config
    agent: AgentView
    plugins: Plugins
    backend: MemoryBackend | None
    backend_name: str | None
    _pipeline: Pipeline | None = attrs.field(alias="pipeline")
    #: Builds the pipeline on first use, so `status` and `get` construct no reranker or post-processor.
    _make_pipeline: Callable[[], Pipeline] | None = attrs.field(default=None, alias="make_pipeline")
    _closed: bool = False
    #: Set by a stopping server (:meth:`_stop_waiting`): appends waiting for another append's lock give up.
    _stopping: bool = False
    #: Re-entrant: :meth:`close` may run in a signal handler that interrupted this thread inside the lock.
    _lock: threading.RLock = attrs.field(factory=threading.RLock)
    _section_cache: dict[tuple[str, int, int], dict[int, float]] = attrs.field(factory=dict)
    #: ``(backend class, StoredVectors?, StoredLineVectors?, StoredLineAnalysis?, StoredPlain?)``: what the backend's
    #: class defines,
    #: asked once (``isinstance`` against a runtime-checkable protocol lists the protocol's members again at every
    #: call). A protocol the class does not define is asked of the backend at each search: an instance may gain or
    #: lose its members (a wrapper looking them up on the backend it currently serves from).
    _stored: tuple[type, bool, bool, bool, bool] | None = None
    #: Calls running now (search, explain, history, read_file, status, check_integrity, an append's lookup and
    #: write), by thread: :meth:`close` waits for them, so the index is not closed under them.
    _calls: dict[int, int] = attrs.field(factory=dict)
    _idle: threading.Condition = attrs.field(init=False)
    #: :meth:`close` was called inside a call of the thread named here (a plugin's hook, a signal handler): that
    #: thread closes the index when its last call returns, not under the call.
    _close_on_leave: int | None = None
    #: The missing roots (workspace, extra paths) a sync logged (once each, until the root is back).
    _warned_roots: frozenset[str] = frozenset()
    #: Set by a server while the agent's first sync runs (minutes on a large workspace): an append is written and
    #: answered at once, not indexed then (its sync would wait for that one); a later sync indexes it.
    _appends_unindexed: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        self._idle = threading.Condition(self._lock)
        from . import forking

        forking.track(self)

    def _after_fork_in_child(self) -> None:
        """In a forked child: calls the parent's other threads were making do not run here (a close would wait
        for them), and a lock one of them held would stay held."""
        me = threading.get_ident()
        self._lock = threading.RLock()
        self._idle = threading.Condition(self._lock)
        self._calls = {me: self._calls[me]} if me in self._calls else {}
        if self._close_on_leave is not None and self._close_on_leave != me:
            self._close_on_leave = None

    def _enter(self) -> MemoryBackend:
        """Count a call on this thread (refused once closed) and return the backend; pair with :meth:`_leave`."""
        me = threading.get_ident()
        with self._lock:
            self._calls[me] = self._calls.get(me, 0) + 1
        # Counted first, then checked: a close() in between (a signal handler) sees the call and leaves the index
        # open for it, and this check then refuses it.
        try:
            return self._require()
        except BaseException:
            self._leave()
            raise

    def _leave(self) -> None:
        me = threading.get_ident()
        with self._lock:
            left = self._calls[me] - 1
            if left:
                self._calls[me] = left
                return
            del self._calls[me]
            self._idle.notify_all()
            if self._close_on_leave != me:
                return
            self._close_on_leave = None
            self._wait_for_calls()
        self._release()

    @property
    def pipeline(self) -> Pipeline | None:
        """The search tail (reranker, post-processors); None when memory is off."""
        if self._pipeline is None and self._make_pipeline is not None:
            with self._lock:
                if self._pipeline is None and self._make_pipeline is not None:
                    if self._closed:
                        raise SymiMemoryError("this memory manager is closed; open a new one with open_memory()")
                    self._pipeline = self._make_pipeline()
                    self._make_pipeline = None
        return self._pipeline

    @property
    def enabled(self) -> bool:
        return self.backend is not None

    def _require(self) -> MemoryBackend:
        if self._closed:
            raise SymiMemoryError("this memory manager is closed; open a new one with open_memory()")
        if self.backend is None:
            raise SymiMemoryError(
                "memory is disabled (plugins.slots.memory = none or memorySearch.enabled = false); enable it in config"
            )
        return self.backend

    def prepare_search(self) -> None:
        """Start loading what searching needs (a local embedding model) in the background, if the backend can.

        For a process that searches once (the CLI's ``search``): the model then loads while the rest of
        the search starts. Returns at once; a load that fails is reported by the search.
        """
        backend = self.backend
        if backend is not None and not self._closed and isinstance(backend, PreparesQueries):
            backend.prepare_query()

    def search(self, query: str, *, max_results: int | None = None, min_score: float | None = None,
               session_key: str | None = None, now: float | None = None,
               as_of: str | float | date | datetime | None = None) -> SearchResponse:
        """Search memory. Never waits for indexing.

        ``as_of`` (a date such as ``"2026-04-01"``, a ``date``/``datetime``
        or epoch seconds) answers as memory stood then: memory written after
        it is left out and supersession is judged as of that moment. A date
        means the end of that day (UTC); see :func:`symi_memory.as_of.parse_as_of`.

        ``max_results`` is a whole number of at least 1 (above 200 it is 200)
        and ``min_score`` a number (clamped to 0..1); ``None`` takes the
        configured one. Anything else (``"5"``, ``True``, ``2.5``, NaN) raises
        ValueError, as a blank query does.
        """
        self._enter()
        try:
            return self._search(query, max_results=max_results, min_score=min_score, session_key=session_key,
                                now=now, as_of=as_of)
        finally:
            self._leave()

    def explain(self, query: str, *, max_results: int | None = None, min_score: float | None = None,
                session_key: str | None = None, now: float | None = None,
                as_of: str | float | date | datetime | None = None) -> dict[str, Any]:
        """The same search as :meth:`search`, plus each candidate's score at every stage.

        ``response`` is exactly what ``search`` returns (as a dict); ``candidates``
        lists every fused candidate with its keyword and vector scores, its score
        and rank after fusion, the reranker and each post-processor (temporal
        decay, supersession, MMR, ...), and its ``outcome``: returned, below
        minScore, beyond maxResults, same lines as a better hit, left out by
        ``as_of``, or dropped by the reranker or a post-processor. ``skipped``
        names the stages skipped for this search (a reranker or third-party
        post-processor that failed or missed ``query.stageDeadlineMs``), as
        ``response["warnings"]`` does. For the inspector and debugging; the
        normal search path records nothing.
        """
        trace: dict[str, Any] = {}
        self._enter()
        try:
            resp = self._search(query, max_results=max_results, min_score=min_score, session_key=session_key,
                                now=now, as_of=as_of, trace=trace)
        finally:
            self._leave()
        rows = list(trace.get("candidates", {}).values())
        rows.sort(key=lambda r: r["stages"].get("final", {}).get("rank", 10**9))  # the dropped ones last
        hybrid = self.agent.memory_search["query"]["hybrid"]
        return {"query": query, "response": resp.to_dict(), "stages": trace.get("stages", []),
                "minScore": trace.get("minScore"), "minScoreApplied": trace.get("minScoreApplied"),
                "maxResults": trace.get("maxResults"), "asOf": trace.get("asOf"),
                "skipped": trace.get("skipped", []),
                "fusion": {"method": hybrid["fusion"], "vectorWeight": hybrid["vectorWeight"],
                           "textWeight": hybrid["textWeight"]},
                "candidates": rows}

    def _search(self, query: str, *, max_results: int | None, min_score: float | None, session_key: str | None,
                now: float | None, as_of: str | float | date | datetime | None,
                trace: dict[str, Any] | None = None) -> SearchResponse:
        backend = self._require()
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        arguments.unicode_text(query, "query")
        q = self.agent.memory_search["query"]
        n = arguments.max_results(max_results)
        n = int(q["maxResults"]) if n is None else n
        ms = self._min_score(min_score)
        mult = q["hybrid"]["candidateMultiplier"]
        sources = tuple(self.agent.memory_search.get("sources") or ["memory"])
        if not self.agent.memory_search["experimental"]["sessionMemory"]:
            sources = tuple(s for s in sources if s != "sessions") or ("memory",)
        cutoff = parse_as_of(as_of)
        # "As of" leaves candidates out after retrieval, so retrieve more of them.
        limit = min(200, max(1, n * mult * (2 if cutoff is not None else 1)))
        query, cut = _capped(query)
        sq = SearchQuery(text=query, max_results=n, min_score=ms, candidate_limit=limit,
                         session_key=session_key, sources=sources)
        # Built first (once per manager): a one-shot search builds it while its query is being embedded.
        pipeline = self.pipeline
        assert pipeline is not None
        result = backend.search(sq)
        try:
            floor = ms if result.calibrated else 0.0
        except AttributeError:  # checked only then: nothing a search
            if isinstance(result, BackendResult):
                raise
            raise self._wrong_answer("search", result, "a BackendResult") from None
        if trace is not None:
            trace.update(minScore=ms, minScoreApplied=floor, maxResults=n, asOf=cutoff)
        vectors, line_vectors, analysis, plain = self._stored_readers(backend)
        skipped: list[str] = [cut] if cut else []
        final = pipeline.run(query, result.candidates, max_results=n, min_score=floor,
                                  now=now if now is not None else (cutoff if cutoff is not None else None),
                                  as_of=cutoff, vectors=vectors, written_at=self._written_at, trace=trace,
                                  line_vectors=line_vectors, query_vector=result.query_vector,
                                  section_dates=self._section_dates if cutoff is not None else None,
                                  line_analysis=analysis, plain=plain, warnings=skipped)
        citations = self.config.data["memory"]["citations"]
        hits = present(final, citations=citations, session_key=session_key, budget=result.budget)
        return SearchResponse(results=tuple(hits), mode=result.mode, provider=result.provider, model=result.model,
                              fallback=result.fallback, citations=citations, warnings=tuple(skipped))

    def _stored_readers(self, backend: MemoryBackend) -> tuple[Any, Any, Any, Any]:
        """The backend's ``candidate_vectors``, ``candidate_line_vectors``, ``candidate_line_analysis`` and
        ``candidate_plain``, each None when the backend does not hand them out (:class:`StoredVectors`,
        :class:`StoredLineVectors`, :class:`StoredLineAnalysis`, :class:`StoredPlain`)."""
        kind = type(backend)
        known = self._stored
        if known is None or known[0] is not kind:
            # A class that defines a protocol's members makes every instance of it one (isinstance answers so from
            # the class alone); for one that does not, only the instance can tell.
            known = self._stored = (kind, issubclass(kind, StoredVectors), issubclass(kind, StoredLineVectors),
                                    issubclass(kind, StoredLineAnalysis), issubclass(kind, StoredPlain))
        _, vectors, lines, analysis, plain = known
        return (backend.candidate_vectors  # type: ignore[attr-defined]
                if vectors or isinstance(backend, StoredVectors) else None,
                backend.candidate_line_vectors  # type: ignore[attr-defined]
                if lines or isinstance(backend, StoredLineVectors) else None,
                backend.candidate_line_analysis  # type: ignore[attr-defined]
                if analysis or isinstance(backend, StoredLineAnalysis) else None,
                backend.candidate_plain  # type: ignore[attr-defined]
                if plain or isinstance(backend, StoredPlain) else None)

    def _min_score(self, value: Any) -> float:
        """A search's score floor: ``value`` checked as :func:`~symi_memory.arguments.min_score` checks it, or the
        configured ``query.minScore`` when None (both on 0..1)."""
        ms = arguments.min_score(value)
        return min(1.0, max(0.0, float(self.agent.memory_search["query"]["minScore"]))) if ms is None else ms

    def history(self, query: str, *, max_results: int | None = 30, min_score: float | None = None,
                as_of: str | float | date | datetime | None = None) -> History:
        """Every version of the fact that best answers ``query``, oldest first; empty when memory holds no
        answer (the best candidate scores below ``min_score``, default the configured ``minScore``, where
        search returns nothing either).

        Each entry: ``{path, startLine, endLine, date, text, current}``;
        ``date`` is the day the version was written (``YYYY-MM-DD``) when known.
        The answer is a list (:class:`~symi_memory.types.History`) whose ``warnings`` name the stages skipped
        while finding the fact, as a search's ``warnings`` do (a reranker or third-party post-processor that
        failed or missed ``query.stageDeadlineMs``), and a query cut to its first 1,024 distinct words;
        ``to_dict()`` gives ``{"versions": [...]}`` with ``"warnings"`` when there is one.
        ``max_results`` (default 30, at most 200) and ``min_score`` are checked as
        :meth:`search` checks them: a value of the wrong kind raises ValueError.
        """
        self._enter()
        try:
            return self._history(query, max_results=max_results, min_score=min_score, as_of=as_of)
        finally:
            self._leave()

    def _history(self, query: str, *, max_results: int | None, min_score: float | None,
                 as_of: str | float | date | datetime | None) -> History:
        from .supersession import versions

        backend = self._require()
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        arguments.unicode_text(query, "query")
        cutoff = parse_as_of(as_of)
        max_results = arguments.max_results(max_results)
        max_results = 30 if max_results is None else max_results
        ms = self._min_score(min_score)
        sources = tuple(self.agent.memory_search.get("sources") or ["memory"])
        if not self.agent.memory_search["experimental"]["sessionMemory"]:
            sources = tuple(s for s in sources if s != "sessions") or ("memory",)
        query, cut = _capped(query)
        result = backend.search(SearchQuery(text=query, max_results=max_results, min_score=0.0,
                                            candidate_limit=min(200, max_results * 2), sources=sources))
        assert self.pipeline is not None
        vectors, line_vectors, analysis, plain = self._stored_readers(backend)
        skipped: list[str] = [cut] if cut else []  # the query cut said, as a search says it
        final = self.pipeline.run(query, result.candidates, max_results=max_results, min_score=0.0,
                                  now=cutoff, as_of=cutoff, vectors=vectors, written_at=self._written_at,
                                  line_vectors=line_vectors, query_vector=result.query_vector,
                                  section_dates=self._section_dates if cutoff is not None else None,
                                  line_analysis=analysis, plain=plain, warnings=skipped)
        # The fact is the best candidate, if search would return it: below the floor search applies
        # (minScore, on calibrated scores) memory says nothing about the query, and neither does its history.
        floor = ms if result.calibrated else 0.0
        if not final or final[0].score < floor:
            return History((), skipped)
        found = versions(final, vectors([c.id for c in final]) if vectors else None, query)
        out = []
        for k, ln in enumerate(found):
            day = _version_day(ln.moment[0], ln.path)
            out.append({"path": ln.path, "startLine": ln.line_no, "endLine": ln.line_no, "date": day,
                        "text": ln.text, "current": k == len(found) - 1})
        return History(out, skipped)

    def append(self, text: str, *, target: str = "daily", allow_duplicate: bool = False,
               now: datetime | None = None) -> dict[str, Any]:
        """``memory_append`` with dedup: the tool JSON (``path``, ``bytesWritten``, ``appended``, ...).

        A restatement of stored memory is not written: the answer carries
        ``duplicateOf`` and ``appended: false`` (unless ``allow_duplicate``).
        A change of a stored fact is written and ``supersedes`` names it.
        Raises :class:`~symi_memory.writing.MemoryWriteError` when writing fails, and ValueError for a
        ``text`` that is not a string of valid Unicode or an ``allow_duplicate`` that is not a bool.
        """
        from .dedup import check_append
        from .writing import append_memory

        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {text!r}")
        if not isinstance(allow_duplicate, bool):
            raise ValueError(f"allow_duplicate must be True or False, got {allow_duplicate!r}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"text must be valid Unicode: a lone surrogate at character {exc.start}") from None
        self._require()
        # One append at a time per workspace: a note appended at once from two threads is checked against the
        # first one's write (indexed before the lock is let go), not written twice.
        with _appending(self.agent, lambda: self._closed or self._stopping):
            self._enter()
            try:
                check = check_append(self, text) if text and text.strip() else None
                if check is not None and check.kind == "duplicate" and not allow_duplicate:
                    return {"path": "", "bytesWritten": 0, "appended": False, "duplicateOf": check.target}
                result = append_memory(self.agent.workspace, text, target=target,  # type: ignore[arg-type]
                                       now=now, tz=self.agent.user_timezone)
            finally:
                self._leave()
            out: dict[str, Any] = {**result.to_dict(), "appended": True}
            if check is not None and check.kind == "change":
                out["supersedes"] = check.target
            elif check is not None and check.kind == "duplicate":
                out["duplicateOf"] = check.target
            if self._appends_unindexed:  # a long sync runs: a later one indexes it
                return out
            try:  # index the new text now, so the next append (and search) sees it
                self._require().sync(reason="append")
            except Exception as exc:
                log.info("indexing after append failed (%s); the next sync picks it up", exc)
        return out

    def _written_at(self, candidates: Sequence[Candidate]) -> dict[str, tuple[float, float]]:
        """Message timestamps of transcript candidates (other memory is dated by its file)."""
        out: dict[str, tuple[float, float]] = {}
        for c in candidates:
            if c.source == "sessions":
                from .sessions import message_times

                found = message_times(self.agent.sessions_dir, c.path, c.start_line, c.end_line,
                                      max_line_bytes=int(self.agent.memory_search["sync"]["maxFileBytes"]))
                if found is not None:
                    out[c.id] = found
        return out

    def _section_dates(self, candidates: Sequence[Candidate]) -> dict[str, dict[int, float]]:
        """For candidates from undated notes: ``{id: {line: date}}``, the dates their headings or section
        intros give their lines (:func:`symi_memory.chronology.file_line_since`), read from the whole file
        (a chunk may start below the heading that dates it). Cached per file version."""
        from .chronology import file_date, file_line_since
        from .workspace import decode_text

        out: dict[str, dict[int, float]] = {}
        root = Path(self.agent.workspace).resolve()
        for c in candidates:
            if c.source != "memory" or file_date(c.path) is not None:
                continue
            path = (root / c.path).resolve()
            try:
                if not path.is_relative_to(root):
                    continue
                st = path.stat()
            except (OSError, ValueError):
                continue
            key = (str(path), st.st_mtime_ns, st.st_size)
            dates = self._section_cache.get(key)
            if dates is None:
                try:
                    dates = file_line_since(decode_text(path.read_bytes())[0])
                except OSError:
                    continue
                if len(self._section_cache) > 256:
                    self._section_cache.clear()
                self._section_cache[key] = dates
            mine = {n: d for n, d in dates.items() if c.start_line <= n <= c.end_line}
            if mine:
                out[c.id] = mine
        return out

    def read_file(self, path: str, *, from_line: int | None = None, lines: int | None = None) -> ReadResult:
        """``memory_get``: a safe, targeted read."""
        from_line = arguments.whole_number(from_line, "from")
        lines = arguments.whole_number(lines, "lines")
        backend = self._enter()
        try:
            got = backend.read_file(path, from_line=from_line, lines=lines)
        finally:
            self._leave()
        if not isinstance(got, ReadResult):
            raise self._wrong_answer("read_file", got, "a ReadResult")
        return got

    def _wrong_answer(self, method: str, got: Any, wanted: str) -> BackendError:
        """The error for a backend plugin's ``method`` that returned ``got``, not ``wanted``: it names the plugin
        and what it returned (the core's own attribute error on it would blame symi-memory)."""
        from .pipeline import answer_shape

        owner = self.plugins.owners.get("backends", {}).get(self.backend_name or "", "?")
        return BackendError(f"the {self.backend_name} backend (plugin {owner!r}) returned {answer_shape(got)} from "
                            f"{method}, not {wanted} (a bug of that plugin)")

    def sync(self, *, reason: str = "manual", force: bool = False,
             progress: Callable[[SyncProgress], None] | None = None) -> SyncReport:
        """Bring the index up to date now (blocking).

        While another process runs a full build of the same index, waits for it to land (reported to ``progress``
        as phase ``wait``), at most ``sync.buildWaitSeconds``; past that raises
        :class:`~symi_memory.errors.BuildWaitExpired` naming that process. ``status()["build"]`` shows such a build.

        A workspace that does not exist or is not a folder (a mistyped path, one not created yet, one renamed,
        removed or unmounted for a while), or an extra path that does not exist, is not an error: nothing new is
        indexed from it, what the index already holds from it stays searchable (its files are not taken for
        deleted) until it is back, and the report's ``warnings`` (and ``status()["warnings"]``) name it and why;
        each is logged once while it lasts. The builtin backends keep the same way a root folder that is there but
        lists no memory file and looks unmounted (on another device than when its files were listed, or empty while
        the index holds 10 files or more from it) until files are back in it; ``force=True`` drops them. The builtin backends do the same for a workspace, extra path or folder
        that is there but cannot be read (no permission), the transcripts folder, and an indexed file or transcript
        they cannot read: kept until it can be read again.
        """
        report = self._require().sync(reason=reason, force=force, progress=progress)
        if not isinstance(report, SyncReport):
            raise self._wrong_answer("sync", report, "a SyncReport")
        mine = [w for w in self._root_warnings() if w not in report.warnings]  # the builtin backends' say it
        for warning in mine:
            if warning not in self._warned_roots:
                log.warning("%s", warning)
        self._warned_roots = frozenset(mine)
        return attrs.evolve(report, warnings=(*report.warnings, *mine)) if mine else report

    def _root_warnings(self) -> list[str]:
        """Why the workspace or an extra path cannot be listed now (:func:`~symi_memory.workspace.absent_roots`)."""
        from .workspace import absent_roots

        return [root.warning for root in absent_roots(self.agent.workspace,
                                                       self.agent.memory_search.get("extraPaths") or [])]

    def check_integrity(self) -> str | None:
        """Read the whole index for damage no search has read yet: None when intact, else what is wrong (one
        line). Damage found is recorded: ``status()`` reports it and the next :meth:`sync` rebuilds the index
        from the memory files. Raises :class:`~symi_memory.errors.BackendError` when the backend cannot check
        (it does not implement :class:`~symi_memory.specs.ChecksIntegrity`)."""
        backend = self._enter()
        try:
            if not isinstance(backend, ChecksIntegrity):
                raise BackendError(f"the {self.backend_name or type(backend).__name__} backend cannot check its "
                                   "index for damage")
            return backend.check_integrity()
        finally:
            self._leave()

    def status(self) -> dict[str, Any]:
        if self.backend is None:
            from .workspace import printable_path

            return {"backend": "none", "plugin": None, "enabled": False,
                    "workspaceDir": printable_path(str(self.agent.workspace)), "reranker": None,
                    "postprocessors": [], "slots": {"memory": None, "embeddingProvider": None, "reranker": None}}
        backend = self._enter()
        try:
            got = backend.status()
        finally:
            self._leave()
        if not isinstance(got, Mapping):
            raise self._wrong_answer("status", got, "a dict")
        out = dict(got)
        if self.backend_name is not None and ("backend" not in out or "plugin" not in out):
            spec = self.plugins.backends.get(self.backend_name)
            out.setdefault("backend", spec.status_name if spec is not None else self.backend_name)
            out.setdefault("plugin", self.backend_name)
        out["supersession"] = self._supersession_status(backend)
        said = list(out.get("warnings", []))
        out["warnings"] = [*said, *(w for w in self._root_warnings() if w not in said)]
        out.update(self._stages_status(out))
        return out

    def _stages_status(self, st: dict[str, Any]) -> dict[str, Any]:
        """``status``'s ``reranker`` and ``postprocessors`` (name, plugin, how the last call went in this process)
        and ``slots``: the plugin serving each slot (memory backend, embedding provider, reranker), as
        ``symi-memory plugins`` marks them. Nothing is built for it: before this process's first search they are
        named from config (:func:`configured_stages`), with no call yet."""
        provider = st.get("provider")
        slots = configured_slots(self.plugins, self.agent.memory_search, self.backend_name,
                                 provider if isinstance(provider, str) else None)
        pipeline = self._pipeline
        if pipeline is not None:
            return {**pipeline.describe(self.plugins), "slots": slots}
        return {**configured_stages(self.plugins, self.agent.memory_search), "slots": slots}

    def _supersession_status(self, backend: MemoryBackend) -> dict[str, Any]:
        """What supersession and "as of" search can do with this backend."""
        enabled = bool(self.agent.memory_search["query"]["hybrid"]["supersession"]["enabled"])
        vectors = isinstance(backend, StoredVectors)
        unavailable = []
        if not vectors:
            unavailable.append("supersession: this backend hands out no stored vectors, so older memories that "
                               "newer ones restate are not demoted or marked")
        return {"enabled": enabled, "applied": enabled and vectors, "storedVectors": vectors, "asOf": True,
                "unavailable": unavailable}

    def _stop_waiting(self) -> None:
        """The server is stopping: an append waiting for another append's lock gives up now (nothing written), so
        the worker thread it runs in, which the stop waits for, ends. Calls already running are not touched."""
        self._stopping = True

    def close(self) -> None:
        """Stop the watcher and background syncs, cancel a running sync (it raises ``SyncCancelled``, a
        :class:`~symi_memory.errors.SymiMemoryError`), let calls running in other threads finish (at most
        :data:`CLOSE_WAIT_SECONDS`) and close the index. Calls made after it raise SymiMemoryError.

        Called inside a call of its own thread (a plugin's hook during a search, a signal handler that interrupted
        one), it returns at once and that call finishes first: the index closes when it returns. Called inside a
        sync's progress callback, the sync stops at its next step and the index closes as it returns."""
        me = threading.get_ident()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if me in self._calls:
                self._close_on_leave = me
                return
            self._wait_for_calls()
        self._release()

    def _wait_for_calls(self) -> None:
        """Wait (holding ``_lock``) until no call runs in any thread, at most :data:`CLOSE_WAIT_SECONDS`."""
        deadline = time.monotonic() + CLOSE_WAIT_SECONDS
        while self._calls:
            left = deadline - time.monotonic()
            if left <= 0:
                log.warning("closing memory with %d call(s) still running after %.0f s",
                            sum(self._calls.values()), CLOSE_WAIT_SECONDS)
                break
            self._idle.wait(left)

    def _release(self) -> None:
        """Close the backend and the pipeline (once, after :meth:`close` marked the manager closed)."""
        if self.backend is not None:
            self.backend.close()
        self._make_pipeline = None
        if self._pipeline is not None:
            self._pipeline.close()

    def __enter__(self) -> MemoryManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def configured_stages(plugins: Plugins, memory_search: Mapping[str, Any]) -> dict[str, Any]:
    """``status``'s ``reranker`` and ``postprocessors`` as config names them, with no call yet: nothing is built
    (a post-processor is listed unless its :attr:`~symi_memory.specs.PostProcessorSpec.running` check says it does
    not run; ``running`` is null when it gives no check)."""
    rr = memory_search["query"]["rerank"].get("provider") or "none"
    reranker = None
    if rr != "none":
        reranker = {"name": rr, "plugin": plugins.owners.get("rerankers", {}).get(rr), "lastCall": None,
                    "lastReason": None, "hung": False, "active": None, "reason": None}
    hybrid = memory_search["query"]["hybrid"]
    owners = plugins.owners.get("postprocessors", {})
    procs = []
    for spec in sorted(plugins.postprocessors.values(), key=lambda s: (s.order, s.name)):
        running: bool | None = None
        if spec.running is not None:
            try:
                running = bool(spec.running(hybrid))
            except Exception as exc:  # a plugin's check: the search will tell
                log.debug("post-processor %r: running() raised %s", spec.name, exc)
        if running is False:
            continue
        procs.append({"name": spec.name, "plugin": owners.get(spec.name), "order": spec.order,
                      "running": running, "lastCall": None, "lastReason": None, "hung": False})
    return {"reranker": reranker, "postprocessors": procs}


def configured_slots(plugins: Plugins, memory_search: Mapping[str, Any], backend_name: str | None,
                     provider: str | None) -> dict[str, Any]:
    """``status``'s ``slots``: ``{memory, embeddingProvider, reranker}``, each ``{name, plugin}`` or None, for the
    backend ``backend_name`` and the embedding provider ``provider`` (the one the backend uses; None: none, or not
    known)."""
    owners = plugins.owners
    memory = None if backend_name is None else {"name": backend_name,
                                                "plugin": owners.get("backends", {}).get(backend_name)}
    embedding = ({"name": provider, "plugin": owners.get("embeddingProviders", {}).get(provider)}
                 if provider is not None and provider in owners.get("embeddingProviders", {}) else None)
    rr = memory_search["query"]["rerank"].get("provider") or "none"
    reranker = None if rr == "none" else {"name": rr, "plugin": owners.get("rerankers", {}).get(rr)}
    return {"memory": memory, "embeddingProvider": embedding, "reranker": reranker}


def open_memory(
    config: Config | str | os.PathLike[str] | None = None,
    *,
    agent_id: str = "main",
    workspace: str | os.PathLike[str] | None = None,
    state_dir: str | os.PathLike[str] | None = None,
    plugins: Iterable[tuple[str, object]] | Plugins | None = None,
    start: bool = True,
) -> MemoryManager:
    """Open one agent's memory with the backend config selects.

    ``config`` is a :class:`Config`, a path to a config file, or None (the
    documented lookup). ``plugins`` adds in-process plugins ``(id, obj)``.
    ``start=False`` skips the watcher and background syncs (one-shot tools).
    """
    if not isinstance(config, Config):
        config = load_config(config, state_dir=state_dir)
    elif state_dir is not None:
        config = attrs.evolve(config, state_dir=Path(state_dir).expanduser().resolve())
    if isinstance(plugins, Plugins):
        loaded = plugins
    elif plugins is None and config.plugins is not None:
        loaded = config.plugins
    else:
        loaded = load_plugins(config.data["plugins"]["disabled"], extra=plugins or ())
    agent = config.agent(agent_id, workspace=workspace)
    name = resolve_backend_name(config.data)
    if name is None or not agent.memory_search["enabled"]:
        return MemoryManager(config=config, agent=agent, plugins=loaded, backend=None, backend_name=None, pipeline=None)
    spec = loaded.backend(name)
    if (rerank := agent.memory_search["query"]["rerank"].get("provider") or "none") != "none":
        # A name no plugin registers fails every command at once, as a misspelt backend or provider does; the
        # reranker itself is built with the first search's pipeline.
        loaded.reranker(rerank)
    services = Services(plugins=loaded, config=config, agent=agent)

    def make_pipeline() -> Pipeline:
        from .pipeline import Pipeline

        reranker, why = _reranker(loaded, config, agent)
        return Pipeline.from_settings(loaded, agent.memory_search, reranker, entries=agent.plugin_entries,
                                      reranker_reason=why)

    backend = _create_backend(loaded, spec, BackendContext(
        config=config, agent=agent, services=services, spec=spec,
        plugin_settings=loaded.entry_settings("backends", name, agent.plugin_entries)))
    if start and isinstance(backend, StartableBackend):
        backend.start()
    return MemoryManager(config=config, agent=agent, plugins=loaded, backend=backend, backend_name=name,
                         pipeline=None, make_pipeline=make_pipeline)
