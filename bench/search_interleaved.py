"""Thread CPU per step of one hybrid search, this checkout and a baseline interleaved query by query.

Also the whole search's wall time (p50, p90) and the context switches of the child's threads during it: each
child waits on its pipe between searches, as a process serving an agent waits between queries.

``search_steps.py`` alternates whole child processes, so a load change between two children lands on one side
only; on a shared host that moves a step by more than most changes save. Here one child per interpreter (this
checkout, and ``--baseline-python``) opens the same synthetic store (bench/scale.py's, built by each side's own
code) and waits; the parent sends them the same query in turn (which one goes first alternates), so load hits
both alike. Each step is timed with ``time.thread_time_ns`` around the functions of the search path that the
side's code has (no profiler: the times are the search's own, plus about a microsecond per wrapped call).

    python bench/search_interleaved.py --n 10000 --queries 300 --baseline-python ../main/.venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402

# (label, module, class or None, function): wrapped where the side's code has them.
STEPS = [
    ("keyword search (FTS5)", "symi_memory.index.store", "IndexStore", "keyword_search"),
    ("vector scan", "symi_memory.index.vectors", "ExactVectors", "search"),
    ("candidate rows", "symi_memory.index.backend", "IndexedBackend", "_candidate_rows"),
    ("  keyword candidates' rows", "symi_memory.index.backend", "IndexedBackend", "_keyword_rows"),
    ("rescoring keyword hits' vectors", "symi_memory.index.vectors", "ExactVectors", "rescore"),
    ("chunk term counts", "symi_memory.index.backend", "IndexedBackend", "_chunk_terms"),
    ("score_hits (keyword evidence, fusion)", "symi_memory.fusion", None, "score_hits"),
    ("  identifier matching", "symi_memory.index.keyword", "ExactMatcher", "identifier_holders"),
    ("  fusion", "symi_memory.fusion", None, "fuse"),
    ("ordering", "symi_memory.fusion", "ScoredHits", "order"),
    # Fixed costs of a search, whatever its candidates (before the keyword and vector sides).
    ("  query analysis", "symi_memory.index.analysis", "QueryAnalysis", "of"),
    ("  query embedding hand-off", "symi_memory.index.backend", "IndexedBackend", "_start_query_embedding"),
    ("  query embedding wait", "symi_memory.index.backend", "IndexedBackend", "_finish_query_embedding"),
    ("  index identity check", "symi_memory.index.indexer", "Indexer", "needs_full"),
    ("  vector side ready, ahead", "symi_memory.index.backend", "IndexedBackend", "_prepare_vectors"),
    ("  local synonyms", "symi_memory.index.backend", "IndexedBackend", "synonyms_for"),
    ("  identifier candidates", "symi_memory.index.backend", None, "_identifier_candidates"),
    ("backend search", "symi_memory.index.backend", "IndexedBackend", "search"),
    ("post-processing pipeline", "symi_memory.pipeline", "Pipeline", "run"),
    ("  supersession", "symi_memory_postprocess.supersede", "Supersession", "process"),
    ("  month cue", "symi_memory_postprocess.monthcue", "MonthCue", "process"),
    ("presentation", "symi_memory.manager", None, "present"),
    # The manager's search: the backend's, the pipeline, the presentation and the manager's own work around them.
    ("manager search", "symi_memory.manager", "MemoryManager", "_search"),
]


def child(db: Path, n: int, count: int) -> None:
    import importlib

    queries = scale.make_queries(n, count)
    table = {q["text"]: q["vector"] for q in queries}

    acc: dict[str, int] = defaultdict(int)
    for label, module, cls, name in STEPS:
        owner: Any = importlib.import_module(module)
        if cls is not None:
            owner = getattr(owner, cls, None)
        fn = getattr(owner, name, None) if owner is not None else None
        if fn is None:
            continue

        def timed(*a: Any, _fn: Any = fn, _label: str = label, **k: Any) -> Any:
            t = time.thread_time_ns()
            try:
                return _fn(*a, **k)
            finally:
                acc[_label] += time.thread_time_ns() - t

        setattr(owner, name, timed)
    mem, ws = scale.open_sqlite_memory(db, table)
    print("ready", flush=True)
    for line in sys.stdin:
        i = int(line)
        if i < 0:
            break
        acc.clear()
        before = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.perf_counter_ns()
        started = time.thread_time_ns()
        mem.search(queries[i]["text"], max_results=10, min_score=0)
        acc["whole search"] = time.thread_time_ns() - started
        acc["wall"] = time.perf_counter_ns() - wall
        after = resource.getrusage(resource.RUSAGE_SELF)
        # Context switches of every thread of the process during the search (counts, not ns).
        acc["voluntary switches"] = after.ru_nvcsw - before.ru_nvcsw
        acc["involuntary switches"] = after.ru_nivcsw - before.ru_nivcsw
        print(json.dumps(acc), flush=True)
    mem.close()
    shutil.rmtree(ws, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--baseline-python", required=False, default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(Path(args.child), args.n, args.queries)
        return 0
    work = Path(tempfile.mkdtemp(prefix="symi-interleaved-"))
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    sides = scale.side_stores(args.n, args.baseline_python, work, env)
    procs = {}
    for label, (python, db) in sides.items():
        procs[label] = subprocess.Popen([python, __file__, "--child", str(db), "--n", str(args.n),
                                         "--queries", str(args.queries)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    for p in procs.values():
        assert p.stdin is not None and p.stdout is not None
        if p.stdout.readline().strip() != "ready":
            raise SystemExit("a child failed to start")
    results: dict[str, list[dict[str, int]]] = {label: [] for label in sides}
    labels = list(sides)
    for i in range(args.queries):
        for label in labels if i % 2 == 0 else labels[::-1]:
            p = procs[label]
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write(f"{i}\n")
            p.stdin.flush()
            results[label].append(json.loads(p.stdout.readline()))
    for p in procs.values():
        assert p.stdin is not None
        p.stdin.write("-1\n")
        p.stdin.flush()
        p.wait()
    shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"N = {args.n:,} chunks, {args.queries} queries interleaved, load average {load:.1f}; "
          "thread CPU ms per search (mean; p50 for the whole search)\n")
    print("| step | " + " | ".join(labels) + (" | ratio |" if len(labels) == 2 else " |"))
    print("|---|" + "---|" * (len(labels) + (1 if len(labels) == 2 else 0)))
    order = ["whole search"] + [s[0] for s in STEPS] + ["outside the backend's search"]  # thread CPU ms
    for label in labels:  # what a search costs beyond the backend's search (the manager's search minus it)
        for r in results[label]:
            if "manager search" in r:
                r["outside the backend's search"] = r["manager search"] - r.get("backend search", 0)
    walls = [[r["wall"] / 1e6 for r in results[label] if "wall" in r] for label in labels]
    if all(walls):
        for name, q in (("whole search wall, p50", 50), ("whole search wall, p90", 90)):
            figures = [statistics.quantiles(v, n=100)[q - 1] if len(v) > 1 else v[0] for v in walls]
            ratio = f" {figures[0] / figures[1]:.2f} |" if len(figures) == 2 and figures[1] else ""
            print(f"| {name} | " + " | ".join(f"{f:.3f}" for f in figures) + " |" + ratio)
        for key in ("voluntary switches", "involuntary switches"):
            figures = [statistics.mean(r.get(key, 0) for r in results[label]) for label in labels]
            print(f"| context switches a search, {key.split()[0]} (mean) | "
                  + " | ".join(f"{f:.2f}" for f in figures) + " |" + (" |" if len(labels) == 2 else ""))
    for key in dict.fromkeys(order):
        vals = [[r.get(key, 0) / 1e6 for r in results[label]] for label in labels]
        if not any(any(v) for v in vals):
            continue
        rows = [("whole search, p50", [statistics.median(v) for v in vals])] if key == "whole search" else []
        rows.append((key, [statistics.mean(v) for v in vals]))
        for name, figures in rows:
            ratio = f" {figures[0] / figures[1]:.2f} |" if len(figures) == 2 and figures[1] else ""
            print(f"| {name} | " + " | ".join(f"{f:.3f}" for f in figures) + " |" + ratio)
    return 0


if __name__ == "__main__":
    sys.exit(main())
