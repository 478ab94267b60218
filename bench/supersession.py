"""Supersession and "as of" search on devmem and convmem: the processor on vs off, same index, same run.

Indexes bench/datasets/devmem and bench/datasets/convmem once each (default
config, throwaway state folders), then runs every query of devmem's
``queries.jsonl`` and ``asof.jsonl`` and convmem's ``queries.jsonl`` twice,
once with the supersession post-processor and once without (two pipelines
over the one index, alternating per query so load hits both alike). Scores
with the eval metrics and prints a Markdown table per dataset:

- hit@5, MRR@10, paraphrase MRR and stale-above-gold (``queries.jsonl``);
- devmem "as of" queries: the answer current on that date ranks first (hit@1 of ``asof.jsonl``);
- search latency p50/p90 of ``MemoryManager.search`` over all those queries, and the
  p50 of its CPU time (``time.process_time``, steadier than wall time on a loaded host).

convmem was the held-out set until the line-vector rework: ``line_vector``,
``score_ratio`` and ``window`` were then fit on devmem and convmem together,
so neither is held out any more. ``--misses``
prints, for every query where a stale line still outranks the gold with the
processor on, every "as of" query not answered first and every query whose gold
ranks lower with it on than off, the top hits with
their gold/stale lines and supersession marks.

    python bench/supersession.py [--provider local] [--repeat 3] [--misses] [--state DIR] [--dump FILE]
"""

from __future__ import annotations

import os

os.environ.setdefault("SYMI_MEMORY_TESTING", "1")

import argparse
import contextlib
import copy
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / "bench" / "datasets"
# (dataset folder, {set name: queries file}); the thresholds are fit on both.
PLAN = (("devmem", {"devmem": "queries.jsonl", "asof": "asof.jsonl"}), ("convmem", {"convmem": "queries.jsonl"}))


def _tag(h: dict[str, Any], q: dict[str, Any]) -> str:
    from symi_memory.evaluation import _overlaps

    if any(_overlaps(h, g) for g in q.get("gold", [])):
        return "G"
    return "S" if any(_overlaps(h, s) for s in q.get("stale", [])) else "-"


