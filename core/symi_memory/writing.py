"""Writing memory and reading it back at session start.

``append_memory`` is the one write path (the ``memory_append`` tool and the
flush turn use it): it only ever appends, so a crash can cost the tail of
the new text but never existing notes; a write that fails (a full disk)
takes back the part of the note that went in, so the file is as it was and
the error says so. ``session_start_context`` loads what
the product document says a session starts with: today's and yesterday's
daily logs, plus ``MEMORY.md`` in the main private session only.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

import attrs

from .citations import ChatType, chat_type_from_session_key
from .errors import SymiMemoryError
from .flush import user_moment, workspace_writable
from .workspace import bom_encoding, decode_text

log = logging.getLogger("symi_memory.writing")

__all__ = [
    "AppendResult",
    "ContextFile",
    "MemoryWriteError",
    "SessionContext",
    "append_memory",
    "daily_log_path",
    "session_start_context",
]

Target = Literal["daily", "long-term"]

#: How long an append waits for another process's write to the same file before it gives up with
#: :class:`MemoryWriteError` (nothing is written then); and how long a manager's append waits for another append
#: to the workspace that shows no sign of life (a stopped process; a live one is waited for).
LOCK_WAIT_SECONDS = 30.0
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FD = os.open in os.supports_dir_fd


class MemoryWriteError(SymiMemoryError):
    """Memory could not be appended; the message names the file and the fix."""


@attrs.frozen(kw_only=True)
class AppendResult:
    """Where text was appended (workspace-relative, ``/``) and how many bytes were written."""

    path: str
    bytes_written: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "bytesWritten": self.bytes_written}


def daily_log_path(
    now: datetime | None = None, tz: str | ZoneInfo | None = None, *, days_ago: int = 0
) -> str:
    """Return ``memory/YYYY-MM-DD.md`` for the user's local date (minus ``days_ago``)."""
    day = user_moment(now, tz).date() - timedelta(days=days_ago)
    return f"memory/{day.isoformat()}.md"


@contextlib.contextmanager
def _open_dir(path: Path, parent_fd: int | None = None) -> Iterator[int]:
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | (_NOFOLLOW if parent_fd is not None else 0)
    fd = os.open(path if parent_fd is None else path.name, flags, dir_fd=parent_fd)
    try:
        yield fd
    finally:
        os.close(fd)


def _append(fd: int, data: bytes, rel: str) -> int:
    """Append UTF-8 ``data`` (in the file's own encoding when it starts with a UTF-16/32 byte order mark)."""
    size = os.fstat(fd).st_size
    newline = b"\n"
    marked = bom_encoding(os.pread(fd, 4, 0)) if size else None
    if marked is not None:
        unit = 4 if "32" in marked[0] else 2
        if (size - marked[1]) % unit:
            # It ends inside a character (a cut-off copy): text written after it would be out of step with the
            # code units and read back as other characters, so the note would be lost in plain sight.
            raise MemoryWriteError(f"refusing to append to {rel}: it is {marked[0].upper()} (byte order mark) but "
                                   f"ends inside a character ({size} bytes); repair or re-save the file first")
        data, newline = data.decode("utf-8").encode(marked[0]), "\n".encode(marked[0])
    # O_APPEND writes go to the end whatever the offset, so seeking to read the last character is safe.
    if size and os.lseek(fd, max(0, size - len(newline)), os.SEEK_SET) >= 0 and os.read(fd, len(newline)) != newline:
        data = newline + data
    view, written = memoryview(data), 0
    try:
        while written < len(data):
            written += os.write(fd, view[written:])
        os.fsync(fd)
    except BaseException:
        # A full disk (ENOSPC), a file size limit (EFBIG), an I/O error: the caller is told nothing was appended,
        # so take back what part of the note did go in (it would stay as a cut-off line, and a retry would write
        # the note again after it).
        with contextlib.suppress(OSError):
            _take_back(fd, view[:written], size, rel)
        raise
    return written


def _take_back(fd: int, ours: memoryview, size: int, rel: str) -> None:
    """Cut ``ours`` (the part of a failed append that was written) off the end of the file, only while it is still
    the file's last bytes: another program appending without our lock (an editor, a shell's ``>>``) may have
    written before or after it, and its bytes are never cut."""
    if not ours:
        return
    end = os.fstat(fd).st_size
    start = end - len(ours)
    if start >= size and os.pread(fd, len(ours), start) == ours:
        os.ftruncate(fd, start)
    else:
        log.warning("an append to %s failed after writing %d bytes, and another program wrote to the file after "
                    "them: the cut-off note is left in place", rel, len(ours))


