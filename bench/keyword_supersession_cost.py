"""Process CPU per keyword-only search (provider ``none``) with supersession on, by supersession window and maxResults.

The keyword-only index pairs its hits by their lines' terms (no vector cosine to cut pairs short), so its cost grows
with the pairs of the window: this measures it over a dataset's questions, side by side with other checkouts, in
one run (each checkout in its own process, taking turns).

    python bench/keyword_supersession_cost.py [--dataset devmem] [--windows 20,200] [--max-results 6,100]
        [--baseline DIR ...] [--passes 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def worker(dataset: str, window: int, n: int, passes: int) -> dict[str, float]:
    from symi_memory import load_config, tools
    from symi_memory.evaluation import load_queries
    from symi_memory.manager import open_memory

    root = HERE / "datasets" / dataset
    queries = load_queries(root / "queries.jsonl")
    ms = {"provider": "none", "query": {"hybrid": {"supersession": {"enabled": True, "window": window}}}}
    with tempfile.TemporaryDirectory(prefix="symi-kwcost-") as tmp:
        cfg = load_config(None, state_dir=tmp, overrides={"agents": {"defaults": {"memorySearch": ms}}})
        with open_memory(cfg, workspace=root / "workspace") as mem:
            mem.sync()
            args = [{"query": q["query"], "maxResults": n, "minScore": 0} for q in queries]
            for a in args:  # warm
                tools.memory_search(mem, a)
            per = []
            for _ in range(passes):
                for a in args:
                    t0 = time.process_time()
                    tools.memory_search(mem, a)
                    per.append(time.process_time() - t0)
    per.sort()
    return {"p50": statistics.median(per) * 1000, "p90": per[int(len(per) * 0.9)] * 1000, "max": per[-1] * 1000}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", nargs=4)
    ap.add_argument("--dataset", default="devmem")
    ap.add_argument("--windows", default="20,200")
    ap.add_argument("--max-results", default="6,100")
    ap.add_argument("--baseline", action="append", type=Path, default=[])
    ap.add_argument("--passes", type=int, default=3)
    args = ap.parse_args()
    if args.worker:
        ds, w, n, p = args.worker
        print(json.dumps(worker(ds, int(w), int(n), int(p))))
        return 0
    sides = [(str(b), b) for b in args.baseline] + [("this", HERE.parent)]
    print("| checkout | window | maxResults | CPU p50 ms | p90 ms | max ms |\n|---|---|---|---|---|---|")
    for w in args.windows.split(","):
        for n in args.max_results.split(","):
            for name, checkout in sides:
                env = dict(os.environ, PYTHONPATH=f"{checkout / 'core'}{os.pathsep}{checkout / 'plugins'}")
                proc = subprocess.run([sys.executable, __file__, "--worker", args.dataset, w, n, str(args.passes)],
                                      env=env, capture_output=True, text=True, check=False)
                if proc.returncode:
                    raise SystemExit(proc.stderr)
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                print(f"| {name} | {w} | {n} | {r['p50']:.2f} | {r['p90']:.2f} | {r['max']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
