"""The per-agent session record, ``sessions.json`` (behaviour §8).

``<stateDir>/agents/<id>/sessions/sessions.json`` is a JSON object keyed by
session key. An entry holds the runtime's ``totalTokens``,
``totalTokensFresh`` and ``compactionCount``; a memory flush adds
``memoryFlushAt`` (ms since the epoch) and ``memoryFlushCompactionCount``.

Several processes (the agent runtime, the CLI) write this file, so every
update is a read-modify-write under an exclusive lock on a sidecar
``sessions.json.lock``, and every write is a temp file + fsync + rename.
A corrupt file is never replaced silently: reading it raises
:class:`SessionStoreCorrupt`, and only an explicit :meth:`SessionStore.repair`
moves it aside.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .arguments import nonblank, whole_number
from .errors import SymiMemoryError
from .sessions import sessions_dir

__all__ = ["SESSIONS_FILE", "SessionStore", "SessionStoreCorrupt", "whole_count"]

log = logging.getLogger("symi_memory.sessions")

SESSIONS_FILE = "sessions.json"
Entry = dict[str, Any]


_COUNT_TEXT = re.compile(r"(-?[0-9]{1,20})(?:\.[0-9]+)?")


def whole_count(value: Any) -> int | None:
    """A token or compaction count from a session entry (a fraction is dropped), or None when it is not a number.

    ``sessions.json`` is shared with the agent runtime, which may write a count as text (``"2"``), as
    ``Infinity`` or as junk; none of that may stop a flush decision.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None  # an estimate such as 178123.7 counts as 178123
    if isinstance(value, str):
        # "2", "-1" or "178123.7" (a runtime that writes numbers as text); "--5", "1e3", "2." are junk.
        match = _COUNT_TEXT.fullmatch(value.strip())
        if match is not None:
            return int(match.group(1))
    return None


class SessionStoreCorrupt(SymiMemoryError):
    """``sessions.json`` is not a JSON object (or an entry is not an object)."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        super().__init__(
            f"session store {path} is corrupt ({problem}); it was left untouched. "
            "Fix it by hand, or call SessionStore.repair() to move it aside and start empty."
        )


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if sys.platform == "win32":
            import msvcrt

            msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
            try:
                yield
            finally:
                msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class SessionStore:
    """Read and update ``sessions.json`` safely across threads and processes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.lock_path = self.path.with_name(self.path.name + ".lock")

    @classmethod
    def for_agent(cls, state_dir: str | Path, agent_id: str = "main") -> SessionStore:
        """The store at ``<stateDir>/agents/<agentId>/sessions/sessions.json``."""
        return cls(sessions_dir(state_dir, agent_id) / SESSIONS_FILE)

    def load(self) -> dict[str, Entry]:
        """Return every entry; a missing file is an empty store. A UTF-8 BOM (an editor's) is skipped; bytes that are not
        UTF-8, or NaN or Infinity (not JSON), are :class:`SessionStoreCorrupt`."""
        try:
            data_bytes = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            raw = data_bytes.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            # UTF-16 (PowerShell's Out-File) or another tool's bytes: corrupt, for repair() to move aside.
            raise SessionStoreCorrupt(
                self.path, f"not UTF-8: byte 0x{data_bytes[exc.start]:02x} at offset {exc.start}") from None
        if not raw.strip():
            return {}
        try:
            # NaN and Infinity are not JSON: the runtime reading this file refuses them, and they cannot be written
            # back (every update would fail): corrupt, for repair() to move aside.
            data = json.loads(raw, parse_constant=_not_json)
        except ValueError as exc:
            raise SessionStoreCorrupt(self.path, f"invalid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise SessionStoreCorrupt(self.path, f"top level is {type(data).__name__}, expected an object")
        return data

    def get(self, key: str) -> Entry | None:
        """Return the entry for ``key`` (a copy), or ``None``. A key that is not a non-blank string raises ValueError."""
        entry = self.load().get(nonblank(key, "session key"))
        if entry is None:
            return None
        if not isinstance(entry, dict):
            raise SessionStoreCorrupt(
                self.path, f"entry {key!r} is {type(entry).__name__}, expected an object"
            )
        return dict(entry)

    def update(self, key: str, change: Callable[[Entry], Entry | None] | Mapping[str, Any]) -> Entry:
        """Change one entry under the lock and return it.

        ``change`` is a mapping of fields to merge, or a function that gets
        the current entry (``{}`` when new) and returns the new one (or
        mutates it and returns ``None``). A key that is not a non-blank string
        raises ValueError.
        """
        nonblank(key, "session key")
        with _exclusive(self.lock_path):
            data = self.load()
            current = data.get(key, {})
            if not isinstance(current, dict):
                raise SessionStoreCorrupt(
                    self.path, f"entry {key!r} is {type(current).__name__}, expected an object"
                )
            entry = dict(current)
            if callable(change):
                result = change(entry)
                entry = entry if result is None else dict(result)
            else:
                entry.update(change)
            data[key] = entry
            self._write(data)
            return dict(entry)

    def record_flush(
        self, key: str, *, now_ms: int | None = None, compaction_count: int | None = None
    ) -> Entry:
        """Record that a memory flush ran for ``key`` in the current compaction cycle.

        ``compaction_count`` defaults to the entry's ``compactionCount`` (0 when unset). A blank key, or a count
        or ``now_ms`` that is not a whole number >= 0, raises ValueError.
        """
        nonblank(key, "session key")
        compaction_count = whole_number(compaction_count, "compaction_count", minimum=0)
        given = whole_number(now_ms, "now_ms", minimum=0)
        stamp = int(time.time() * 1000) if given is None else given

        def mark(entry: Entry) -> Entry:
            cycle = (
                compaction_count if compaction_count is not None else (whole_count(entry.get("compactionCount")) or 0)
            )
            entry["memoryFlushAt"] = stamp
            entry["memoryFlushCompactionCount"] = cycle
            return entry

        return self.update(key, mark)

    def repair(self) -> Path | None:
        """Move a corrupt file aside (``sessions.json.corrupt-<ms>``) and return its new path.

        Returns ``None`` and changes nothing when the file is missing or valid.
        """
        with _exclusive(self.lock_path):
            try:
                self.load()
                return None
            except SessionStoreCorrupt:
                aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time() * 1000)}")
                os.replace(self.path, aside)
                log.warning("moved corrupt session store %s to %s", self.path, aside)
                return aside

    def _write(self, data: Mapping[str, Any]) -> None:
        try:
            # The runtime reading this file may take only standard JSON: no NaN or Infinity.
            text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
            payload = text.encode("utf-8")
        except ValueError as exc:
            raise ValueError(f"cannot write {self.path}: {_unwritable(data) or exc}; nothing was written") from None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=self.path.name + ".", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            with contextlib.suppress(FileNotFoundError):
                os.chmod(tmp, self.path.stat().st_mode & 0o777)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _fsync_dir(self.path.parent)


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a number JSON carries")


def _unwritable(value: Any, where: str = "") -> str | None:
    """Where in ``value`` a number JSON cannot carry (NaN, an infinity) or a string that is not valid Unicode is."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where or 'a value'} is {value!r}, not a finite number"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"{where or 'a string'} holds a lone surrogate at character {exc.start}"
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = _unwritable(key, f"{where}[key {key!r}]" if where else f"key {key!r}") or _unwritable(
                item, f"{where}.{key}" if where else str(key))
            if found:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _unwritable(item, f"{where}[{i}]")
            if found:
                return found
    return None


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not possible on every platform.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
