"""One qmd update at a time per qmd home, across processes.

Two ``qmd update`` runs on one index at once fail ("SqliteError: constraint
failed"), and so do two first ``collection add`` runs: an agent host's interval
update and an operator's ``symi-memory index`` would send each other to the
fallback. Every update (sessions export, collection reconcile, ``update``,
``embed``) therefore holds an exclusive ``flock`` on ``<home>/update.lock``.
The qmd processes of an update inherit the lock's descriptor, so a qmd left
running by a killed process keeps the lock until it exits. The file holds the
holder's pid and start time, which ``status`` reports from any process.

A ``flock`` belongs to the open file, which a forked child shares through its copy of the descriptor: the child
would hold the parent's lock (the parent's update then let go of nothing), and wait for itself at its own update.
Every descriptor of the lock file this process has open is therefore known (:class:`_Descriptors`), opened and
closed under one lock that a fork waits for, and a forked child closes its copies of all of them (never
``LOCK_UN``, which would release the parent's lock).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import attrs

from symi_memory import forking

from .updater import UpdateSkipped

__all__ = ["LOCK_FILE", "UpdateBusy", "UpdateLock", "holder"]

LOCK_FILE = "update.lock"
POLL_S = 0.1
#: How long a fork waits for a thread opening or closing the lock file (a local file: microseconds).
FORK_WAIT_S = 5.0


class _Descriptors(forking.Descriptors):
    """The lock file's descriptors open in this process (an update's, a :func:`holder` look), for forks.

    A parent thread forked between ``os.open`` and recording what it opened (an update taking the lock, or waiting
    for another process's to end) left a descriptor in the child that no fork hook knew: the parent's update then
    took the lock on the open file the two shared, and the child held it for its lifetime, past the parent's
    release: the child's syncs, and the parent's next ones, waited for it. Opening and recording, and forgetting
    and closing, are one step under the guard a fork takes first (:class:`symi_memory.forking.Descriptors`)."""

    def opened(self, path: Path, flags: int) -> int:
        with self.opening() as record:
            return record(os.open(path, flags, 0o644))

    def _after_fork_in_child(self) -> None:
        super()._after_fork_in_child()
        _HELD.clear()  # the parent's updates' locks: the child's copies are closed


_DESCRIPTORS = _Descriptors(FORK_WAIT_S)
#: The descriptors this process's updates hold the lock by: the note's pid names this process only while one does.
_HELD: set[int] = set()


class UpdateBusy(UpdateSkipped):
    """Another process holds the update lock (``holder`` says who, as :func:`holder` reads it)."""

    def __init__(self, path: Path, found: dict[str, Any] | None) -> None:
        self.holder = found or {}
        pid = self.holder.get("pid")
        super().__init__(f"another process (pid {pid if pid is not None else '?'}) is updating the qmd index "
                         f"({path})")


@attrs.define
class UpdateLock:
    """The update lock of one qmd home; :meth:`acquire` then :meth:`release`, or ``with lock.held(wait)``."""

    home: Path
    fd: int | None = None

    def __attrs_post_init__(self) -> None:
        forking.track(self)

    def _after_fork_in_child(self) -> None:
        """In a forked child: the lock a parent thread's update holds is the parent's. :class:`_Descriptors` closes
        the child's copy of its descriptor (it would hold the lock until the child exits, and every update, the
        child's own too, waited for it); closed here as well, a descriptor the child opened meanwhile could go."""
        self.fd = None

    @property
    def path(self) -> Path:
        return self.home / LOCK_FILE

    def acquire(self, wait_s: float, cancel: threading.Event | None = None) -> int:
        """Take the lock, waiting up to ``wait_s`` (0: not at all), and return its descriptor; raises
        :class:`UpdateBusy` when it stays held, or as soon as ``cancel`` is set (the backend closing)."""
        import fcntl

        self.home.mkdir(parents=True, exist_ok=True)
        fd = _DESCRIPTORS.opened(self.path, os.O_RDWR | os.O_CREAT)
        try:  # whatever ends the wait (busy, cancelled, a signal's exception in the sleep), the descriptor goes
            deadline = time.monotonic() + max(0.0, wait_s)
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    pass
                if time.monotonic() >= deadline or (cancel is not None and cancel.is_set()):
                    raise UpdateBusy(self.path, holder(self.home))
                if cancel is not None:
                    cancel.wait(POLL_S)
                else:
                    time.sleep(POLL_S)
            _HELD.add(fd)
            note = json.dumps({"pid": os.getpid(), "startedAt": time.time()}).encode("utf-8")
            os.ftruncate(fd, 0)
            os.pwrite(fd, note, 0)  # a full disk: the lock goes with its descriptor
        except BaseException:
            _HELD.discard(fd)
            _DESCRIPTORS.close(fd)
            raise
        self.fd = fd
        return fd

    def release(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            _HELD.discard(fd)
            _DESCRIPTORS.close(fd)  # drops this descriptor's hold; a qmd child still running keeps the lock until it exits


def holder(home: Path) -> dict[str, Any] | None:
    """``{pid, startedAt, thisProcess}`` of the update running on this qmd home now, in any process; else None."""
    import fcntl

    try:
        fd = _DESCRIPTORS.opened(home / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pass
        else:
            return None  # free: nobody is updating
        try:
            found = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
        except ValueError:
            found = {}
        st = os.fstat(fd)
    finally:
        _DESCRIPTORS.close(fd)  # a child forked meanwhile does not keep this look's shared lock
    if not isinstance(found, dict):
        found = {}
    pid = found.get("pid")
    if not isinstance(pid, int) or not _holds_open(pid, st):
        # the note is an earlier update's: the holder wrote none (another tool, a release from before notes, a qmd
        # a killed update left running, or one between its lock and its note)
        return {"pid": None, "startedAt": None, "thisProcess": False}
    return {"pid": pid, "startedAt": found.get("startedAt"), "thisProcess": pid == os.getpid()}


def _holds_open(pid: int, lock: os.stat_result) -> bool:
    """Whether process ``pid`` may be the lock's holder: this process while one of its updates holds the lock;
    another with the lock file among its open files (True where that cannot be told: no /proc, another user's)."""
    if pid == os.getpid():  # one of this process's updates holds this lock (not another qmd home's)
        for fd in list(_HELD):
            with contextlib.suppress(OSError):
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) == (lock.st_dev, lock.st_ino):
                    return True
        return False
    return forking.process_has_open(pid, lock) is not False
