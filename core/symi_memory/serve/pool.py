"""Warm managers, one per agent, and embedding models shared between them."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import attrs

from ..config import Config
from ..errors import BackendError, SymiMemoryError
from ..manager import MemoryManager, open_memory
from ..plugins import Plugins, load_plugins
from ..specs import EmbeddingProvider, ProviderContext, ProviderSpec
from ..types import SyncProgress

__all__ = ["AgentPool", "AgentStarting", "AgentUnavailable", "SharedProviders", "UnknownAgent", "check_agent_id",
           "ensure_fresh"]

log = logging.getLogger("symi_memory.serve")

_AGENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class UnknownAgent(SymiMemoryError):
    """A request named an agent this server does not serve (HTTP 404)."""

    exit_code = 2


class AgentUnavailable(SymiMemoryError):
    """An agent could not be opened (its index file unreadable, a disk error): HTTP 503, a tool error over MCP."""


class AgentStarting(SymiMemoryError):
    """An agent with no index yet is still building it after ``serve.firstSyncWaitSeconds``: HTTP 503 with
    ``Retry-After``, a tool error over MCP. The build goes on; a later request is answered once it is done."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def check_agent_id(agent_id: str) -> str:
    """Agent ids name index files and state folders: letters, digits, ``_ . -``, no ``..``."""
    if not isinstance(agent_id, str) or not _AGENT_ID.fullmatch(agent_id) or ".." in agent_id:
        raise SymiMemoryError(f"invalid agent id {agent_id!r}: use letters, digits, '_', '.', '-' (at most 64)")
    return agent_id


def ensure_fresh(manager: MemoryManager, *, reason: str,
                 progress: Callable[[SyncProgress], None] | None = None, strict: bool = False) -> bool:
    """Sync now when files changed since the last sync (what a one-shot CLI search does first). True if synced.

    A :class:`BackendError` (a store it cannot reach or write) is logged and answered False, unless ``strict``
    (an agent's first sync in ``serve``, which says it failed and tries again): then it is raised."""
    if not manager.enabled:
        return False
    is_stale = getattr(manager.backend, "is_stale", None)
    try:
        if callable(is_stale):
            # One listing of the workspace against the index; files waiting only for vectors are searchable already.
            stale = is_stale(retry_pending=False)
        else:
            st = manager.status()
            stale = bool(st.get("dirty")) or not st.get("files")
        if stale:
            manager.sync(reason=reason, progress=progress)
    except BackendError as exc:
        if strict:
            raise
        # A backend that cannot reach its store (a database server down): the search still answers from
        # what it can reach and says why, as the one-shot CLI's does.
        log.warning("not synced before answering (%s): %s", reason, exc)
        return False
    return bool(stale)


class _Handle:
    """One agent's view of a shared provider: ``close()`` releases it once."""

    def __init__(self, owner: SharedProviders, key: str, inner: EmbeddingProvider) -> None:
        self._owner = owner
        self._key = key
        self._inner = inner
        self._closed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._owner.release(self._key)


