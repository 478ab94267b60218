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


#: Commands that keep running (a server) or may read stdin: always run in a real process.
_PROCESS_ONLY = frozenset({"serve", "mcp", "-"})


def _needs_process(args: tuple[str, ...], env: dict[str, str] | None) -> bool:
    """Whether a ``cli()`` call must start a real interpreter to test what it tests: a command that keeps running
    or reads stdin, or an environment the interpreter itself reads at startup (``PYTHONPATH`` for a plugin's
    folder, ``PYTHONUTF8``, locale, time zone), which an in-process call would not apply."""
    if _PROCESS_ONLY.intersection(args):
        return True
    return any(k.startswith(("PYTHON", "LC_", "LANG")) or k == "TZ" for k in env or {})


def _run_in_process(args: tuple[str, ...], full_env: dict[str, str]) -> tuple[int, str, str]:
    """``symi_memory.cli.main(args)`` in this interpreter, as the installed command runs it: under ``full_env``,
    with stdout/stderr on pipes of their own (not a terminal; stdout strict UTF-8, stderr backslashreplace, as
    Python sets up a pipe), stdin empty, logging set up afresh by the command, its exit code (argparse's
    ``SystemExit`` included) returned. Non-daemon threads the command leaves running are waited for, as the
    interpreter's exit would. What only a new process shows (the console script, its fast exit, import time) is
    tested in test_cli_startup.py and test_entry_points.py, with real processes."""
    import io
    import logging
    import threading
    import traceback
    import warnings

    from symi_memory.cli import main

    out_b, err_b = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_b, encoding="utf-8", errors="strict", newline="\n", write_through=True)
    err = io.TextIOWrapper(err_b, encoding="utf-8", errors="backslashreplace", newline="\n", write_through=True)
    saved_env = dict(os.environ)
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    before = set(threading.enumerate())
    os.environ.clear()
    os.environ.update(full_env)
    root.handlers.clear()  # pytest's capture handler: the command's basicConfig must install its own, on `err`
    root.setLevel(logging.WARNING)
    sys.stdin, sys.stdout, sys.stderr = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8"), out, err
    try:
        with warnings.catch_warnings():
            # Python's own default filters, printed to the command's stderr as a fresh interpreter would.
            warnings.resetwarnings()
            warnings.simplefilter("default")
            for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
                warnings.simplefilter("ignore", category)
            warnings.showwarning = lambda m, c, f, ln, file=None, line=None: sys.stderr.write(
                warnings.formatwarning(m, c, f, ln, line))
            try:
                code = main(list(args))
            except SystemExit as exc:
                if exc.code is None or isinstance(exc.code, int):
                    code = exc.code or 0
                else:
                    print(exc.code, file=sys.stderr)
                    code = 1
            except BaseException:
                traceback.print_exc()
                code = 1
            for t in set(threading.enumerate()) - before:
                if not t.daemon:
                    t.join(timeout=120)
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        for handler in root.handlers:
            if handler not in saved_handlers:
                handler.close()
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        os.environ.clear()
        os.environ.update(saved_env)
    return int(code), out_b.getvalue().decode("utf-8"), err_b.getvalue().decode("utf-8")


@pytest.fixture
def cli(tmp_path: Path, request: pytest.FixtureRequest) -> Callable[..., Any]:
    """Run the CLI; returns (exit code, stdout, stderr).

    In this interpreter (``symi_memory.cli.main``, the function the installed command runs; see
    :func:`_run_in_process`), which saves a new interpreter's start (~0.5-1.5 s a call on the 2-core VM) on
    every call. A real subprocess for what needs one (:func:`_needs_process`), for every call with
    ``process=True``, and for every test marked ``cli_process`` (tests about several processes: pids, locks,
    a process killed or left running)."""

    always_process = request.node.get_closest_marker("cli_process") is not None

    def run(*args: str, env: dict[str, str] | None = None, json_out: bool = False, process: bool = False) -> Any:
        full_env = {**os.environ, "SYMI_STATE_DIR": str(tmp_path / "state"), **(env or {})}
        if process or always_process or _needs_process(args, env):
            proc = subprocess.run([sys.executable, "-m", "symi_memory.cli", *args], capture_output=True, text=True,
                                  env=full_env, timeout=120)
            code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
        else:
            code, stdout, stderr = _run_in_process(args, full_env)
        if json_out:
            return code, json.loads(stdout) if stdout.strip() else None, stderr
        return code, stdout, stderr

    return run


@pytest.fixture
def server():
    """A real HTTP server on 127.0.0.1 with scripted replies (tests/support/loopback_http.py)."""
    from support.loopback_http import LoopbackServer

    with LoopbackServer() as srv:
        yield srv