def append_memory(
    workspace: str | Path,
    text: str,
    *,
    target: Target = "daily",
    now: datetime | None = None,
    tz: str | ZoneInfo | None = None,
    access: str | None = None,
) -> AppendResult:
    """Append ``text`` to today's ``memory/YYYY-MM-DD.md`` (``daily``) or to ``MEMORY.md`` (``long-term``).

    The date is the user's (``tz``; the machine's zone when ``None``).
    ``access`` is the sandbox's ``workspaceAccess``. Refuses symlinks, a
    missing or read-only workspace and empty text with :class:`MemoryWriteError`.
    """
    if target not in ("daily", "long-term"):
        raise MemoryWriteError(f"target {target!r} is not 'daily' or 'long-term'")
    if not text or not text.strip():
        raise MemoryWriteError("nothing to append: text is empty")
    root = Path(workspace).expanduser().resolve()
    if not root.is_dir():
        if root.exists():
            raise MemoryWriteError(f"workspace {root} is a file, not a folder; point agents.defaults.workspace at "
                                   "the folder that holds MEMORY.md and memory/")
        raise MemoryWriteError(f"workspace {root} does not exist; create it or set agents.defaults.workspace")
    if not workspace_writable(root, access):
        raise MemoryWriteError(
            f"workspace {root} is not writable (workspaceAccess={access or 'rw'}); "
            "memory can only be appended in a writable workspace"
        )
    rel = daily_log_path(now, tz) if target == "daily" else "MEMORY.md"
    if target == "long-term" and not (root / "MEMORY.md").exists() and (root / "memory.md").is_file():
        rel = "memory.md"  # keep writing to the long-term file the user already has
    data = text.encode("utf-8") + (b"" if text.endswith("\n") else b"\n")
    try:
        return AppendResult(path=rel, bytes_written=_append_at(root, rel, data))
    except MemoryWriteError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise MemoryWriteError(
                f"refusing to write {rel}: it (or memory/) is a symlink or not a regular path"
            ) from None
        raise MemoryWriteError(f"could not append to {root / rel}: {exc.strerror or exc}") from None


def _append_at(root: Path, rel: str, data: bytes) -> int:
    target = root / rel
    for p in (target.parent, target):
        if p != root and p.is_symlink():
            raise MemoryWriteError(f"refusing to write {rel}: {p.relative_to(root)} is a symlink")
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0)
    if target.parent != root:
        with contextlib.suppress(FileExistsError):
            target.parent.mkdir()
    if not _DIR_FD:
        fd = os.open(target, flags, 0o644)
        return _write_regular(fd, rel, data)
    # Opening relative to directory fds with O_NOFOLLOW closes the gap between the checks and the open.
    with _open_dir(root) as root_fd:
        if target.parent == root:
            return _write_regular(os.open(target.name, flags, 0o644, dir_fd=root_fd), rel, data)
        with _open_dir(target.parent, root_fd) as dir_fd:
            return _write_regular(os.open(target.name, flags, 0o644, dir_fd=dir_fd), rel, data)


def _write_regular(fd: int, rel: str, data: bytes) -> int:
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise MemoryWriteError(f"refusing to write {rel}: not a regular file")
        if sys.platform == "win32":  # O_APPEND alone (locking a memory file's byte would refuse its readers)
            return _append(fd, data, rel)
        from .locks import lock_exclusive, unlock

        # Appenders in other processes must not both skip the separator newline, nor take back each other's bytes.
        try:
            locked = lock_exclusive(fd, LOCK_WAIT_SECONDS)
        except TimeoutError:
            raise MemoryWriteError(f"could not append to {rel}: another process has held a lock on it for "
                                   f"{LOCK_WAIT_SECONDS:g} s; nothing was written, try again") from None
        try:
            return _append(fd, data, rel)
        finally:
            if locked:  # not left to close(): a child forked meanwhile holds a copy of fd, and the lock with it
                with contextlib.suppress(OSError):
                    unlock(fd)
    finally:
        os.close(fd)


@attrs.frozen(kw_only=True)
class ContextFile:
    """One memory file loaded at session start."""

    path: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "text": self.text}


@attrs.frozen(kw_only=True)
class SessionContext:
    """What a session starts with; ``long_term`` tells whether ``MEMORY.md`` was eligible."""

    chat_type: ChatType
    date: str
    long_term: bool
    files: tuple[ContextFile, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "chatType": self.chat_type,
            "date": self.date,
            "longTerm": self.long_term,
            "files": [f.to_dict() for f in self.files],
        }

    def render(self) -> str:
        """The files as one Markdown block for a system prompt (empty when there are none)."""
        return "\n\n".join(f"## {f.path}\n\n{f.text.rstrip()}" for f in self.files)


def _read_memory_file(root: Path, rel: str) -> ContextFile | None:
    path = root / rel
    if path.is_symlink() or not path.is_file():
        return None
    try:
        text, _ = decode_text(path.read_bytes())
    except OSError:
        return None
    return ContextFile(path=rel, text=text)


def session_start_context(
    workspace: str | Path,
    *,
    session_key: str | None = None,
    now: datetime | None = None,
    tz: str | ZoneInfo | None = None,
) -> SessionContext:
    """Load ``MEMORY.md`` (or ``memory.md``; direct sessions only), yesterday's and today's daily logs.

    Group and channel sessions never get the long-term file: it holds
    private notes. Missing files and symlinks are left out.
    """
    root = Path(workspace).expanduser().resolve()
    chat_type = chat_type_from_session_key(session_key)
    long_term = chat_type == "direct"
    files: list[ContextFile] = []
    if long_term:
        for name in ("MEMORY.md", "memory.md"):
            found = _read_memory_file(root, name)
            if found is not None:
                files.append(found)
                break
    if not (root / "memory").is_symlink():
        for days_ago in (1, 0):
            found = _read_memory_file(root, daily_log_path(now, tz, days_ago=days_ago))
            if found is not None:
                files.append(found)
    return SessionContext(
        chat_type=chat_type, date=daily_log_path(now, tz)[7:17], long_term=long_term, files=tuple(files)
    )
