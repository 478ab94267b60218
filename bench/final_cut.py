"""What the post-processing pipeline costs a search, and how many of its candidates it makes, beside a baseline.

Builds bench/scale.py's synthetic store (N chunks) once per interpreter and run, runs the same precomputed queries
through ``MemoryManager.search`` (maxResults 10, minScore 0) three times, and reports the searching thread's CPU
time in ``Pipeline.run`` (p50, after the first 200 searches) and the mean number of the backend's lazily made
candidates that were made by the end of the search (``LazyCandidates``: the final cut to maxResults makes only those
it reads). Alternates this checkout and ``--baseline-python`` ``--rounds`` times.

    python bench/final_cut.py --n 3000 --rounds 2 --baseline-python /tmp/py-base21
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402


def child(n: int, work: Path) -> dict[str, Any]:
    from symi_memory import pipeline

    db = work / "db.sqlite"
    scale.build_store(db, n)
    queries = scale.make_queries(n, 200)
    mem, _ws = scale.open_sqlite_memory(db, {q["text"]: q["vector"] for q in queries})
    run = pipeline.Pipeline.run
    stats: list[tuple[float, int, int]] = []

    def timed(self: Any, query: str, candidates: Any, **kw: Any) -> Any:
        t = time.thread_time()
        out = run(self, query, candidates, **kw)
        stats.append((time.thread_time() - t, len(candidates), len(getattr(candidates, "_made", candidates))))
        return out

    pipeline.Pipeline.run = timed  # type: ignore[method-assign]
    for _ in range(3):
        for q in queries:
            mem.search(q["text"], max_results=10, min_score=0)
    mem.close()
    kept = stats[200:]
    cpu = sorted(s[0] for s in kept)
    return {"pipeline_cpu_p50_us": cpu[len(cpu) // 2] * 1e6, "candidates": sum(s[1] for s in kept) / len(kept),
            "made": sum(s[2] for s in kept) / len(kept)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--baseline-python", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.n, Path(args.child))))
        return 0
    sides = [("this checkout", [sys.executable])]
    if args.baseline_python:
        sides.append(("baseline", [args.baseline_python]))
    got: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in sides}
    for _ in range(args.rounds):
        for name, python in sides:
            with tempfile.TemporaryDirectory(prefix="final-cut-") as work:
                out = subprocess.run([*python, __file__, "--n", str(args.n), "--child", work], check=True,
                                     capture_output=True, text=True, env=os.environ.copy()).stdout
                got[name].append(json.loads(out.strip().splitlines()[-1]))
    print(f"N = {args.n:,} chunks, {args.rounds} alternating rounds, load average {os.getloadavg()[0]:.1f}\n")
    print("| figure | " + " | ".join(name for name, _ in sides) + " |")
    print("|---|" + "---|" * len(sides))
    for key, label in (("pipeline_cpu_p50_us", "Pipeline.run CPU p50 (us), each round"),
                       ("candidates", "candidates a search"), ("made", "candidates made a search")):
        print(f"| {label} | " + " | ".join(" / ".join(f"{r[key]:.0f}" for r in got[name]) for name, _ in sides)
              + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
