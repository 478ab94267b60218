"""Recall under the default config, side by side with a baseline checkout (issue 10).

Runs every query of each dataset twice through ``MemoryManager.search``: as a
user gets it (the configured ``minScore`` and ``maxResults``) and as a ranking
(``minScore`` 0, 10 results), times the as-configured searches, and scores
both views with ``symi_memory.evaluation``. The baseline is another checkout
of the repository (``--baseline DIR``, e.g. ``git archive 0e8aad2 | tar -x -C
DIR``): the same worker runs with ``PYTHONPATH`` pointing at that checkout, in
the same run, so the figures are comparable.

    python bench/recall_bench.py [--baseline DIR] [--datasets devmem,fivequestions]
        [--providers local,none] [--set query.hybrid.fusion=rrf]

A dataset named ``heldout/devmem`` (or ``heldout/convmem``) searches the held-out
questions of ``bench/datasets/heldout/devmem.jsonl`` over devmem's workspace.
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
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / "bench" / "datasets"


def _nested(dotted: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in dotted.items():
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


def locate(name: str) -> tuple[Path, Path]:
    """The workspace folder and the queries file of a dataset name (``devmem``, ``heldout/devmem``)."""
    if name.startswith("heldout/"):
        corpus = name.split("/", 1)[1]
        return DATASETS / corpus, DATASETS / "heldout" / f"{corpus}.jsonl"
    return DATASETS / name, DATASETS / name / "queries.jsonl"


def worker(dataset: str, provider: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Index ``dataset`` in a throwaway state dir and search every query both ways (runs in the checkout under test)."""
    from symi_memory import load_config
    from symi_memory.evaluation import _throwaway_config, load_queries, parse_now
    from symi_memory.manager import open_memory

    root, queries_file = locate(dataset)
    queries = load_queries(queries_file)
    ms = _nested(settings)
    ms["provider"] = provider
    out: dict[str, Any] = {"configured": {}, "ranking": {}, "ms": []}
    with tempfile.TemporaryDirectory(prefix="symi-recall-") as tmp:
        cfg = load_config(None, state_dir=tmp, overrides={"agents": {"defaults": {"memorySearch": ms}}})
        with open_memory(_throwaway_config(cfg, Path(tmp)), workspace=root / "workspace", start=False) as mem:
            mem.sync(reason="eval")
            for q in queries:  # warm-up: model load, page cache
                mem.search(q["query"], now=parse_now(q.get("now")))
                break
            for q in queries:
                now = parse_now(q.get("now"))
                t0 = time.perf_counter()
                resp = mem.search(q["query"], now=now)
                out["ms"].append((time.perf_counter() - t0) * 1000)
                out["configured"][q["id"]] = [{"path": h.path, "start": h.start_line, "end": h.end_line,
                                               "score": h.score} for h in resp.results]
                resp = mem.search(q["query"], max_results=10, min_score=0, now=now)
                out["ranking"][q["id"]] = [{"path": h.path, "start": h.start_line, "end": h.end_line,
                                            "score": h.score} for h in resp.results]
    return out


