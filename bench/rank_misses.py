"""Where the ranking misses: the queries whose gold is not at rank 1, with the top hits and their scores.

Indexes each dataset once (a state dir kept under ``--state``, so a second
run only re-searches), searches every positive query as a user would (the
default config, ``now`` from the query) and prints, for each query whose gold
is not first, the top hits with their final, vector and keyword scores and the
rank and scores of the best gold chunk. The summary per query type counts
where the gold landed (1, 2-5, 6-10, not in the top 10).

    python bench/rank_misses.py [--datasets devmem,convmem] [--types paraphrase] [--top 5] [--set KEY=JSON]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / "bench" / "datasets"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_bench import _nested  # noqa: E402  (the same dotted --set keys, nested)


def misses(dataset: Path, state: Path, settings: dict[str, Any], types: set[str], top: int,
           provider: str) -> Counter[tuple[str, str]]:
    from symi_memory import load_config
    from symi_memory.evaluation import _overlaps, _throwaway_config, load_queries, parse_now
    from symi_memory.manager import open_memory
    from symi_memory.types import SearchQuery

    queries = [q for q in load_queries(dataset / "queries.jsonl") if q.get("gold")]
    ms = _nested(settings)
    ms["provider"] = provider
    state.mkdir(parents=True, exist_ok=True)
    where: Counter[tuple[str, str]] = Counter()
    cfg = load_config(None, state_dir=str(state), overrides={"agents": {"defaults": {"memorySearch": ms}}})
    with open_memory(_throwaway_config(cfg, state), workspace=dataset / "workspace", start=False) as mem:
        mem.sync(reason="eval")
        for q in queries:
            resp = mem.search(q["query"], max_results=10, min_score=0, now=parse_now(q.get("now")))
            hits = list(resp.results)
            # Each side's probability, from the backend's own candidates (the manager's hits carry only the score).
            limit = min(200, 6 * int(mem.agent.memory_search["query"]["hybrid"]["candidateMultiplier"]))
            cands = mem._require().search(SearchQuery(text=q["query"], max_results=10, min_score=0.0,
                                                      candidate_limit=limit)).candidates
            sides = {(c.path, c.start_line, c.end_line): (c.vector_score, c.text_score, c.text) for c in cands}
            gold_rank = next((i for i, h in enumerate(hits, 1)
                              if any(_overlaps({"path": h.path, "start": h.start_line, "end": h.end_line}, g)
                                     for g in q["gold"])), None)
            bucket = "1" if gold_rank == 1 else "2-5" if gold_rank and gold_rank <= 5 else \
                "6-10" if gold_rank else "none"
            where[(q["type"], bucket)] += 1
            if gold_rank != 1:
                where[("why", _why(hits, gold_rank, q, sides))] += 1
                where[("why", "(of these: gold second)")] += gold_rank == 2
                where[("why", "(of these: a date or time word in the question)")] += bool(_TIME_WORDS.search(q["query"]))
            if gold_rank == 1 or (types and q["type"] not in types):
                continue
            print(f"\n{q['id']} [{q['type']}] gold rank {gold_rank}: {q['query']}")
            print("   gold: " + "; ".join(f"{g['path']}:{g['start_line']}" for g in q["gold"][:4]))
            for i, h in enumerate(hits[:top], 1):
                mark = "*" if i == gold_rank else " "
                print("  " + _line(mark, i, h, sides))
            if gold_rank and gold_rank > top:
                print("  " + _line("*", gold_rank, hits[gold_rank - 1], sides))
    return where


# A question that names a time: a month, a season, or a word asking when or how recent.
_TIME_WORDS = re.compile(r"\b(January|February|March|April|May|June|July|August|September|October|November|December"
                         r"|spring|summer|autumn|winter|week|yesterday|last|recent|recently|now|currently|still|latest"
                         r"|when|since)\b", re.IGNORECASE)


def _why(hits: list[Any], gold_rank: int | None, q: dict[str, Any], sides: dict[tuple[str, int, int], Any]) -> str:
    """The first category that fits a miss: the gold outside the top 10, another chunk of a gold file first, else
    which side's probability prefers the top hit over the gold's best chunk (the first gold hit)."""
    if gold_rank is None:
        return "gold not in the top 10"
    top, gold = hits[0], hits[gold_rank - 1]
    if top.path in {g["path"] for g in q["gold"]}:
        return "another chunk of a gold file first"
    tv, tt, _ = sides.get((top.path, top.start_line, top.end_line), (None, None, ""))
    gv, gt, _ = sides.get((gold.path, gold.start_line, gold.end_line), (None, None, ""))
    dv, dt = (tv or 0.0) - (gv or 0.0), (tt or 0.0) - (gt or 0.0)
    return ("both sides prefer the top hit" if dv > 0 and dt > 0 else "only the keyword side prefers it" if dt > 0
            else "only the vector side prefers it" if dv > 0 else "neither (floor, post-processing)")


def _line(mark: str, rank: int, h: Any, sides: dict[tuple[str, int, int], Any]) -> str:
    v, t, _ = sides.get((h.path, h.start_line, h.end_line), (None, None, ""))
    text = " ".join(h.snippet.split())[:100]
    return f"{mark}{rank:2d} {h.score:.3f} v={_f(v)} t={_f(t)} {h.path}:{h.start_line}-{h.end_line}  {text}"


def _f(v: float | None) -> str:
    return "  -  " if v is None else f"{v:.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="devmem,convmem")
    ap.add_argument("--provider", default="local")
    ap.add_argument("--types", default="", help="only print misses of these query types (comma-separated)")
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--state", type=Path, default=Path("/tmp/symi-rank-misses"),
                    help="where the indexes are kept between runs")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON")
    args = ap.parse_args()
    settings: dict[str, Any] = {}
    for item in args.set:
        key, _, value = item.partition("=")
        try:
            settings[key] = json.loads(value)
        except json.JSONDecodeError:
            settings[key] = value
    types = {t for t in args.types.split(",") if t}
    for name in args.datasets.split(","):
        print(f"\n===== {name}")
        tag = "-".join(f"{k}={v}" for k, v in sorted(settings.items())) or "default"
        where = misses(DATASETS / name, args.state / f"{name}-{args.provider}-{tag}", settings, types, args.top,
                       args.provider)
        print(f"\n{name}: where the gold landed (rank 1 / 2-5 / 6-10 / none)")
        for t in sorted({t for t, _ in where} - {"why"}):
            cells = [str(where[(t, b)]) for b in ("1", "2-5", "6-10", "none")]
            print(f"  {t:14s} " + " / ".join(cells))
        print(f"{name}: why the gold is not first")
        for (kind, why), n in sorted(where.items(), key=lambda kv: -kv[1]):
            if kind == "why":
                print(f"  {n:4d}  {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
