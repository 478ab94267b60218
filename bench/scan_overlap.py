"""Wall time of one hybrid search with the vector scan beside the keyword side, this checkout against a baseline.

Each run is a child process (this checkout's interpreter, or ``--baseline-python``) that opens a copy of a
bench/scale.py store with the scale bench's fixed query vectors, warms up, then times ``MemoryManager.search``:
wall p50, the searching thread's CPU p50 and the process's CPU p50 and mean (the scan worker's included). Runs
alternate (baseline, this checkout, for each ``store.vector.scanThreads`` value) for ``--rounds`` rounds, so a load
change lands on every side alike; the load average is printed beside each run. This checkout hands a scan to its worker only while the load
average leaves a core free (``backend.HAND_OFF_MAX_LOAD_PER_CPU``); ``--any-load`` lifts that, to measure the
overlap itself on a shared host. Wall time on a shared host is
noise: run it where nothing else runs, or briefly at real-time priority (``chrt -f 10``, as docs/benchmarks.md
did), and compare CPU times otherwise.

    python bench/scan_overlap.py --store /tmp/s100k.sqlite --n 100000 --queries 200 --rounds 3 \\
        --scan-threads 1,2 --baseline-python ../main/.venv/bin/python

Build the store with ``python -c "import sys; sys.path.insert(0, 'bench'); import scale; from pathlib import Path;
scale.build_store(Path('/tmp/s100k.sqlite'), 100000)"``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402


def child(store: Path, n: int, count: int, threads: int, any_load: bool) -> dict[str, float]:
    from symi_memory import load_config
    from symi_memory.index import backend
    from symi_memory.manager import open_memory

    tmp = Path(tempfile.mkdtemp(prefix="scan-overlap-"))
    try:
        db = tmp / "x.sqlite"
        shutil.copy(store, db)  # opening syncs against the (empty) workspace: never the store itself
        queries = scale.make_queries(n, count)
        table = {q["text"]: q["vector"] for q in queries}

        ws = tmp / "ws"
        ws.mkdir()
        cfg = load_config(None, state_dir=ws, overrides={"plugins": {"slots": {"memory": "builtin-sqlite"}},
                                                          "agents": {"defaults": {"memorySearch": {
                                                              "provider": "bench", "store": {
                                                                  "path": str(db), "vector": {"scanThreads": threads}}}}}})
        if any_load and hasattr(backend, "HAND_OFF_MAX_LOAD_PER_CPU"):
            backend.HAND_OFF_MAX_LOAD_PER_CPU = float("inf")  # type: ignore[attr-defined]
        mem = open_memory(cfg, workspace=ws, start=False, plugins=[("bench", scale.bench_plugin(table))])
        while not mem.backend.vectors.ready():
            time.sleep(0.05)
        for q in queries[:30]:
            mem.search(q["text"], max_results=10, min_score=0)
        wall, thread, proc = [], [], []
        for q in queries:
            t, c, p = time.perf_counter(), time.thread_time(), time.process_time()
            mem.search(q["text"], max_results=10, min_score=0)
            wall.append(time.perf_counter() - t)
            thread.append(time.thread_time() - c)
            proc.append(time.process_time() - p)
        mem.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ms = 1000.0
    return {"wall_p50": statistics.median(wall) * ms, "thread_cpu_p50": statistics.median(thread) * ms,
            "proc_cpu_p50": statistics.median(proc) * ms, "proc_cpu_mean": statistics.mean(proc) * ms,
            "load": os.getloadavg()[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True, help="a bench/scale.py store (copied for each run)")
    ap.add_argument("--n", type=int, required=True, help="the store's chunk count (its query vectors)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scan-threads", default="1", help="comma-separated store.vector.scanThreads values")
    ap.add_argument("--baseline-python", default=None)
    ap.add_argument("--any-load", action="store_true",
                    help="hand scans to the worker whatever the load average (this checkout: the overlap itself)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.store), args.n, args.queries, args.threads, args.any_load)))
        return 0
    sides = [("baseline", args.baseline_python)] if args.baseline_python else []
    sides.append(("this", sys.executable))
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    runs: dict[str, list[dict[str, float]]] = {}
    for _ in range(args.rounds):
        for side, python in sides:
            for threads in [int(t) for t in args.scan_threads.split(",")]:
                label = f"{side} scanThreads={threads}"
                proc = subprocess.run([python, __file__, "--child", "--store", args.store, "--n", str(args.n),
                                       "--queries", str(args.queries), "--threads", str(threads)]
                                      + (["--any-load"] if args.any_load else []),
                                      capture_output=True, text=True, env=env)
                if proc.returncode != 0:
                    print(proc.stderr[-2000:], file=sys.stderr)
                    return 1
                got = json.loads(proc.stdout.strip().splitlines()[-1])
                runs.setdefault(label, []).append(got)
                print(label, json.dumps({k: round(v, 2) for k, v in got.items()}), flush=True)
    print(f"\nN = {args.n:,}, {args.queries} queries, {args.rounds} rounds (median of the rounds' figures)\n")
    print("| run | wall p50 (ms) | thread CPU p50 (ms) | process CPU p50 / mean (ms) | load |")
    print("|---|---|---|---|---|")
    for label, got in runs.items():
        def med(key: str, got: list[dict[str, float]] = got) -> float:
            return statistics.median(g[key] for g in got)

        print(f"| {label} | {med('wall_p50'):.2f} | {med('thread_cpu_p50'):.2f} | "
              f"{med('proc_cpu_p50'):.2f} / {med('proc_cpu_mean'):.2f} | {med('load'):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
