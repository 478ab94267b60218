"""Supersession and "as of" search on devmem: the processor on vs off, same index, same run.

Indexes bench/datasets/devmem once (default config, throwaway state folder),
then runs every query of ``queries.jsonl`` and ``asof.jsonl`` twice, once
with the supersession post-processor and once without (two pipelines over
the one index, alternating per query so load hits both alike). Scores with
the eval metrics and prints a Markdown table:

- devmem hit@5, MRR@10, paraphrase MRR and stale-above-gold (``queries.jsonl``);
- "as of" queries: the answer current on that date ranks first (hit@1 of ``asof.jsonl``);
- search latency p50/p90 of ``MemoryManager.search`` over all those queries.

    python bench/supersession.py [--provider local] [--repeat 3]
"""

from __future__ import annotations

import os

os.environ.setdefault("SYMI_MEMORY_TESTING", "1")

import argparse
import copy
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "bench" / "datasets" / "devmem"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    have_local = importlib.util.find_spec("symi_memory_local") is not None
    ap.add_argument("--provider", default="local" if have_local else "hash")
    ap.add_argument("--repeat", type=int, default=3, help="timed passes over the queries (quality uses the first)")
    args = ap.parse_args()

    from symi_memory.config import load_config
    from symi_memory.evaluation import _throwaway_config, load_queries, parse_now, score_run
    from symi_memory.manager import open_memory
    from symi_memory.pipeline import Pipeline

    sets = {"devmem": load_queries(DATASET / "queries.jsonl"), "asof": load_queries(DATASET / "asof.jsonl")}
    with tempfile.TemporaryDirectory(prefix="symi-supersession-") as tmp:
        cfg = load_config(None, state_dir=tmp, overrides={"agents": {"defaults": {"memorySearch": {
            "provider": args.provider}}}})
        with open_memory(_throwaway_config(cfg, Path(tmp)), workspace=DATASET / "workspace", start=False) as mem:
            started = time.perf_counter()
            mem.sync(reason="bench")
            print(f"indexed in {time.perf_counter() - started:.1f}s", file=sys.stderr)
            pipelines = {}
            for label, enabled in (("off", False), ("on", True)):
                ms = copy.deepcopy(mem.agent.memory_search)
                ms["query"]["hybrid"]["supersession"]["enabled"] = enabled
                pipelines[label] = Pipeline.from_settings(mem.plugins, ms)
            runs: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {
                label: {name: {} for name in sets} for label in pipelines}
            times: dict[str, list[float]] = {label: [] for label in pipelines}
            for rep in range(args.repeat):
                for name, queries in sets.items():
                    for q in queries:
                        order = ("off", "on") if rep % 2 == 0 else ("on", "off")
                        for label in order:
                            mem.pipeline = pipelines[label]
                            t0 = time.perf_counter()
                            resp = mem.search(q["query"], max_results=10, min_score=0, now=parse_now(q.get("now")),
                                              as_of=q.get("as_of"))
                            times[label].append(time.perf_counter() - t0)
                            if rep == 0:
                                runs[label][name][q["id"]] = [
                                    {"path": h.path, "start": h.start_line, "end": h.end_line, "score": h.score}
                                    for h in resp.results]
            mem.pipeline = pipelines["off"]
    rows = []
    for label in ("off", "on"):
        dev = score_run(sets["devmem"], runs[label]["devmem"])
        asof = score_run(sets["asof"], runs[label]["asof"])
        t = sorted(times[label])
        rows.append({
            "label": label, "hit@5": dev["overall"]["hit@5"], "mrr": dev["overall"]["mrr@10"],
            "para": dev["per_type"]["paraphrase"]["mrr@10"], "stale": dev["overall"]["stale_above_gold"],
            "asof1": asof["overall"]["hit@1"], "asof_stale": asof["overall"]["stale_above_gold"],
            "p50": statistics.median(t) * 1000, "p90": t[int(0.9 * (len(t) - 1))] * 1000})
    head = ("| supersession | devmem hit@5 | MRR@10 | paraphrase MRR | stale>gold | as-of hit@1 | as-of stale>gold "
            "| search p50 ms | p90 ms |\n|---|---|---|---|---|---|---|---|---|")
    print(f"provider {args.provider}; {len(sets['devmem'])} devmem + {len(sets['asof'])} as-of queries, "
          f"{args.repeat} timed passes")
    print(head)
    for r in rows:
        print(f"| {r['label']} | {r['hit@5']:.3f} | {r['mrr']:.3f} | {r['para']:.3f} | {r['stale']:.3f} | "
              f"{r['asof1']:.3f} | {r['asof_stale']:.3f} | {r['p50']:.1f} | {r['p90']:.1f} |")
    print(f"p50 on/off: {rows[1]['p50'] / rows[0]['p50']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
