"""Where one hybrid search spends its time and how many SQLite statements it runs, with a baseline beside.

Builds bench/scale.py's synthetic store (N chunks, d = 384) once per interpreter, each with its
own code (a checkout reads only the index schema it writes: one opening another's would rebuild
it empty), then runs the same precomputed queries through ``MemoryManager.search`` in one child
process per interpreter (this checkout, and ``--baseline-python`` for a baseline checkout),
alternating them ``--rounds`` times so machine load hits both alike:

- wall p50 and p90 and CPU (searching thread, and the whole process: faiss or BLAS threads) p50 of the whole search;
- context switches per search, every thread of the process (``getrusage``: voluntary, a thread waiting for
  another or for I/O; involuntary, a thread preempted);
- SQLite statements per search, counted by an exec tracer on the reading
  connection (the round trips);
- a cProfile breakdown: the cumulative time per search of each step of the
  search path (the functions named in STEPS that the interpreter's code has).

    python bench/search_steps.py --n 10000 --baseline-python ../base/.venv/bin/python
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402

# (label, file name suffix, function name): the steps of IndexedBackend.search, old and new names alike.
STEPS = [
    ("whole search", "manager.py", "_search"),
    ("backend search", "index/backend.py", "search"),
    ("query tokenization", "index/analysis.py", "of"),
    ("keyword search (FTS5)", "keyword_search"),
    ("vector scan", "index/vectors.py", "search"),
    ("candidate rows", "index/backend.py", "_candidate_rows"),
    ("  keyword candidates' rows", "index/backend.py", "_keyword_rows"),
    ("file mtimes", "file_mtimes"),
    ("stored vectors of keyword hits", "vectors_by_rowid"),
    ("cosine of keyword hits", "index/vectors.py", "cosine"),
    ("chunk term counts", "index/backend.py", "_chunk_terms"),
    ("term weights (IDF)", "term_weights"),
    ("score_hits (keyword evidence, fusion)", "fusion.py", "score_hits"),
    ("  identifier matching", "index/keyword.py", "classify"),
    ("  identifier matching", "index/keyword.py", "holds_identifier"),
    ("  identifier matching", "index/keyword.py", "identifier_holders"),
    ("query embedding hand-off", "index/backend.py", "_start_query_embedding"),
    ("post-processing pipeline", "pipeline.py", "run"),
]


def child(db: Path, count: int) -> dict[str, Any]:
    queries = scale.make_queries(int(os.environ["SEARCH_STEPS_N"]), count)
    table = {q["text"]: q["vector"] for q in queries}

    mem, ws = scale.open_sqlite_memory(db, table)
    for q in queries[:20]:  # warm: thread-local connections, caches
        mem.search(q["text"], max_results=10, min_score=0)
    wall, cpu, proc = [], [], []
    before = resource.getrusage(resource.RUSAGE_SELF)
    for q in queries:
        t, c, p = time.perf_counter(), time.thread_time(), time.process_time()
        mem.search(q["text"], max_results=10, min_score=0)
        wall.append(time.perf_counter() - t)
        cpu.append(time.thread_time() - c)
        proc.append(time.process_time() - p)
    after = resource.getrusage(resource.RUSAGE_SELF)
    # Every thread of the process: a voluntary switch is a thread going to sleep (waiting for another), an
    # involuntary one a thread preempted.
    switches = ((after.ru_nvcsw - before.ru_nvcsw) / len(queries), (after.ru_nivcsw - before.ru_nivcsw) / len(queries))
    statements = 0

    def trace(cursor: Any, sql: str, bindings: Any) -> bool:
        nonlocal statements
        statements += 1
        return True

    reader = mem.backend.store.reader()
    reader.exec_trace = trace
    for q in queries:
        mem.search(q["text"], max_results=10, min_score=0)
    reader.exec_trace = None
    prof = cProfile.Profile()
    prof.enable()
    for q in queries:
        mem.search(q["text"], max_results=10, min_score=0)
    prof.disable()
    mem.close()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    steps: dict[str, float] = {}
    for step in STEPS:
        label, name = step[0], step[-1]
        suffix = step[1] if len(step) == 3 else ""
        for (file, _, func), (_, _, _, cum, _) in stats.items():
            if func == name and file.replace(os.sep, "/").endswith(suffix) and "symi_memory" in file:
                steps[label] = steps.get(label, 0.0) + cum / len(queries) * 1000.0
    return {"wall_p50_ms": float(np.percentile(wall, 50)) * 1000.0, "wall_p90_ms": float(np.percentile(wall, 90)) * 1000.0,
            "voluntary_switches": switches[0], "involuntary_switches": switches[1], "cpu_p50_ms": float(np.percentile(cpu, 50)) * 1000.0,
            "process_cpu_p50_ms": float(np.percentile(proc, 50)) * 1000.0,
            "statements_per_search": statements / len(queries), "profiled_ms": steps}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline-python", default=None)
    ap.add_argument("--keep-thread-env", action="store_true",
                    help="leave OMP_NUM_THREADS and the BLAS thread variables as they are (as a user's process runs), "
                         "instead of one thread each")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--build", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.build:
        scale.build_store(Path(args.build), args.n)
        return 0
    if args.child:
        print(json.dumps(child(Path(args.child), args.queries)))
        return 0
    work = Path(tempfile.mkdtemp(prefix="symi-steps-"))
    sides = [("this checkout", sys.executable)] + ([("baseline", args.baseline_python)] if args.baseline_python else [])
    env = dict(os.environ, SEARCH_STEPS_N=str(args.n))
    if not args.keep_thread_env:
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    built: dict[str, bytes] = {}
    for label, python in sides:
        db = work / f"{label.replace(' ', '-')}-built.sqlite"
        subprocess.run([python, __file__, "--build", str(db), "--n", str(args.n)], check=True, env=env)
        built[label] = db.read_bytes()
        for p in work.glob(db.name + "*"):
            p.unlink()
    results: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in sides}
    for _ in range(args.rounds):
        for label, python in sides:
            copy = work / f"{label.replace(' ', '-')}.sqlite"  # each side opens its own copy (WAL, caches)
            copy.write_bytes(built[label])
            proc = subprocess.run([python, __file__, "--child", str(copy), "--queries", str(args.queries)],
                                  capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                raise SystemExit(f"{label} failed: {proc.stderr[-2000:]}")
            results[label].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"N = {args.n:,} chunks, {args.queries} queries, {args.rounds} alternating rounds, load average {load:.1f}\n")
    labels = [label for label, _ in sides]
    print("| figure | " + " | ".join(labels) + " |\n|---|" + "---|" * len(labels))

    def med(label: str, get: Any) -> str:
        vals = [v for v in (get(r) for r in results[label]) if v is not None]
        return f"{float(np.median(vals)):.2f}" if vals else "-"

    def each(label: str, key: str) -> str:
        return " / ".join(f"{r[key]:.2f}" for r in results[label] if key in r) or "-"

    print("| hybrid wall p50 (ms) | " + " | ".join(med(x, lambda r: r["wall_p50_ms"]) for x in labels) + " |")
    print("| hybrid wall p50, each round (ms) | " + " | ".join(each(x, "wall_p50_ms") for x in labels) + " |")
    print("| hybrid wall p90 (ms) | " + " | ".join(med(x, lambda r: r.get("wall_p90_ms")) for x in labels) + " |")
    print("| hybrid wall p90, each round (ms) | " + " | ".join(each(x, "wall_p90_ms") for x in labels) + " |")
    print("| context switches a search, voluntary (all threads) | "
          + " | ".join(med(x, lambda r: r.get("voluntary_switches")) for x in labels) + " |")
    print("| context switches a search, involuntary | "
          + " | ".join(med(x, lambda r: r.get("involuntary_switches")) for x in labels) + " |")
    print("| hybrid CPU p50 (ms) | " + " | ".join(med(x, lambda r: r["cpu_p50_ms"]) for x in labels) + " |")
    print("| hybrid process CPU p50, all threads (ms) | "
          + " | ".join(med(x, lambda r: r.get("process_cpu_p50_ms")) for x in labels) + " |")
    print("| SQLite statements per search | " + " | ".join(med(x, lambda r: r["statements_per_search"]) for x in labels)
          + " |")
    seen: list[str] = []
    for step in STEPS:
        if step[0] not in seen:
            seen.append(step[0])
    for step in seen:
        print(f"| {step} (ms, profiled) | "
              + " | ".join(med(x, lambda r, s=step: r["profiled_ms"].get(s)) for x in labels) + " |")
    for p in work.iterdir():
        p.unlink()
    work.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
