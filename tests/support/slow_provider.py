"""An in-process ``slow`` embedding provider (HashEmbedder vectors, a sleep per batch) and a child-process driver.

Run as a script, it opens one agent's memory and does one thing, so tests can
SIGKILL it mid-sync or search from it while the test process writes::

    python slow_provider.py reindex STATE WS DELAY CALLS_FILE
    python slow_provider.py sync STATE WS DELAY CALLS_FILE MEMORY_SEARCH_JSON
    python slow_provider.py search STATE WS SECONDS QUERY
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from symi_memory import hookimpl
from symi_memory.specs import ProviderSpec
from symi_memory.testing import HashEmbedder

__all__ = ["SlowPlugin", "slow_plugins"]


class SlowEmbedder(HashEmbedder):
    """HashEmbedder vectors (same id/model as ``slow``), sleeping ``delay`` seconds per document batch."""

    def __init__(self, delay: float, calls_file: str | None) -> None:
        super().__init__(id="slow", model="slow-384")
        self.delay = delay
        self.calls_file = calls_file

    @property
    def fingerprint(self) -> str:
        return "slow:384"

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self.calls_file:
            with open(self.calls_file, "a") as fh:
                fh.write(f"{len(texts)}\n")
        time.sleep(self.delay)
        return super().embed_documents(texts)


class SlowPlugin:
    """Registers the ``slow`` provider."""

    def __init__(self, delay: float = 0.0, calls_file: str | None = None) -> None:
        self.delay, self.calls_file = delay, calls_file

    @hookimpl
    def symi_memory_register_embedding_providers(self, register: Callable[[Any], None]) -> None:
        register(ProviderSpec(name="slow", factory=lambda ctx: SlowEmbedder(self.delay, self.calls_file),
                              default_model="slow-384"))


def slow_plugins(delay: float = 0.0, calls_file: str | None = None) -> list[tuple[str, object]]:
    return [("slow-test", SlowPlugin(delay, calls_file))]


def _open(state: str, ws: str, delay: float, calls_file: str | None, ms: dict[str, Any]) -> Any:
    from symi_memory import load_config
    from symi_memory.config.fields import deep_merge
    from symi_memory.manager import open_memory

    overrides = {"agents": {"defaults": {"memorySearch": deep_merge({"provider": "slow"}, ms)}}}
    cfg = load_config(None, state_dir=state, overrides=overrides)
    return open_memory(cfg, workspace=ws, start=False, plugins=slow_plugins(delay, calls_file))


def main(argv: list[str]) -> int:
    cmd, state, ws = argv[:3]
    if cmd == "reindex":
        delay, calls_file = float(argv[3]), argv[4]
        mem = _open(state, ws, delay, calls_file, {"cache": {"enabled": False}})
        mem.sync(force=True)
        print("finished", flush=True)
        return 0
    if cmd == "sync":  # sync STATE WS DELAY CALLS_FILE MEMORY_SEARCH_JSON: one manual sync
        delay, calls_file = float(argv[3]), argv[4]
        mem = _open(state, ws, delay, calls_file, json.loads(argv[5]))
        mem.sync(reason="manual")
        print("finished", flush=True)
        return 0
    seconds, query = float(argv[3]), argv[4]
    _open(state + "-warmup", ws, 0.0, None, {"enabled": False}).close()  # imports and plugin loading, untimed
    t0 = time.monotonic()
    mem = _open(state, ws, 0.0, None, {})
    opened = time.monotonic() - t0
    out: dict[str, Any] = {"opened_seconds": opened, "searches": 0, "errors": [], "empty": 0, "max_seconds": 0.0}
    print("ready", flush=True)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        s0 = time.monotonic()
        try:
            res = mem.search(query)
            if not res.results:
                out["empty"] += 1
        except Exception as exc:  # the test asserts there are none
            out["errors"].append(f"{type(exc).__name__}: {exc}")
        out["max_seconds"] = max(out["max_seconds"], time.monotonic() - s0)
        out["searches"] += 1
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
