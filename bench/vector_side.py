"""The builtin backend's exact vector side alone, this checkout beside a baseline, over one store.

Writes ``scale.py``'s synthetic store of N chunks once, then in one child process per interpreter
(this one, and ``--baseline-python``'s checkout) loads ``ExactVectors`` as the builtin backend does
(``store.vector.scan = "auto"``, unitWeight 0.7) and times ``search`` for k = 10 (the benchmark's
vector-only query) and k = 80 (what a default hybrid search asks the vector side for), with the
searching thread's CPU time beside wall time, and the plain numpy float32 product in the same child.
Children alternate (this, baseline, this, baseline) so host load falls on both alike.

    python bench/vector_side.py --n 100000 --queries 200 --baseline-python <main>/.venv/bin/python

``--scan-threads 1,2`` runs this checkout's child once per value (``store.vector.scanThreads``; a baseline
without the setting runs once), and the table shows the process's CPU time beside the searching thread's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(db: Path, n: int, count: int) -> dict[str, object]:
    import attrs
    import numpy as np

    sys.path.insert(0, str(HERE))
    import scale

    from symi_memory.index.store import IndexStore
    from symi_memory.index.vectors import ExactVectors

    store = IndexStore.open(db)
    threads = os.environ.get("SYMI_BENCH_SCAN_THREADS")
    extra = {"scan_threads": int(threads)} if threads and "scan_threads" in attrs.fields_dict(ExactVectors) else {}
    vectors = ExactVectors(store, scan="auto", unit_weight=0.7, **extra)
    started = time.perf_counter()
    while not vectors.ready():
        time.sleep(0.05)
    status = vectors.status()
    out: dict[str, object] = {"scan": status["scan"], "load_s": time.perf_counter() - started,
                              "parts": status.get("parts", 1), "residual": status.get("residual", False)}
    queries = scale.make_queries(n, count)
    for k in (10, 80):
        wall, cpu, proc = [], [], []
        for q in queries:
            t, c, p = time.perf_counter(), time.thread_time(), time.process_time()
            vectors.search(q["vector"], k)
            wall.append(time.perf_counter() - t)
            cpu.append(time.thread_time() - c)
            proc.append(time.process_time() - p)
        out[f"k{k}"] = {"wall_p50_ms": float(np.median(wall)) * 1e3, "cpu_p50_ms": float(np.median(cpu)) * 1e3,
                        "cpu_p95_ms": float(np.percentile(cpu, 95)) * 1e3,
                        "proc_p50_ms": float(np.median(proc)) * 1e3}
    _, _, matrix = scale.make_data(n)
    cpu = []
    for q in queries:
        qv = np.asarray(q["vector"], dtype=np.float32)
        c = time.thread_time()
        s = matrix @ qv
        np.argpartition(-s, 10)[:10]
        cpu.append(time.thread_time() - c)
    out["numpy_cpu_p50_ms"] = float(np.median(cpu)) * 1e3
    store.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--baseline-python", default=None)
    ap.add_argument("--store", default=None, help="a store scale.py wrote for --n chunks (else one is written)")
    ap.add_argument("--scan-threads", default="", help="comma-separated store.vector.scanThreads values (this checkout)")
    ap.add_argument("--child", default=None)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child), args.n, args.queries)))
        return 0
    sys.path.insert(0, str(HERE))
    import scale

    work = Path(tempfile.mkdtemp(prefix="symi-vector-side-"))
    try:
        db = Path(args.store) if args.store else work / "store.sqlite"
        if not args.store:
            scale.build_store(db, args.n)
        threads = [t for t in args.scan_threads.split(",") if t] or [""]
        pythons = [(f"this{' threads=' + t if t else ''}", sys.executable, t) for t in threads]
        pythons += [("baseline", args.baseline_python, "")] if args.baseline_python else []
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        rows = []
        for _ in range(args.rounds):
            for label, python, t in pythons:
                proc = subprocess.run([python, __file__, "--child", str(db), "--n", str(args.n), "--queries",
                                       str(args.queries)], capture_output=True, text=True,
                                      env=dict(env, SYMI_BENCH_SCAN_THREADS=t), check=True)
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                r["run"] = label
                rows.append(r)
                print(json.dumps(r), flush=True)
        print("\n| run | scan | k=10 CPU p50 (ms) | k=80 CPU p50 / p95 (ms) | k=80 process CPU p50 (ms) | "
              "k=80 wall p50 (ms) | numpy CPU p50 (ms) | load (s) |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            k10, k80 = r["k10"], r["k80"]
            scan = f"{r['scan']}{', residual' if r.get('residual') else ''}{', 2 parts' if r.get('parts') == 2 else ''}"
            print(f"| {r['run']} | {scan} | {k10['cpu_p50_ms']:.2f} | {k80['cpu_p50_ms']:.2f} / "
                  f"{k80['cpu_p95_ms']:.2f} | {k80.get('proc_p50_ms', float('nan')):.2f} | {k80['wall_p50_ms']:.2f} | "
                  f"{r['numpy_cpu_p50_ms']:.2f} | {r['load_s']:.1f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