class SharedProviders:
    """Embedding providers built once per identical settings and shared by every agent using them.

    A local model is loaded once however many agents the server holds; the
    last agent to close its handle closes the model.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, list[Any]] = {}  # key -> [provider, refcount]
        self.created = 0

    def wrap(self, spec: ProviderSpec) -> ProviderSpec:
        factory = spec.factory

        def shared_factory(ctx: ProviderContext) -> EmbeddingProvider:
            key = json.dumps([spec.name, ctx.model, {k: ctx.settings.get(k) for k in ("local", "remote", "model")},
                              ctx.models], sort_keys=True, default=str)
            with self._lock:
                entry = self._entries.get(key)
                if entry is None:
                    entry = self._entries[key] = [factory(ctx), 0]
                    self.created += 1
                entry[1] += 1
                return _Handle(self, key, entry[0])  # type: ignore[return-value]

        return attrs.evolve(spec, factory=shared_factory)

    def release(self, key: str) -> None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] > 0:
                return
            del self._entries[key]
        entry[0].close()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"loaded": len(self._entries), "users": sum(e[1] for e in self._entries.values()),
                    "models": sorted({f"{e[0].id}/{e[0].model}" for e in self._entries.values()})}


#: The longest wait between two tries of an agent's failed first sync (each failure doubles the wait from
#: ``serve.firstSyncRetrySeconds``).
FIRST_SYNC_RETRY_MAX_SECONDS = 300.0


@attrs.define
class _CatchUp:
    """An agent's first sync since this server opened it, running in a thread of its own; tried again, waits
    doubling up to :data:`FIRST_SYNC_RETRY_MAX_SECONDS`, while it fails."""

    indexed: bool  # the index held files when it opened: requests are answered from it meanwhile
    started: float = attrs.field(factory=time.time)
    #: Set once the first try ended, landed or failed: no request waits for it any more.
    done: threading.Event = attrs.field(factory=threading.Event)
    #: Set to end the wait before the next try early: the server stopping, or another sync of the agent landed.
    wake: threading.Event = attrs.field(factory=threading.Event)
    progress: SyncProgress | None = None
    error: str | None = None  # why the last try failed, while the sync is still to land
    failures: int = 0
    failed_at: float | None = None
    retry_at: float | None = None  # time.time() of the next try; None while a try runs
    #: Set when the agent was closed for idleness while its failed first sync waited: that sync is not tried again
    #: (the agent's next request opens it afresh, with a first sync of its own).
    cancelled: bool = False

    def view(self) -> dict[str, Any]:
        p = self.progress
        out: dict[str, Any] = {
            "state": "running" if self.error is None else "failed" if self.retry_at is not None else "retrying",
            "startedAt": self.started, "seconds": round(time.time() - self.started, 1),
            "indexedBefore": self.indexed, "phase": p.phase if p else "scan",
            "done": p.done if p else 0, "total": p.total if p else 0}
        if self.error is not None:
            out.update(error=self.error, failures=self.failures, failedAt=self.failed_at,
                       retryInSeconds=round(max(0.0, self.retry_at - time.time()), 1) if self.retry_at else 0)
        return out

    def warning(self, agent_id: str) -> str:
        p = self.progress
        if self.error is not None:
            what = "as it was" if self.indexed else "as it was, which is empty (nothing was indexed yet)"
            when = (f"tried again in {max(0.0, self.retry_at - time.time()):.0f} s" if self.retry_at is not None
                    else "being tried again now")
            times = f" ({self.failures} tries)" if self.failures > 1 else ""
            return (f"agent {agent_id!r}'s first sync failed{times}: {self.error}; results come from the index "
                    f"{what}, and files changed since then may be missing until it lands ({when})")
        step = f" ({p.phase} {p.done}/{p.total})" if p is not None and p.total else ""
        return (f"agent {agent_id!r} is catching up with its files{step}, started "
                f"{time.time() - self.started:.0f} s ago: results come from the index as it was, and files "
                f"changed since then may be missing until it is done")


@attrs.define
class _Entry:
    manager: MemoryManager
    opened_at: float
    last_used: float
    in_flight: int = 0


class AgentPool:
    """Managers by agent id, opened on first use (watcher started), closed after ``idle_seconds`` unused.

    Agents the server serves: ``main``, every ``agents.list[].id`` and ``serve.agents``;
    ``pinned`` ones are opened at start and never closed for idleness.

    An agent's first sync (catching up with what changed while no server watched it, minutes for a large
    workspace) runs in a thread of its own: an agent whose index holds files answers from it at once
    (:meth:`catching_up` says a sync runs), one with no index yet waits for it at most ``first_sync_wait``
    seconds, then is refused with :class:`AgentStarting` while the build goes on. A first sync that fails (an index
    it cannot write, a disk full) is tried again after ``first_sync_retry`` seconds, each failure doubling the wait
    (at most :data:`FIRST_SYNC_RETRY_MAX_SECONDS`), until it lands: meanwhile the agent answers from its index as it
    is, even an empty one, and :meth:`catching_up` says why it failed and when it is tried again.
    """

    def __init__(self, config: Config, *, idle_seconds: float = 1800.0, pinned: tuple[str, ...] = (),
                 plugins: Plugins | None = None, clock: Callable[[], float] = time.monotonic,
                 workspaces: dict[str, str] | None = None, first_sync_wait: float = 30.0,
                 first_sync_retry: float = 5.0) -> None:
        self.config = config
        self.first_sync_wait = first_sync_wait
        self.first_sync_retry = first_sync_retry
        self.workspaces = dict(workspaces or {})
        self.idle_seconds = idle_seconds
        self.pinned = tuple(check_agent_id(a) for a in pinned)
        self.clock = clock
        self.providers = SharedProviders()
        self.plugins = plugins or load_plugins(config.data["plugins"]["disabled"])
        registry = self.plugins.registries["embeddingProviders"]
        for name, spec in list(registry.items()):
            registry[name] = self.providers.wrap(spec)
        listed = [e.get("id") for e in config.data["agents"].get("list", []) if isinstance(e, dict)]
        self.allowed = {"main", *[a for a in listed if isinstance(a, str)], *self.pinned}
        self._lock = threading.Lock()
        self._opening: dict[str, threading.Lock] = {}
        self._entries: dict[str, _Entry] = {}
        self._starting: dict[str, MemoryManager] = {}  # opened, still catching up with the files
        self._catching: dict[str, _CatchUp] = {}  # the first sync of each agent that is still running
        self._syncs: dict[str, dict[str, Any]] = {}
        self._stopping = False  # the server is stopping: open agents answer what is in flight, none opens
        self._closed = False
        self._close_lock = threading.Lock()

    def check(self, agent_id: str) -> str:
        check_agent_id(agent_id)
        if agent_id not in self.allowed:
            raise UnknownAgent(f"agent {agent_id!r} is not served here (served: {', '.join(sorted(self.allowed))}); "
                               f"add it to agents.list or serve.agents")
        return agent_id

    def acquire(self, agent_id: str, *, wait: float | None = None, index: bool = True) -> MemoryManager:
        """The agent's manager, opened on first use. Pair with :meth:`release`.

        While the agent's first sync runs and its index held no file when it opened, waits for that sync at most
        ``wait`` seconds (``first_sync_wait`` by default), then raises :class:`AgentStarting`; unless ``index`` is
        False (the caller needs no index: the agent's status, which says how far that sync is)."""
        manager = self._acquire(agent_id)
        catch = self._catching.get(agent_id)
        if catch is None or catch.indexed or not index or catch.error is not None:  # failed: answered, saying so
            return manager
        limit = self.first_sync_wait if wait is None else wait
        if catch.done.wait(limit) and not self.stopping:
            return manager
        self.release(agent_id)
        if self.stopping:
            raise SymiMemoryError("the server is shutting down")
        p = catch.progress
        step = f"; {p.phase} {p.done} of {p.total}" if p is not None and p.total else ""
        raise AgentStarting(f"agent {agent_id!r} has no index yet and is still building it "
                            f"({time.time() - catch.started:.0f} s so far{step}); try again shortly "
                            f"(serve.firstSyncWaitSeconds = {self.first_sync_wait:g})",
                            retry_after=max(1, min(30, int(self.first_sync_wait) or 5)))

    def catching_up(self, agent_id: str) -> _CatchUp | None:
        """The agent's first sync while it runs or is to be tried again, else None."""
        return self._catching.get(agent_id)

    def _acquire(self, agent_id: str) -> MemoryManager:
        self.check(agent_id)
        with self._lock:
            if self._closed:
                raise SymiMemoryError("the server is shutting down")
            entry = self._entries.get(agent_id)
            if entry is not None:
                entry.in_flight += 1
                entry.last_used = self.clock()
                return entry.manager
            if self._stopping:
                raise SymiMemoryError("the server is shutting down")
            opening = self._opening.setdefault(agent_id, threading.Lock())
        with opening:  # one thread opens an agent; the others wait for it, other agents go on
            with self._lock:
                entry = self._entries.get(agent_id)
                if entry is not None:
                    entry.in_flight += 1
                    entry.last_used = self.clock()
                    return entry.manager
            try:
                manager = self._open(agent_id)
            except SymiMemoryError:
                raise
            except Exception as exc:  # not one of ours: say which agent, once, and answer with it
                log.warning("could not open agent %s: %s: %s", agent_id, type(exc).__name__, exc)
                raise AgentUnavailable(f"agent {agent_id!r} could not be opened ({type(exc).__name__}: {exc}); "
                                       "the server's log says more") from exc
            with self._lock:
                if self._closed or self._stopping:
                    manager.close()
                    raise SymiMemoryError("the server is shutting down")
                now = self.clock()
                entry = self._entries[agent_id] = _Entry(manager=manager, opened_at=now, last_used=now, in_flight=1)
        return entry.manager

    def _open(self, agent_id: str) -> MemoryManager:
        manager = open_memory(self.config, agent_id=agent_id, workspace=self.workspaces.get(agent_id),
                              plugins=self.plugins, start=True)
        try:
            backend = manager.backend
            if backend is not None and hasattr(backend, "on_synced"):
                def synced(report: Any, agent_id: str = agent_id) -> None:
                    self._syncs[agent_id] = {"at": time.time(), **report.to_dict()}
                    catch = self._catching.get(agent_id)
                    if catch is not None and catch.retry_at is not None:
                        catch.wake.set()  # a sync landed (the watcher's, the API's): the failed first sync's
                        # next try comes now, and finds what is left to do (if anything)

                backend.on_synced = synced
            indexed = bool(manager.status().get("files")) if manager.enabled else True
        except Exception:
            manager.close()
            raise
        catch = _CatchUp(indexed=indexed)
        with self._lock:
            closed = self._closed or self._stopping
            if not closed:
                self._starting[agent_id] = manager  # close() stops its first sync at the next file
                self._catching[agent_id] = catch
        if closed:
            manager.close()
            raise SymiMemoryError("the server is shutting down")
        threading.Thread(target=self._catch_up, args=(agent_id, manager, catch), name=f"symi-first-sync-{agent_id}",
                         daemon=True).start()
        log.info("opened agent %s (%s)%s", agent_id, manager.backend_name,
                 "" if indexed else "; no index yet: requests wait for its first sync")
        return manager

    def _catch_up(self, agent_id: str, manager: MemoryManager, catch: _CatchUp) -> None:
        """The agent's first sync, in its own thread: requests are answered meanwhile (see :meth:`acquire`). A try
        that fails is said (``catch.error``, the answers' warnings, ``status``) and tried again after a wait that
        doubles with each failure: a folder not mounted yet, an index made writable, space freed heal without a
        restart."""

        def progress(p: SyncProgress) -> None:
            catch.progress = p

        try:
            while True:
                manager._appends_unindexed = True  # an append's own sync would wait for this one
                try:
                    reason = f"serve-open (retry {catch.failures})" if catch.failures else "serve-open"
                    ensure_fresh(manager, reason=reason, progress=progress, strict=True)
                    return
                except Exception as exc:
                    if self.stopping or catch.cancelled:  # close(), stop_opening() or reap_idle() cut it short
                        return
                    catch.failures += 1
                    wait = min(FIRST_SYNC_RETRY_MAX_SECONDS, self.first_sync_retry * 2 ** min(catch.failures - 1, 30))
                    catch.error = f"{type(exc).__name__}: {exc}"
                    catch.failed_at, catch.retry_at, catch.progress = time.time(), time.time() + wait, None
                    log.warning("the first sync of agent %s failed (%s); tried again in %g s (failure %d)",
                                agent_id, catch.error, wait, catch.failures)
                finally:
                    manager._appends_unindexed = False
                catch.done.set()  # the requests waiting for a first index are answered, saying it failed
                catch.wake.wait(wait)
                catch.wake.clear()
                catch.retry_at = None
                if self.stopping or catch.cancelled:
                    return
        finally:
            with self._lock:
                if self._catching.get(agent_id) is catch:  # not the entry of the agent opened afresh since
                    self._starting.pop(agent_id, None)
                    self._catching.pop(agent_id, None)
            catch.done.set()

    def release(self, agent_id: str) -> None:
        with self._lock:
            entry = self._entries.get(agent_id)
            if entry is not None:
                entry.in_flight = max(0, entry.in_flight - 1)
                entry.last_used = self.clock()

    def last_sync(self, agent_id: str) -> dict[str, Any] | None:
        return self._syncs.get(agent_id)

    def open_agents(self) -> list[str]:
        with self._lock:
            return sorted(self._entries)

    def reap_idle(self) -> list[str]:
        """Close agents unused for ``idle_seconds`` (never pinned ones, never mid-request).

        An agent being closed keeps its opening lock until it is closed: a request for it meanwhile waits,
        then opens it afresh, never two managers of one agent at once.
        """
        if self.idle_seconds <= 0:
            return []
        now = self.clock()
        closing = []
        with self._lock:
            for agent_id, entry in list(self._entries.items()):
                catch = self._catching.get(agent_id)
                # A first sync running is not cut short; one that failed and waits to be tried again does not keep
                # the agent open for ever (its thread, watcher and index, a retry every 5 minutes, for an agent
                # nobody asks for): it ends with the agent, whose next request opens it and tries afresh.
                if (agent_id in self.pinned or entry.in_flight or (catch is not None and catch.retry_at is None)
                        or now - entry.last_used < self.idle_seconds):
                    continue
                opening = self._opening.setdefault(agent_id, threading.Lock())
                if not opening.acquire(blocking=False):  # a request is looking it up right now: not idle
                    continue
                if catch is not None:
                    catch.cancelled = True
                    del self._catching[agent_id]
                    self._starting.pop(agent_id, None)
                    catch.wake.set()
                closing.append((agent_id, self._entries.pop(agent_id), opening))
        for agent_id, entry, opening in closing:
            try:
                log.info("closing idle agent %s", agent_id)
                entry.manager.close()
            except Exception as exc:  # the next request opens it afresh
                log.warning("closing agent %s failed: %s", agent_id, exc)
            finally:
                opening.release()
        return [a for a, _, _ in closing]

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop_opening` or :meth:`close` was called."""
        return self._stopping or self._closed

    def stop_opening(self) -> None:
        """The server is stopping: no agent opens any more, and the agents building their first index stop at the
        next file (the requests waiting for them are answered at once); open agents, those catching up from an
        index they answer from included, answer the requests in flight until :meth:`close`."""
        with self._lock:
            self._stopping = True
            # Not one whose first sync failed: it answers from its index (empty) meanwhile, nobody waits for it.
            starting = [m for a, m in self._starting.items()
                        if not self._catching[a].indexed and self._catching[a].error is None]
            for catch in self._catching.values():
                catch.wake.set()  # a failed first sync is not tried again
        for manager in starting:  # its waiters then refuse
            try:
                manager.close()
            except Exception as exc:
                log.warning("closing agent %s failed: %s", manager.agent.id, exc)

    def close(self) -> None:
        """Close every manager (watchers stop, syncs in progress finish their transaction first).

        A second call (the shutdown's grace ran out while the server was stopping) returns once the first is done.
        """
        with self._close_lock:
            self._close()

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            entries = list(self._entries.values())
            self._entries.clear()
            starting = list(self._starting.values())
            for catch in self._catching.values():
                catch.wake.set()
        for manager in starting:  # its first sync stops at the next file; acquire() then refuses and closes it
            try:
                manager.close()
            except Exception as exc:
                log.warning("closing agent %s failed: %s", manager.agent.id, exc)
        for entry in entries:
            try:
                entry.manager.close()
            except Exception as exc:  # one agent failing to close must not keep the others open
                log.warning("closing agent %s failed: %s", entry.manager.agent.id, exc)