def run_in(checkout: Path | None, dataset: str, provider: str, settings: dict[str, Any]) -> dict[str, Any]:
    env = dict(os.environ)
    if checkout is not None:
        env["PYTHONPATH"] = f"{checkout / 'core'}{os.pathsep}{checkout / 'plugins'}"
    proc = subprocess.run([sys.executable, __file__, "--worker", dataset, provider, json.dumps(settings)],
                          env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"worker failed ({checkout or 'this checkout'}, {dataset}, {provider}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summarise(dataset: str, raw: dict[str, Any]) -> dict[str, Any]:
    from symi_memory.evaluation import load_queries, score_run

    queries = load_queries(locate(dataset)[1])
    configured = score_run(queries, raw["configured"])
    ranking = score_run(queries, raw["ranking"])
    ms = sorted(raw["ms"])
    return {"configured": configured, "ranking": ranking, "raw": raw,
            "p50_ms": statistics.median(ms), "p90_ms": ms[int(0.9 * (len(ms) - 1))]}


def f(v: Any) -> str:
    return "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))


def rows_for(label: str, s: dict[str, Any]) -> list[str]:
    c, r = s["configured"], s["ranking"]
    o = c["overall"]
    types = [t for t in c["per_type"] if t != "negative"]
    neg = c["per_type"].get("negative", {})
    cells = [label, f(o["hit@1"]), f(o["hit@5"]), f(o.get("positive_empty")),
             f"{neg.get('negative_empty_count', '-')}/{neg.get('negative', '-')}",
             f(r["overall"]["hit@1"]), f(r["overall"]["hit@5"]), f(r["overall"]["mrr@10"])]
    cells += [f"{f(c['per_type'][t]['hit@5'])}" for t in types]
    cells += [f"{s['p50_ms']:.1f}"]
    return ["| " + " | ".join(cells) + " |", "|".join(types)]


KEEP_MARKER = "<!-- hand-written below: kept by recall_bench.py --doc -->"
DOC_HEAD = """# Retrieval quality on the dev sets

Generated by `python bench/recall_bench.py --baseline DIR --datasets devmem,convmem,fivequestions --providers
local,none --doc docs/quality.md` (DIR: `git archive` of the main branch this work was merged with, so
`baseline` is the product before it: {baseline}). Each row
indexes the dataset in a throwaway state dir and searches every query twice:

- **as configured** (`hit@1`, `hit@5`, `pos empty`, `neg empty`, the per-type columns): the default config,
  so `minScore` and `maxResults` apply. This is what `symi-memory eval DATASET` reports. `pos empty` is the share
  of answerable queries that returned nothing, `neg empty` the number of unanswerable ones that returned nothing.
- **ranking** (`rank hit@1`, `rank hit@5`, `rank MRR`): `minScore` 0 and 10 results, what
  `symi-memory eval DATASET --min-score 0` reports.

`local` is all-MiniLM-L6-v2 (int8 ONNX, offline); `none` is keyword-only. `p50 ms` is the median as-configured
search time, baseline and this checkout measured one after the other in the same run on a shared machine.
`fivequestions` is the three-file workspace of issue 10. Definitions of hit@k and MRR: `bench/datasets/devmem/README.md`.
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", nargs=3, metavar=("DATASET", "PROVIDER", "SETTINGS"), help=argparse.SUPPRESS)
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout to run side by side")
    ap.add_argument("--datasets", default="devmem,fivequestions")
    ap.add_argument("--providers", default="local,none")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                    help="memorySearch setting for this checkout's runs, e.g. query.hybrid.fusion='\"rrf\"'")
    ap.add_argument("--json-out", type=Path, default=None)
    ap.add_argument("--raw-out", type=Path, default=None,
                    help="also write every query's hits (both views) per run, for per-query comparisons")
    ap.add_argument("--doc", type=Path, default=None, help="write the tables as docs/quality.md")
    ap.add_argument("--baseline-note", default="the checkout given as DIR",
                    help="what the baseline is, for the --doc header (e.g. 'main at 8ccd4a6')")
    ap.add_argument("--from-json", type=Path, default=None, help="render the tables of an earlier --json-out")
    ap.add_argument("--thresholds", default="", help="also print the as-configured figures at these minScores "
                    "(from the ranking hits, top 6), e.g. 0.1,0.2,0.3")
    args = ap.parse_args()
    if args.worker:
        dataset, provider, settings = args.worker
        print(json.dumps(worker(dataset, provider, json.loads(settings))))
        return 0
    settings = {}
    for item in args.set:
        key, _, value = item.partition("=")
        try:
            settings[key] = json.loads(value)
        except json.JSONDecodeError:
            settings[key] = value
    results: dict[str, Any] = {}
    names = [] if args.from_json else args.datasets.split(",")
    if args.from_json:
        results = json.loads(args.from_json.read_text(encoding="utf-8"))
    for name in names:
        dataset = name
        for provider in args.providers.split(","):
            sides = [("baseline", args.baseline, {})] if args.baseline else []
            sides.append(("this", None, settings))
            for side, checkout, sets in sides:
                started = time.perf_counter()
                s = summarise(dataset, run_in(checkout, dataset, provider, sets))
                results[f"{name}/{provider}/{side}"] = s
                print(f"{name} {provider} {side}: {time.perf_counter() - started:.0f}s", file=sys.stderr)
    header_done: set[str] = set()
    lines: list[str] = []
    for key, s in results.items():
        name = key.rsplit("/", 2)[0]
        row, types = rows_for(key, s)
        if name not in header_done:
            header_done.add(name)
            head = ["run", "hit@1", "hit@5", "pos empty", "neg empty", "rank hit@1", "rank hit@5", "rank MRR"]
            head += [f"hit@5 {t}" for t in types.split("|")] + ["p50 ms"]
            lines.append(f"\n## {name}\n\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
        lines.append(row)
    print("\n".join(lines))
    if args.doc:
        # Hand-written measurements below KEEP_MARKER (ranking rounds that built nothing) survive a regeneration.
        kept = ""
        if args.doc.exists():
            old = args.doc.read_text(encoding="utf-8")
            if KEEP_MARKER in old:
                kept = "\n" + old[old.index(KEEP_MARKER):]
        args.doc.write_text(DOC_HEAD.replace("{baseline}", args.baseline_note) + "\n".join(lines) + "\n" + kept,
                            encoding="utf-8")
    if args.thresholds:
        from symi_memory.evaluation import load_queries, score_run
        for key, s in results.items():
            queries = load_queries(locate(key.rsplit("/", 2)[0])[1])
            for t in (float(x) for x in args.thresholds.split(",")):
                run = {qid: [h for h in hits if h["score"] >= t][:6] for qid, hits in s["raw"]["ranking"].items()}
                r = score_run(queries, run)
                o, pt = r["overall"], r["per_type"]
                ml = pt.get("multilingual", {})
                print(f"{key} minScore {t:.3f}: hit@1 {f(o['hit@1'])} hit@5 {f(o['hit@5'])} "
                      f"pos empty {f(o.get('positive_empty'))} neg empty {f(o.get('negative_empty'))} "
                      f"para@5 {f(pt.get('paraphrase', {}).get('hit@5'))} ml@5 {f(ml.get('hit@5'))} "
                      f"ml empty {f(ml.get('positive_empty'))}")
    if args.raw_out:
        args.raw_out.write_text(json.dumps({k: v["raw"] for k, v in results.items() if "raw" in v}), encoding="utf-8")
    if args.json_out:
        args.json_out.write_text(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "raw"}
                                             for k, v in results.items()}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
