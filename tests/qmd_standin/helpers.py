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

__all__ = ["PATIENT_SEARCH", "QUICK_EMBED", "STANDIN", "make_backend", "real_backend", "real_qmd", "standin_command", "write"]

STANDIN = Path(__file__).with_name("qmd")

#: ``memory.qmd.update`` for the real-qmd tests, none of which is about ``qmd embed``: the pinned install has no
#: llama.cpp binary (optional packages are omitted), so each first update's embed loaded Node and the model, failed
#: after 2-4 s, and was only logged. A 1 ms timeout ends it through the backend's own timeout path (also only
#: logged: keyword search and every status field the tests read are the same), before Node has started.
QUICK_EMBED: dict[str, Any] = {"embedTimeoutMs": 1}
#: ``memory.qmd.limits`` for the real-qmd tests, none of which is about a search's timeout: on a loaded shared host
#: (load 20 on 2 cores) one ``qmd search`` process took over the default 4 s, and the search went to the fallback.
PATIENT_SEARCH: dict[str, Any] = {"timeoutMs": 60_000}


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


def real_backend(tmp_path: Path, command: str, qmd: dict[str, Any] | None = None, **kwargs: Any) -> QmdBackend:
    """:func:`make_backend` for the real qmd, with :data:`QUICK_EMBED` and :data:`PATIENT_SEARCH` under the given
    ``memory.qmd.update`` and ``limits``."""
    section = dict(qmd or {})
    section["update"] = {**QUICK_EMBED, **section.get("update", {})}
    section["limits"] = {**PATIENT_SEARCH, **section.get("limits", {})}
    return make_backend(tmp_path, command, section, **kwargs)
