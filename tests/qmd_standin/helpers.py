"""Shared setup for the qmd tests: the stand-in, the real CLI, workspaces, backends."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from symi_memory_qmd.backend import QmdBackend
from symi_memory_qmd.settings import QmdSettings

__all__ = ["STANDIN", "make_backend", "real_qmd", "standin_command", "write"]

STANDIN = Path(__file__).with_name("qmd")


def standin_command(**env: str) -> str:
    """``memory.qmd.command`` running the stand-in, with ``QMD_STANDIN_*`` settings."""
    prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
    return shlex.join([*prefix, sys.executable, str(STANDIN)])


def real_qmd() -> str | None:
    """The real qmd CLI installed by .ci/install-qmd.sh (or on PATH), else None."""
    home = Path(os.environ.get("SYMI_QMD_HOME") or Path.home() / ".cache" / "symi-memory" / "qmd")
    candidate = home / "bin" / "qmd"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which("qmd")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def make_backend(tmp_path: Path, command: str, qmd: dict[str, Any] | None = None, **kwargs: Any) -> QmdBackend:
    """A backend over ``tmp_path/ws`` with state in ``tmp_path/state``; no timers, no boot update."""
    section = {"command": command, **(qmd or {})}
    kwargs.setdefault("start", False)
    return QmdBackend(
        QmdSettings.from_config(section),
        agent_id=kwargs.pop("agent_id", "main"),
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        **kwargs,
    )
