"""The builtin backend's exact vector side alone, this checkout beside a baseline, over one store.

Writes ``scale.py``'s synthetic store of N chunks once, then in one child process per interpreter
(this one, and ``--baseline-python``'s checkout) loads ``ExactVectors`` as the builtin backend does
(``store.vector.scan = "auto"``, unitWeight 0.7) and times ``search`` for k = 10 (the benchmark's
vector-only query) and k = 80 (what a default hybrid search asks the vector side for), with the
searching thread's CPU time beside wall time, and the plain numpy float32 product in the same child.
Children alternate (this, baseline, this, baseline) so host load falls on both alike.

    python bench/vector_side.py --n 100000 --queries 200 --baseline-python <main>/.venv/bin/python
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
    import numpy as np

    sys.path.insert(0, str(HERE))
    import scale

    from symi_memory.index.store import IndexStore
    from symi_memory.index.vectors import ExactVectors

    store = IndexStore.open(db)
    vectors = ExactVectors(store, scan="auto", unit_weight=0.7)
    started = time.perf_counter()
    while not vectors.ready():
        time.sleep(0.05)
    out: dict[str, object] = {"scan": vectors.status()["scan"], "load_s": time.perf_counter() - started}
    queries = scale.make_queries(n, count)
    for k in (10, 80):
        wall, cpu = [], []
        for q in queries:
            t, c = time.perf_counter(), time.thread_time()
            vectors.search(q["vector"], k)
            wall.append(time.perf_counter() - t)
            cpu.append(time.thread_time() - c)
        out[f"k{k}"] = {"wall_p50_ms": float(np.median(wall)) * 1e3, "cpu_p50_ms": float(np.median(cpu)) * 1e3,
                        "cpu_p95_ms": float(np.percentile(cpu, 95)) * 1e3}
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
    ap.add_argument("--child", default=None)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child), args.n, args.queries)))
        return 0
    sys.path.insert(0, str(HERE))
    import scale

    work = Path(tempfile.mkdtemp(prefix="symi-vector-side-"))
    try:
        db = work / "store.sqlite"
        scale.build_store(db, args.n)
        pythons = [("this", sys.executable)] + ([("baseline", args.baseline_python)] if args.baseline_python else [])
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        rows = []
        for _ in range(args.rounds):
            for label, python in pythons:
                proc = subprocess.run([python, __file__, "--child", str(db), "--n", str(args.n), "--queries",
                                       str(args.queries)], capture_output=True, text=True, env=env, check=True)
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                r["run"] = label
                rows.append(r)
                print(json.dumps(r), flush=True)
        print("\n| run | scan | k=10 CPU p50 (ms) | k=80 CPU p50 / p95 (ms) | k=80 wall p50 (ms) | numpy CPU p50 (ms) |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            k10, k80 = r["k10"], r["k80"]
            print(f"| {r['run']} | {r['scan']} | {k10['cpu_p50_ms']:.2f} | {k80['cpu_p50_ms']:.2f} / "
                  f"{k80['cpu_p95_ms']:.2f} | {k80['wall_p50_ms']:.2f} | {r['numpy_cpu_p50_ms']:.2f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
