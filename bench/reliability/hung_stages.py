"""Search time with a hung reranker and with a hung third-party post-processor (issue: stage deadlines).

The reranker is the builtin ``cohere`` one pointed at a loopback server that accepts connections and never
answers (``rerank.timeoutMs`` as given, default 10000: the default); the post-processor is an in-process
third-party plugin whose ``process`` sleeps ``--sleep`` seconds. Prints each of three searches' wall time and
how many calls reached the stage. Run with the baseline interpreter for the "before" column:

    PYTHONPATH=core:plugins python bench/reliability/hung_stages.py
    /tmp/py-base21 bench/reliability/hung_stages.py        # main before the change (no stageDeadlineMs)
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from symi_memory import hookimpl, load_config, open_memory
from symi_memory.config.schema import Query
from symi_memory.specs import PostProcessorSpec

NOTES = {"MEMORY.md": "# Memory\n\n- The router admin page is at 10.0.0.1.\n",
         "memory/net.md": "# Network\n\n- The router admin password rotates monthly.\n"}


def silent_server() -> tuple[str, list[socket.socket], socket.socket]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    conns: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conns.append(sock.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{sock.getsockname()[1]}", conns, sock


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout-ms", type=int, default=10_000, help="rerank.timeoutMs (the HTTP client's)")
    ap.add_argument("--sleep", type=float, default=10.0, help="how long the post-processor sleeps")
    ap.add_argument("--searches", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=2000, help="searches timed for the pass-through case")
    ap.add_argument("--status-runs", type=int, default=9, help="one-shot `symi-memory status` processes timed")
    args = ap.parse_args()
    has_deadline = hasattr(Query, "__attrs_attrs__") and any(
        a.name == "stage_deadline_ms" for a in Query.__attrs_attrs__)  # type: ignore[attr-defined]
    print(f"stageDeadlineMs known: {has_deadline}")
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        for rel, text in NOTES.items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(text, encoding="utf-8")
        url, conns, sock = silent_server()
        calls: list[float] = []

        class Sleepy:
            def process(self, candidates: Any, ctx: Any) -> Any:
                calls.append(time.monotonic())
                time.sleep(args.sleep)
                return list(candidates)

        class Plugin:
            @hookimpl
            def symi_memory_register_postprocessors(self, register: Any) -> None:
                register(PostProcessorSpec(name="sleepy", factory=lambda hybrid: Sleepy(), order=200))

        cases: list[tuple[str, dict[str, Any], list[tuple[str, object]]]] = [
            ("hung reranker (cohere, silent server)",
             {"rerank": {"provider": "cohere", "apiKey": "bench-key", "baseUrl": url, "timeoutMs": args.timeout_ms}},
             []),
            ("hung third-party post-processor", {}, [("sleepy-plugin", Plugin())]),
        ]
        for label, query, plugins in cases:
            ms = {"provider": "none", "sync": {"watch": False}, "query": query}
            cfg = load_config(None, state_dir=Path(tmp) / "state", overrides={"agents": {"defaults": {
                "memorySearch": ms}}})
            mem = open_memory(cfg, workspace=ws, start=False, plugins=plugins)
            mem.sync()
            times = []
            for _ in range(args.searches):
                t0 = time.monotonic()
                resp = mem.search("router admin")
                times.append(time.monotonic() - t0)
            stage_calls = len(conns) if not plugins else len(calls)
            print(f"{label}: searches {', '.join(f'{t:.2f} s' for t in times)}; calls reaching the stage "
                  f"{stage_calls}; hits {len(resp.results)}; warnings {len(getattr(resp, 'warnings', ()))}")
            for c in conns:
                c.close()
            conns.clear()
            mem.close()
        sock.close()
        # The cost of the bound when nothing hangs: a pass-through third-party post-processor (run on the stage's
        # worker thread with the deadline; before, on the searching thread), median of --repeat searches.

        class Passing:
            def process(self, candidates: Any, ctx: Any) -> Any:
                return list(candidates)

        class PassPlugin:
            @hookimpl
            def symi_memory_register_postprocessors(self, register: Any) -> None:
                register(PostProcessorSpec(name="passing", factory=lambda hybrid: Passing(), order=200))

        for label, plugins in (("no third-party post-processor", []),
                               ("a pass-through third-party post-processor", [("pass-plugin", PassPlugin())])):
            cfg = load_config(None, state_dir=Path(tmp) / "state2", overrides={"agents": {"defaults": {
                "memorySearch": {"provider": "none", "sync": {"watch": False}}}}})
            mem = open_memory(cfg, workspace=ws, start=False, plugins=plugins)
            mem.sync()
            mem.search("router admin")
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                mem.search("router admin")
                times.append(time.perf_counter() - t0)
            times.sort()
            print(f"{label}: median search {times[len(times) // 2] * 1e6:.0f} us over {args.repeat}")
            mem.close()
        # One-shot `symi-memory status` (it now builds the post-processors to name them): median CPU time (user +
        # system) of the process, steadier than wall time on a shared host. Set PYTHONPYCACHEPREFIX for both runs
        # when PYTHONDONTWRITEBYTECODE is set (a run compiling every module from source measures the compiler).
        import os
        import resource
        import subprocess

        env = {**os.environ, "SYMI_STATE_DIR": str(Path(tmp) / "state3")}
        cmd = [sys.executable, "-m", "symi_memory.cli", "--workspace", str(ws), "status", "--json"]
        subprocess.run(cmd, env=env, capture_output=True, check=True)  # the index is made once
        cpu = []
        for _ in range(args.status_runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(cmd, env=env, capture_output=True, check=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        cpu.sort()
        print(f"one-shot status: median CPU {cpu[len(cpu) // 2] * 1000:.0f} ms over {args.status_runs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
