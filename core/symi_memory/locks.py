"""Exclusive locks between processes on an open file, with a bounded wait.

Appends take two: :class:`~symi_memory.manager.MemoryManager` holds a lock file in the state dir for the whole
append (dedup lookup, write, indexing), and the writer locks the memory file itself while it writes.

- POSIX: ``flock(2)``, polled without blocking until the deadline. The kernel drops the lock when the holder's
  descriptor closes or the process dies, so a crashed appender never leaves a workspace locked.
- NFS: Linux carries ``flock`` over NFS as a POSIX byte-range lock (NFSv4, or v3 with lockd), so processes on
  different machines exclude each other too. A mount with ``nolock`` keeps locks on one machine; a file system
  that keeps no locks at all (``ENOLCK``, ``EOPNOTSUPP``) gets none: :func:`lock_exclusive` returns False and the
  append goes on as before, with ``O_APPEND`` alone.
- Windows: ``msvcrt.locking`` of the file's first byte, polled (used for the lock file; a memory file's first
  byte is not locked, as Windows would refuse readers that byte).
"""

from __future__ import annotations

import errno
import logging
import os
import sys
import time

__all__ = ["lock_exclusive", "unlock"]

log = logging.getLogger("symi_memory.locks")

#: errno values meaning the file system keeps no locks (not: someone else holds it).
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EINVAL}
_warned: set[int] = set()


def lock_exclusive(fd: int, timeout: float) -> bool:
    """Lock ``fd`` exclusively, waiting at most ``timeout`` seconds for its holder.

    True when locked; False when the file system keeps no locks (logged once per errno). Raises
    :class:`TimeoutError` when another process still holds the lock at the deadline.
    """
    deadline = time.monotonic() + max(0.0, timeout)
    pause = 0.001
    while True:
        try:
            _try(fd)
            return True
        except OSError as exc:
            held = isinstance(exc, BlockingIOError) or (
                sys.platform == "win32" and exc.errno in (errno.EACCES, errno.EDEADLK))  # LK_NBLCK: byte locked
            if not held:
                if exc.errno in _NO_LOCKS:
                    _warn(exc)
                    return False
                raise
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"lock held by another process for {timeout:g} s")
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.025)


def unlock(fd: int) -> None:
    """Let go of :func:`lock_exclusive`'s lock (closing the descriptor does too, on POSIX)."""
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    else:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_UN)


def _try(fd: int) -> None:
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    else:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _warn(exc: OSError) -> None:
    if exc.errno not in _warned:
        _warned.add(exc.errno or 0)
        log.warning("this file system keeps no file locks (%s): appends from several processes are not "
                    "serialized here", exc.strerror or exc)
