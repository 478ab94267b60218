"""When to sync: first search of a session, dirty searches, the watcher, the interval.

Nothing here ever makes a search wait: syncs and staleness checks run on one
background worker thread, coalescing requests that arrive while it is busy.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from .. import forking
from ..workspace import IGNORED_DIRS

if TYPE_CHECKING:
    from ..config import AgentView

__all__ = ["STALE_CHECK_SECONDS", "SyncScheduler", "WATCH_RECHECK_SECONDS"]

log = logging.getLogger("symi_memory.sync")

STALE_CHECK_SECONDS = 1.0
WATCH_RECHECK_SECONDS = 30.0


@attrs.define
class SyncScheduler:
    """Background sync triggers for one backend."""

    agent: AgentView
    run_sync: Callable[[str], None]
    # check_stale(for_search): for a search, any new transcript line counts; otherwise (the watcher's
    # periodic check) only transcripts past the delta thresholds do.
    check_stale: Callable[[bool], bool]
    dirty: bool = True
    _seen_sessions: set[str] = attrs.field(factory=set)
    _wake: threading.Event = attrs.field(factory=threading.Event)
    _stop: threading.Event = attrs.field(factory=threading.Event)
    _pending: str | None = None
    _check_requested: bool = False
    _check_for_search: bool = False
    _last_check: float = 0.0
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    _threads: list[threading.Thread] = attrs.field(factory=list)
    _rewatch: threading.Event = attrs.field(factory=threading.Event)
    busy: bool = False
    changes: int = 0  # how many changes the watcher reported so far
    #: A forked child's copy of a started scheduler, whose threads are the parent's: started again (in the child)
    #: at its first trigger.
    _restart: bool = False

    def __attrs_post_init__(self) -> None:
        forking.track(self)

    def _after_fork_in_child(self) -> None:
        """The parent's threads do not exist here, and a lock or event one of them held would stay held: new ones,
        and the threads started again when the child first asks for a sync (a search, a write of its own).
        Not at once: a child that never uses its memory (a multiprocessing worker doing other work) starts no
        watcher."""
        self._lock = threading.Lock()
        self._wake, self._rewatch = threading.Event(), threading.Event()
        stopped, self._stop = self._stop.is_set(), threading.Event()
        if stopped:
            self._stop.set()
        self._restart = bool(self._threads) and not stopped
        self._threads = []
        self.busy = False
        self._pending, self._check_requested, self._check_for_search = None, False, False

    def _here(self) -> None:
        if self._restart:
            with self._lock:
                if not self._restart:
                    return
                self._restart = False
            self.start()

    def start(self) -> None:
        sync = self.agent.memory_search["sync"]
        self._spawn(self._worker, "symi-sync")
        if sync["watch"]:
            self._spawn(self._watch, "symi-watch")
        if sync["intervalMinutes"] > 0:
            self._spawn(self._interval, "symi-interval")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        t = threading.Thread(target=target, daemon=True, name=name)
        t.start()
        self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        self._rewatch.set()
        self._wake.set()
        for t in self._threads:
            t.join(timeout=5)

    # -------------------------------------------------------------- triggers

    def trigger(self, reason: str) -> None:
        """Ask for a background sync (coalesced with one already queued)."""
        self._here()
        with self._lock:
            if self._pending is None:
                self._pending = reason
        self._wake.set()

    def mark_dirty(self, reason: str) -> None:
        self.dirty = True
        self.changes += 1
        self.trigger(reason)

    def mark_clean(self, changes: int | None = None) -> None:
        """The index caught up with the files as of ``changes`` (a :attr:`changes` value read before the sync).

        A change reported while the sync ran keeps the index dirty.
        """
        if changes is None or changes == self.changes:
            self.dirty = False

    def on_search(self, session_key: str | None) -> None:
        sync = self.agent.memory_search["sync"]
        key = session_key or ""
        if key not in self._seen_sessions:
            self._seen_sessions.add(key)
            if sync["onSessionStart"]:
                self.trigger("session-start")
                return
        if self.dirty and sync["onSearch"]:
            self.trigger("search")
            return
        now = time.monotonic()
        # The safety net for a watcher that stopped firing: cheap, rate-limited, off the search path.
        if now - self._last_check >= STALE_CHECK_SECONDS:
            self._last_check = now
            self.request_check(for_search=True)

    def request_check(self, *, for_search: bool = False) -> None:
        """Ask the worker to compare the files with the index (and sync if they differ)."""
        self._here()
        with self._lock:
            self._check_requested = True
            self._check_for_search = self._check_for_search or for_search
        self._wake.set()

    # --------------------------------------------------------------- threads

    def _worker(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            with self._lock:
                reason, self._pending = self._pending, None
                check, self._check_requested = self._check_requested, False
                for_search, self._check_for_search = self._check_for_search, False
            if reason is None and check:
                try:
                    if self.check_stale(for_search):
                        self.dirty = True
                        reason = "stale-search" if for_search else "stale"
                except Exception as exc:
                    log.warning("staleness check failed: %s", exc)
            if reason is not None:
                self.busy = True
                try:
                    self.run_sync(reason)
                finally:
                    self.busy = False

    def _interval(self) -> None:
        seconds = self.agent.memory_search["sync"]["intervalMinutes"] * 60
        while not self._stop.wait(seconds):
            self.trigger("interval")

    def _tree_roots(self) -> list[str]:
        """Folders watched recursively: memory/, extra folders, the transcripts folder."""
        ws = str(self.agent.workspace)
        roots = []
        mem = os.path.join(ws, "memory")
        if os.path.isdir(mem) and not os.path.islink(mem):
            roots.append(mem)
        for extra in self.agent.memory_search.get("extraPaths") or []:
            p = os.path.normpath(os.path.join(ws, os.path.expanduser(extra)))
            if os.path.islink(p):
                continue
            target = p if os.path.isdir(p) else os.path.dirname(p)
            if os.path.isdir(target) and target != ws:
                roots.append(target)
        if self.agent.sessions_dir.is_dir():
            roots.append(str(self.agent.sessions_dir))
        return roots

    def _watch(self) -> None:
        """The workspace root without recursion (MEMORY.md, memory.md, a new memory/), plus the trees.

        Watching the whole workspace recursively would also watch whatever else
        lives there (a checkout's node_modules), which can exhaust inotify watches.
        """
        try:
            import watchfiles
        except ImportError:  # pragma: no cover - a core dependency
            log.warning("watchfiles is not installed; file watching is off")
            return
        ws = str(self.agent.workspace)

        def root_filter(_change: object, path: str) -> bool:
            name = os.path.basename(path)
            return os.path.dirname(path) == ws and name in ("MEMORY.md", "memory.md", "memory")

        debounce = max(int(self.agent.memory_search["sync"]["watchDebounceMs"]), 50)
        trees = False
        while not self._stop.is_set():
            # A workspace that does not exist (yet, or again: renamed, removed or unmounted for a while) is waited
            # for; once there, the check of the new watch finds what changed meanwhile.
            while (seen := _identity(ws)) is None:
                if self._stop.wait(1.0):
                    return
            if not trees:
                trees = True
                self._spawn(lambda: self._watch_trees(watchfiles), "symi-watch-trees")
            else:
                self._rewatch.set()  # back: its memory/ (and the extra folders in it) are other folders now

            def same(seen: tuple[int, int] = seen) -> bool:
                return _identity(ws) == seen

            try:
                for changes in self._watching(watchfiles, [ws], root_filter, debounce, self._stop, recursive=False,
                                              alive=same):
                    if any(os.path.basename(p) == "memory" for _, p in changes):
                        self._rewatch.set()  # memory/ appeared or went: watch the trees again
                    self.mark_dirty("watch")
            except Exception as exc:  # the staleness check still covers us
                log.warning("file watcher stopped: %s", exc)
                return
            if not self._stop.is_set():
                # The folder watched is gone (or another one took its name): a sync reports it (its indexed files
                # are kept), and the wait above watches the next one.
                self.mark_dirty("watch")

    def _watching(self, watchfiles: Any, roots: list[str], flt: Any, debounce: int, stop: threading.Event, *,
                  recursive: bool, alive: Callable[[], bool]) -> Any:
        """Yield non-empty change sets; check the files once the watch is live, and every so often.

        A change made while a watch was being set up raises no event, so the
        first (empty) tick after the watch is live triggers one comparison of
        the files with the index; later ticks repeat it every
        ``WATCH_RECHECK_SECONDS`` in case events were lost (an inotify overflow).
        Ends once ``alive()`` (asked at every tick, about once a second) is false: a watched folder removed
        raises nothing, and one made again in its place is another folder, which no watch follows.
        """
        last = None
        # A folder it cannot read (chmod 000, another user's) is left out of the watch, as a sync leaves it out (and
        # keeps what the index holds from it): without this the whole watch fails to start on it, for every file.
        for changes in watchfiles.watch(*roots, watch_filter=flt, debounce=debounce, stop_event=stop,
                                        recursive=recursive, rust_timeout=1000, yield_on_timeout=True,
                                        raise_interrupt=False, ignore_permission_denied=True):
            if not alive():
                return
            now = time.monotonic()
            if last is None or now - last >= WATCH_RECHECK_SECONDS:
                last = now
                self.request_check()
            if changes:
                yield changes

    def _watch_trees(self, watchfiles: Any) -> None:
        debounce = max(int(self.agent.memory_search["sync"]["watchDebounceMs"]), 50)
        while not self._stop.is_set():
            self._rewatch.clear()
            if self._stop.is_set():  # stop() may have set _rewatch just before the clear
                return
            roots = self._tree_roots()
            if not roots:
                self._rewatch.wait(1.0)  # memory/ made (the root watcher says so), or an extra folder back
                continue

            def relevant(_change: object, path: str, roots: list[str] = roots) -> bool:
                # Ignored folders are judged below the watched root, never by the root's own location.
                root = next((r for r in roots if path == r or path.startswith(r + os.sep)), None)
                rel = path[len(root) + 1 :] if root else path
                return path.endswith((".md", ".jsonl")) and not set(rel.split(os.sep)) & IGNORED_DIRS

            seen = [_identity(r) for r in roots]

            def alive(roots: list[str] = roots, seen: list[tuple[int, int] | None] = seen) -> bool:
                # The same folders, none gone or made again, and no other one to watch (an extra folder back).
                return [_identity(r) for r in roots] == seen and self._tree_roots() == roots

            try:
                for _changes in self._watching(watchfiles, roots, relevant, debounce, self._rewatch, recursive=True,
                                               alive=alive):
                    self.mark_dirty("watch")
            except Exception as exc:  # a vanished root: look again shortly; the staleness check covers the gap
                log.debug("tree watcher restarting: %s", exc)
                self._stop.wait(1.0)


def _identity(folder: str) -> tuple[int, int] | None:
    """``(device, inode)`` of the folder at ``folder``; None when there is none (missing, a file, unreadable)."""
    try:
        st = os.stat(folder)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None
