"""What forking a process that holds memory open costs, and what the child's first search costs.

Run with this tree and with the baseline side by side (same machine, same moment)::

    PYTHONPATH=core:plugins python bench/fork_cost.py
    /tmp/py-base21 bench/fork_cost.py

Measures, over ``ROUNDS`` forks of a process with one builtin-sqlite memory open and idle (1,000 notes, the test
``hash`` provider): the parent's ``os.fork()`` call (the at-fork hooks run inside it), the child's first search
(which opens the child's own SQLite connections since the fork fix; the baseline reused the parent's, which
SQLite forbids) and its second search. Medians in milliseconds, printed as one JSON line: wall time, and CPU time
(the forking thread's for the fork, the child's for its searches), which a loaded machine disturbs less.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SYMI_MEMORY_PLUGINS", "symi_memory.testing.plugin")

from symi_memory import load_config  # noqa: E402
from symi_memory.manager import open_memory  # noqa: E402

ROUNDS = int(os.environ.get("FORK_ROUNDS", "30"))


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="fork-cost-"))
    ws = base / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(1000):
        (ws / "memory" / f"n{i:04d}.md").write_text(
            "\n".join(f"Day {i} line {j}: topic{i} the heron{j} report on item{i}x{j}" for j in range(6)) + "\n",
            encoding="utf-8")
    cfg = load_config(None, state_dir=base / "state", overrides={"agents": {"defaults": {"memorySearch": {
        "provider": "hash"}}}})
    mem = open_memory(cfg, workspace=ws, start=False)
    mem.sync()
    want = [h.path for h in mem.search("topic77 heron3 report").results]
    forks, firsts, seconds, fork_cpu, first_cpu, second_cpu = [], [], [], [], [], []
    for _ in range(ROUNDS):
        r, w = os.pipe()
        t0, c0 = time.perf_counter(), time.thread_time()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            a, ac = time.perf_counter(), time.process_time()
            first = [h.path for h in mem.search("topic77 heron3 report").results]
            b, bc = time.perf_counter(), time.process_time()
            mem.search("topic78 heron2 report")
            c, cc = time.perf_counter(), time.process_time()
            os.write(w, json.dumps([b - a, c - b, first == want, bc - ac, cc - bc]).encode())
            os._exit(0)
        forks.append(time.perf_counter() - t0)
        fork_cpu.append(time.thread_time() - c0)
        os.close(w)
        with os.fdopen(r) as fh:
            first_s, second_s, same, first_c, second_c = json.loads(fh.read())
        first_cpu.append(first_c)
        second_cpu.append(second_c)
        os.waitpid(pid, 0)
        assert same, "a child answered differently"
        firsts.append(first_s)
        seconds.append(second_s)
    mem.close()
    ms = lambda xs: round(statistics.median(xs) * 1000, 3)  # noqa: E731
    print(json.dumps({"python": sys.executable, "rounds": ROUNDS, "fork_ms": ms(forks),
                      "child_first_search_ms": ms(firsts), "child_second_search_ms": ms(seconds),
                      "fork_cpu_ms": ms(fork_cpu), "child_first_search_cpu_ms": ms(first_cpu),
                      "child_second_search_cpu_ms": ms(second_cpu)}))


if __name__ == "__main__":
    main()
