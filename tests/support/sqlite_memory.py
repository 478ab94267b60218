"""Helpers for the builtin-sqlite tests: real files, real SQLite, the ``hash`` provider."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from symi_memory import load_config
from symi_memory.config.fields import deep_merge
from symi_memory.manager import MemoryManager, open_memory

__all__ = ["FILLER_WORDS", "add_filler", "hybrid_results", "local_search", "open_local", "open_mem", "open_on",
           "settings", "wait_for", "write"]


def settings(memory_search: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    """Config overrides: the ``hash`` provider plus ``memory_search`` merged in."""
    ms = deep_merge({"provider": "hash"}, memory_search or {})
    return deep_merge({"agents": {"defaults": {"memorySearch": ms}}}, top)


def open_mem(tmp_path: Path, ws: Path, memory_search: dict[str, Any] | None = None, *, start: bool = False,
             plugins: Iterable[tuple[str, object]] | None = None, agent_id: str = "main", backend: str | None = None,
             **top: Any) -> MemoryManager:
    """A manager on ``ws`` with its state in tmp_path/state: ``settings(memory_search, **top)``, the memory slot
    set to ``backend`` when given."""
    if backend is not None:
        top = deep_merge(top, {"plugins": {"slots": {"memory": backend}}})
    cfg = load_config(None, state_dir=tmp_path / "state", overrides=settings(memory_search, **top))
    return open_memory(cfg, workspace=ws, start=start, plugins=plugins, agent_id=agent_id)


def open_local(tmp_path: Path, ws: Path, memory_search: dict[str, Any] | None = None, *,
               backend: str | None = None) -> MemoryManager:
    """:func:`open_mem` with the offline ``local`` provider, skipping the test when its model is not installed."""
    import pytest

    mem = open_mem(tmp_path, ws, {"provider": "local", **(memory_search or {})}, backend=backend)
    if mem.status()["provider"] != "local":
        mem.close()
        pytest.skip("the local model is not installed")
    return mem


def hybrid_results(mem: MemoryManager, query: str, **args: Any) -> list[dict[str, Any]]:
    """The search tool's results for ``query`` (minScore 0 unless ``args`` say otherwise), asked up to three times
    for hybrid ones: on a loaded host the first query embedding can miss its deadline (keyword results only)."""
    from symi_memory import tools

    for _ in range(3):
        out = tools.memory_search(mem, {"query": query, "minScore": 0, **args})
        assert "error" not in out, out
        if out["mode"] == "hybrid":
            break
    assert out["mode"] == "hybrid", out
    return out["results"]  # type: ignore[no-any-return]


def local_search(tmp_path: Path, notes: dict[str, str], query: str, **args: Any) -> list[dict[str, Any]]:
    """``notes`` (path: text) written to tmp_path/ws and indexed with the offline ``local`` model (the test skips
    without it), then :func:`hybrid_results` for ``query``."""
    import pytest

    pytest.importorskip("symi_memory_local")
    ws = tmp_path / "ws"
    for rel, text in notes.items():
        write(ws, rel, text)
    with open_local(tmp_path, ws) as mem:
        mem.sync()
        return hybrid_results(mem, query, **args)


def open_on(index: Path | str) -> list[str]:
    """The descriptors this process holds open on the index file (and its -wal/-shm), as their targets."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(index)):
            out.append(target)
    return out


def write(ws: Path, rel: str, text: str | bytes) -> Path:
    p = ws / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8", newline="")
    return p


FILLER_WORDS = ("project meeting notes review budget garden coffee travel family weekend report design "
                "server backup holiday").split()


def add_filler(ws: Path, count: int = 30, *, seed: int = 1) -> None:
    """Everyday notes around the needles, so BM25 statistics look like a real workspace's."""
    import random

    rng = random.Random(seed)
    for i in range(count):
        lines = [" ".join(rng.choice(FILLER_WORDS) for _ in range(10)) for _ in range(8)]
        write(ws, f"memory/notes/n{i:02d}.md", "# Note\n\n" + "\n".join(lines) + "\n")


def wait_for(check: Callable[[], Any], *, timeout: float = 20.0, interval: float = 0.1) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last value {value!r})")
        time.sleep(interval)


def rebuilt_by_older_release(db_path: str | Path, generation: int) -> None:
    """Leave the index at ``db_path`` as a rebuild by a release from before index ids leaves it, written by another
    connection: no ``index_id``, no ``touches``, and its generations numbered from 1 again (up to ``generation``)."""
    import apsw

    conn = apsw.Connection(str(db_path))
    try:
        with conn:
            conn.execute("DELETE FROM meta WHERE key IN ('index_id', 'touches')")
            conn.execute("UPDATE meta SET value = ? WHERE key = 'generation'", (str(generation),))
    finally:
        conn.close()
