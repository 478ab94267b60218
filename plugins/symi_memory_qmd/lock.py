"""One qmd update at a time per qmd home, across processes.

Two ``qmd update`` runs on one index at once fail ("SqliteError: constraint
failed"), and so do two first ``collection add`` runs: an agent host's interval
update and an operator's ``symi-memory index`` would send each other to the
fallback. Every update (sessions export, collection reconcile, ``update``,
``embed``) therefore holds an exclusive ``flock`` on ``<home>/update.lock``.
The qmd processes of an update inherit the lock's descriptor, so a qmd left
running by a killed process keeps the lock until it exits. The file holds the
holder's pid and start time, which ``status`` reports from any process.
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
        """In a forked child: the lock a parent thread's update holds is the parent's. The child's copy of its
        descriptor is closed: it would hold the lock (one ``flock`` per open file, whichever process lets go) until
        the child exits, and every update, the child's own too, waited for it."""
        fd, self.fd = self.fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    @property
    def path(self) -> Path:
        return self.home / LOCK_FILE

    def acquire(self, wait_s: float, cancel: threading.Event | None = None) -> int:
        """Take the lock, waiting up to ``wait_s`` (0: not at all), and return its descriptor; raises
        :class:`UpdateBusy` when it stays held, or as soon as ``cancel`` is set (the backend closing)."""
        import fcntl

        self.home.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + max(0.0, wait_s)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline or (cancel is not None and cancel.is_set()):
                    found = holder(self.home)
                    os.close(fd)
                    raise UpdateBusy(self.path, found) from None
                if cancel is not None:
                    cancel.wait(POLL_S)
                else:
                    time.sleep(POLL_S)
            except BaseException:
                os.close(fd)
                raise
        note = json.dumps({"pid": os.getpid(), "startedAt": time.time()}).encode("utf-8")
        os.ftruncate(fd, 0)
        os.pwrite(fd, note, 0)
        self.fd = fd
        return fd

    def release(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)  # drops this descriptor's hold; a qmd child still running keeps the lock until it exits


def holder(home: Path) -> dict[str, Any] | None:
    """``{pid, startedAt, thisProcess}`` of the update running on this qmd home now, in any process; else None."""
    import fcntl

    try:
        fd = os.open(home / LOCK_FILE, os.O_RDONLY)
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
    finally:
        os.close(fd)
    if not isinstance(found, dict):
        found = {}
    pid = found.get("pid")
    return {"pid": pid if isinstance(pid, int) else None, "startedAt": found.get("startedAt"),
            "thisProcess": pid == os.getpid()}
