"""Shared fixtures: isolated state dirs, a small workspace, and a CLI runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
DEVMEM = REPO / "bench" / "datasets" / "devmem"


def pytest_configure(config: pytest.Config) -> None:
    # This suite opts in to the test fakes (hash provider, in-memory backend) for itself and the CLI
    # subprocesses it starts; installing symi-memory does not register them anywhere else.
    os.environ["SYMI_MEMORY_PLUGINS"] = "symi_memory.testing.plugin"


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the developer's ~/.symi, config or API keys."""
    monkeypatch.setenv("SYMI_STATE_DIR", str(tmp_path / "state"))
    for var in ("SYMI_CONFIG", "OPENAI_API_KEY", "GEMINI_API_KEY", "VOYAGE_API_KEY", "SYMI_MEMORY_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- Prefers tea.\n- Lives in Utrecht.\n", encoding="utf-8")
    (ws / "memory" / "2026-01-01.md").write_text("# Jan 1\nsecond line\nthird line\n", encoding="utf-8")
    return ws


@pytest.fixture
def cli(tmp_path: Path) -> Callable[..., Any]:
    """Run the real CLI in a subprocess; returns (exit code, stdout, stderr)."""

    def run(*args: str, env: dict[str, str] | None = None, json_out: bool = False) -> Any:
        full_env = {**os.environ, "SYMI_STATE_DIR": str(tmp_path / "state"), **(env or {})}
        proc = subprocess.run([sys.executable, "-m", "symi_memory.cli", *args], capture_output=True, text=True,
                              env=full_env, timeout=120)
        if json_out:
            return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else None, proc.stderr
        return proc.returncode, proc.stdout, proc.stderr

    return run


@pytest.fixture
def server():
    """A real HTTP server on 127.0.0.1 with scripted replies (tests/support/loopback_http.py)."""
    from support.loopback_http import LoopbackServer

    with LoopbackServer() as srv:
        yield srv
