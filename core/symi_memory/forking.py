"""A process forked from one that holds memory open (``os.fork``, multiprocessing's ``fork`` start method).

The child is a copy of the parent at one instant, with only the forking thread in it. What the parent's other
threads held then stays held for ever in the child (a sync's lock, an index's write lock, a scheduler's lock), the
threads themselves (the sync worker, the watcher, the interval timer) do not exist there, and every SQLite
connection is the parent's: SQLite forbids using one across a fork (its locks are the parent's, and a write
transaction the parent had open would be rolled back over the parent's shared WAL index by the child).

Objects that hold such state register here (:func:`track`) and define ``_after_fork_in_child()``, run in the
child right after the fork: they take new locks, forget the parent's threads and connections, and open their own
when next used. An object may also define ``_before_fork() -> bool`` (run in the forking thread of the parent
just before the fork; True when it took something) and ``_after_fork_in_parent()`` (run in the parent after the
fork, for an object whose ``_before_fork`` returned True): an index waits there for a write transaction another
thread has open to end, so that the child is never copied in the middle of one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["Descriptors", "keep", "track"]

log = logging.getLogger("symi_memory.fork")

#: By ``id()``: the objects are attrs classes compared by value, which cannot be hashed.
_TRACKED: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_TRACKED_LOCK = threading.Lock()
#: By forking thread: the objects whose ``_before_fork`` took something, for ``_after_fork_in_parent`` (run in
#: the same thread). Per thread: two threads may fork at once (the hooks run before any lock of the interpreter's
#: is taken), and one list shared let one thread clear what the other took: a lock the other's fork held was then
#: never released, every later fork waited 10 s for it and the index's writes (syncs) hung.
_TAKEN: dict[int, list[Any]] = {}
#: What a child inherited and may not release: the parent's SQLite connections that a parent thread was using at
#: the fork (closing one would wait for that thread's lock for ever, and its file locks are the parent's). Kept
#: referenced so that they are never closed (a collected connection closes itself).
_KEPT: list[Any] = []


def _pin(obj: Any) -> None:
    """Add a reference to ``obj`` that nothing ever drops (CPython; elsewhere :data:`_KEPT`'s only). ctypes is
    imported here, in a forked child that kept something, not by every process that imports this module."""
    try:
        import ctypes

        incref = ctypes.pythonapi.Py_IncRef
    except (ImportError, AttributeError):  # pragma: no cover - another interpreter
        return
    incref.argtypes = [ctypes.py_object]
    incref(obj)


def track(obj: Any) -> None:
    """Have ``obj``'s fork methods run at each fork of this process (held weakly: a collected object is not)."""
    with _TRACKED_LOCK:
        _TRACKED[id(obj)] = obj


def keep(obj: Any) -> None:
    """Keep an inherited object referenced for the child's lifetime, never closed (see :data:`_KEPT`).

    Not even when the child exits as a Python program does (``sys.exit``, the end of its script): the
    interpreter's finalization frees module globals, and an SQLite connection freed then closes, which for the
    parent's writer inside a transaction rolls that transaction back over the WAL index the two processes share:
    the parent's commit then fails, or lands in a malformed index. The extra reference is never dropped."""
    _KEPT.append(obj)
    _pin(obj)


class Descriptors:
    """Descriptors of one kind of locked file (an update lock, a rebuild's build file) open in this process, whose
    copies a forked child closes.

    A ``flock`` belongs to the open file, which a forked child shares through its copy of the descriptor: a copy
    the child kept held the parent's lock for the child's lifetime, past the parent's release (or its death). A
    fork in the instant between a thread opening such a file and recording the descriptor left a copy nothing knew
    of; so the open and the record are one step under :attr:`guard` (:meth:`opening`), which a fork takes first
    (waiting at most ``wait_s``: the guard is held for an ``open`` or ``close`` only, never across a ``flock`` that
    waits). The child closes its copies, never unlocking them (``LOCK_UN`` would release the parent's lock).

    ``reentrant``: the guard is an ``RLock``, for descriptors a finalizer closes (:meth:`close_recorded`), which
    the garbage collector may run inside the guard on the thread holding it. A subclass keeps some descriptors
    open in the child (:meth:`_kept_in_child`): those of the thread the fork came from, say."""

    def __init__(self, wait_s: float = 5.0, *, reentrant: bool = False) -> None:
        self.wait_s = wait_s
        self._reentrant = reentrant
        self.guard: Any = self._new_guard()
        self.open: set[int] = set()
        track(self)

    def _new_guard(self) -> Any:
        return threading.RLock() if self._reentrant else threading.Lock()

    @contextlib.contextmanager
    def opening(self) -> Iterator[Callable[[int], int]]:
        """``with d.opening() as record: fd = os.open(...); record(fd)``: no fork comes in between."""
        with self.guard:
            yield self._record

    def _record(self, fd: int) -> int:
        self.open.add(fd)
        return fd

    def close(self, fd: int) -> None:
        """Forget and close ``fd`` in one step (a fork meanwhile would leave the child a copy nothing closes)."""
        with self.guard:
            self.open.discard(fd)
            os.close(fd)

    def close_recorded(self, fds: Iterable[int]) -> None:
        """Forget and close those of ``fds`` still recorded: in a forked child, not those it closed after the fork
        (their numbers may name other files by now)."""
        with self.guard:
            for fd in fds:
                if fd in self.open:
                    self.open.discard(fd)
                    with contextlib.suppress(OSError):
                        os.close(fd)

    def _kept_in_child(self) -> set[int]:
        """The descriptors a forked child keeps open (run in the child, on the thread that forked)."""
        return set()

    def _before_fork(self) -> bool:
        return self.guard.acquire(timeout=self.wait_s)

    def _after_fork_in_parent(self) -> None:
        self.guard.release()

    def _after_fork_in_child(self) -> None:
        self.guard = self._new_guard()
        kept = self._kept_in_child() & self.open
        fds, self.open = self.open - kept, kept
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def process_has_open(pid: int, target: os.stat_result) -> bool | None:
    """Whether process ``pid`` (as this process sees pids) has the file ``target`` among its open files: False as well
    when there is no such process; None where that cannot be told (no /proc, another user's process)."""
    fds = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fds)
    except FileNotFoundError:
        return False if os.path.isdir("/proc/self/fd") else None
    except OSError:
        return None
    for name in names:
        try:
            st = os.stat(f"{fds}/{name}")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
            return True
    return False


def _snapshot() -> list[Any]:
    with _TRACKED_LOCK:
        return list(_TRACKED.values())


def _before() -> None:
    taken = _TAKEN[threading.get_ident()] = []
    for obj in _snapshot():
        before = getattr(obj, "_before_fork", None)
        if before is None:
            continue
        try:
            if before():
                taken.append(obj)
        except Exception:  # a fork must go ahead whatever happens here
            log.exception("preparing %s for a fork failed", type(obj).__name__)


def _after_in_parent() -> None:
    taken = _TAKEN.pop(threading.get_ident(), [])
    for obj in reversed(taken):
        try:
            obj._after_fork_in_parent()
        except Exception:
            log.exception("resuming %s after a fork failed", type(obj).__name__)


def _after_in_child() -> None:
    global _TRACKED_LOCK
    _TRACKED_LOCK = threading.Lock()  # another parent thread may have held it
    _TAKEN.clear()
    for obj in list(_TRACKED.values()):
        after = getattr(obj, "_after_fork_in_child", None)
        if after is None:
            continue
        try:
            after()
        except Exception:
            log.exception("making %s this forked child's own failed", type(obj).__name__)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before, after_in_parent=_after_in_parent, after_in_child=_after_in_child)
