"""Where a running server is recorded: ``<stateDir>/serve.json`` (standard library only).

The record holds the server's pid, URL and config file, never its token.
A record whose pid is gone is stale and ignored (a crashed server leaves one
behind; the next ``serve`` replaces it).
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # the one-shot CLI path imports this module: no typing, no pathlib
    from typing import Any

__all__ = ["RECORD_NAME", "eval_record_path", "TOKEN_ENV", "pid_alive", "read_record", "record_path", "remove_record", "write_record"]

RECORD_NAME = "serve.json"
TOKEN_ENV = "SYMI_SERVE_TOKEN"


def eval_record_path(state_dir: str | os.PathLike[str]) -> str:
    """Where ``symi-memory eval`` keeps its last result for the inspector."""
    return os.path.join(state_dir, "eval", "last.json")


def record_path(state_dir: str | os.PathLike[str]) -> str:
    return os.path.join(state_dir, RECORD_NAME)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process holds the pid: alive, but the HTTP check decides
    except (OverflowError, ValueError):
        return False
    return True


def write_record(state_dir: str | os.PathLike[str], data: dict[str, Any]) -> str:
    """Write the record atomically, readable by the owner only."""
    path = record_path(state_dir)
    os.makedirs(state_dir, exist_ok=True)
    tmp = os.path.join(state_dir, f".{RECORD_NAME}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2)
    os.replace(tmp, path)
    return path


def read_record(state_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The live server's record, or None (no record, unreadable, or its process is gone)."""
    try:
        with open(record_path(state_dir), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int) or not isinstance(data.get("url"), str):
        return None
    return data if pid_alive(data["pid"]) else None


def remove_record(state_dir: str | os.PathLike[str], pid: int) -> None:
    """Remove the record if it is still ``pid``'s (a newer server may have replaced it)."""
    path = record_path(state_dir)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        if data.get("pid") == pid:
            os.unlink(path)
    except (OSError, ValueError, AttributeError):
        pass