def _print_miss(root: Path, q: dict[str, Any], hits: list[dict[str, Any]], why: str) -> None:
    print(f"\n{q['id']} {why}: {q['query']!r}" + (f" as of {q['as_of']}" if q.get("as_of") else ""))
    for rank, h in enumerate(hits[:6], 1):
        marks = ""
        if h.get("superseded_by"):
            sb = h["superseded_by"]
            marks += f" supersededBy {sb['path']}:{sb['startLine']}"
        if h.get("supersedes"):
            marks += f" supersedes {len(h['supersedes'])}"
        print(f"  {rank} {_tag(h, q)} {h['score']:.3f} {h['path']}:{h['start']}-{h['end']}{marks}")
        lines = (root / "workspace" / h["path"]).read_text(encoding="utf-8").split("\n")
        for loc, mark in [(g, "gold") for g in q.get("gold", [])] + [(s, "stale") for s in q.get("stale", [])]:
            if loc["path"] == h["path"] and h["start"] <= loc["start_line"] <= h["end"]:
                print(f"      {mark} {loc['start_line']}: {lines[loc['start_line'] - 1][:130]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    have_local = importlib.util.find_spec("symi_memory_local") is not None
    ap.add_argument("--provider", default="local" if have_local else "hash")
    ap.add_argument("--repeat", type=int, default=3, help="timed passes over the queries (quality uses the first)")
    ap.add_argument("--misses", action="store_true", help="print the queries the processor still gets wrong")
    ap.add_argument("--state", type=Path, help="keep each dataset's index under this folder and reuse it next run")
    ap.add_argument("--dump", type=Path, help="write every query's results (first pass, on and off) to this JSON file, "
                    "to check that a change to the processor leaves them identical")
    args = ap.parse_args()

    from symi_memory import load_config
    from symi_memory.evaluation import _score_query, _throwaway_config, load_queries, parse_now, score_run
    from symi_memory.manager import open_memory
    from symi_memory.pipeline import Pipeline

    sets: dict[str, list[dict[str, Any]]] = {}
    runs: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {"off": {}, "on": {}}
    times: dict[str, list[float]] = {"off": [], "on": []}
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    for folder, files in PLAN:
        root = DATASETS / folder
        for name, file in files.items():
            sets[name] = load_queries(root / file)
            for label in runs:
                runs[label][name] = {}
        with contextlib.ExitStack() as stack:
            if args.state is not None:
                tmp = str(args.state / folder)
                Path(tmp).mkdir(parents=True, exist_ok=True)
            else:
                tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="symi-supersession-"))
            cfg = load_config(None, state_dir=tmp, overrides={"agents": {"defaults": {"memorySearch": {
                "provider": args.provider}}}})
            with open_memory(_throwaway_config(cfg, Path(tmp)), workspace=root / "workspace", start=False) as mem:
                started = time.perf_counter()
                mem.sync(reason="bench")
                print(f"{folder}: indexed in {time.perf_counter() - started:.1f}s", file=sys.stderr)
                pipelines = {}
                for label, enabled in (("off", False), ("on", True)):
                    ms = copy.deepcopy(mem.agent.memory_search)
                    ms["query"]["hybrid"]["supersession"]["enabled"] = enabled
                    pipelines[label] = Pipeline.from_settings(mem.plugins, ms)
                for rep in range(args.repeat):
                    for name in files:
                        for q in sets[name]:
                            order = ("off", "on") if rep % 2 == 0 else ("on", "off")
                            for label in order:
                                mem._pipeline = pipelines[label]
                                t0, c0 = time.perf_counter(), time.process_time()
                                resp = mem.search(q["query"], max_results=10, min_score=0,
                                                  now=parse_now(q.get("now")), as_of=q.get("as_of"))
                                times[label].append(time.perf_counter() - t0)
                                cpu[label].append(time.process_time() - c0)
                                if rep == 0:
                                    runs[label][name][q["id"]] = [
                                        {"path": h.path, "start": h.start_line, "end": h.end_line, "score": h.score,
                                         "superseded_by": h.superseded_by, "supersedes": h.supersedes,
                                         "snippet": h.snippet}
                                        for h in resp.results]
                mem._pipeline = pipelines["off"]
        if args.misses:
            for name in files:
                for q in sets[name]:
                    hits = runs["on"][name][q["id"]]
                    row = _score_query(q, hits)
                    off = _score_query(q, runs["off"][name][q["id"]])
                    if row.get("mrr@10", 0.0) < off.get("mrr@10", 0.0):
                        _print_miss(root, q, hits, f"gold rank {off.get('first_gold_rank')} -> "
                                                   f"{row.get('first_gold_rank')} with it on")
                    elif row.get("stale_above_gold") == 1.0:
                        _print_miss(root, q, hits, "stale above gold")
                    elif q.get("as_of") and row.get("hit@1") == 0.0:
                        _print_miss(root, q, hits, "as-of answer not first")
    if args.dump is not None:
        args.dump.write_text(json.dumps(runs, indent=1, sort_keys=True, default=list), encoding="utf-8")
    print(f"provider {args.provider}; " + ", ".join(f"{len(v)} {k}" for k, v in sets.items())
          + f" queries, {args.repeat} timed passes (p50/p90 over all of them)")
    print("| supersession | set | hit@5 | MRR@10 | paraphrase MRR | stale>gold | as-of hit@1 | as-of stale>gold "
          "| search p50 ms | p90 ms |\n|---|---|---|---|---|---|---|---|---|---|")
    p50 = {}
    for label in ("off", "on"):
        t = sorted(times[label])
        p50[label] = statistics.median(t) * 1000
        p90 = t[int(0.9 * (len(t) - 1))] * 1000
        asof = score_run(sets["asof"], runs[label]["asof"])["overall"]
        for name in ("devmem", "convmem"):
            res = score_run(sets[name], runs[label][name])
            o, para = res["overall"], res["per_type"].get("paraphrase", {})
            extra = (f"{asof['hit@1']:.3f} | {asof['stale_above_gold']:.3f} | {p50[label]:.1f} | {p90:.1f}"
                     if name == "devmem" else " | | | ")
            print(f"| {label} | {name} | {o['hit@5']:.3f} | {o['mrr@10']:.3f} | {para.get('mrr@10', 0):.3f} | "
                  f"{o['stale_above_gold']:.3f} ({o['stale_queries']}) | {extra} |")
    cpu50 = {label: statistics.median(v) * 1000 for label, v in cpu.items()}
    print(f"p50 on/off: {p50['on'] / p50['off']:.2f}x; CPU p50 {cpu50['off']:.1f} / {cpu50['on']:.1f} ms "
          f"({cpu50['on'] / cpu50['off']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
