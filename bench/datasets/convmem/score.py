#!/usr/bin/env python3
"""Score a retrieval run against the convmem queries (stdlib only).

Results file: JSON Lines, one object per query:

    {"id": "c001", "hits": [{"path": "memory/priya/2026-01-27.md", "start_line": 4, "end_line": 9, "score": 0.71}, ...]}

Hits must be in rank order (best first). `startLine`/`endLine` (the memory_search
tool's spelling) are accepted as well, and so is `results` instead of `hits`.
Paths are relative to the workspace root (`MEMORY.md`, `memory/...`).

A hit matches a gold (or stale) entry when the paths are equal and the line
ranges overlap. A hit that overlaps gold counts as gold even if it also
overlaps a stale entry.

Metrics (non-negative queries):
  hit@1, hit@5        a gold entry is matched at rank 1 / within the top 5
  recall@5            fraction of gold groups matched within the top 5; a group
                      is all entries sharing a "hop" value, or a single entry
                      when it has no hop (alternative evidence shares a hop)
  MRR@10              1 / rank of the first gold match within the top 10
  stale-above-gold    (queries with stale entries) a stale match is ranked
                      above the first gold match, within the top 10; counted
                      when a stale line shows up and no gold line does
Negative queries: the top score (rank-1 score, 0 when nothing is returned).
With --min-score X also: the share of negative queries whose top score is >= X,
and the share of positive queries whose first gold match scores >= X.

    python3 score.py run.jsonl                # table, overall and per type
    python3 score.py run.jsonl --json         # machine-readable
    python3 score.py run.jsonl --per-query    # also list each query's ranks
    python3 score.py --oracle                 # score the gold itself (sanity check: all 1.0)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TYPES = ["single-hop", "multi-hop", "temporal", "paraphrase", "negative"]


def load_jsonl(path: Path) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{n}: bad JSON: {e}")
    return rows


def norm_path(p: str) -> str:
    p = p.replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    if p.startswith("workspace/"):
        p = p[len("workspace/"):]
    return p


def norm_hit(h: dict) -> dict:
    s = h.get("start_line", h.get("startLine"))
    e = h.get("end_line", h.get("endLine", s))
    if s is None:
        raise ValueError(f"hit without start line: {h}")
    return {"path": norm_path(str(h["path"])), "start": int(s), "end": int(e),
            "score": float(h.get("score", 0.0) or 0.0)}


def overlaps(hit: dict, loc: dict) -> bool:
    return (hit["path"] == norm_path(loc["path"])
            and hit["start"] <= loc["end_line"] and loc["start_line"] <= hit["end"])


def groups(gold: list[dict]) -> list[list[int]]:
    """Indices of gold entries grouped by hop; entries without a hop are their own group."""
    by_hop: dict[object, list[int]] = {}
    out: list[list[int]] = []
    for i, g in enumerate(gold):
        if g.get("hop") is None:
            out.append([i])
        else:
            by_hop.setdefault(g["hop"], []).append(i)
    return out + list(by_hop.values())


def score_query(q: dict, hits: list[dict], k: int, mrr_k: int, stale_k: int) -> dict:
    gold = q.get("gold", [])
    stale = q.get("stale", [])
    res: dict = {"id": q["id"], "type": q["type"], "n_hits": len(hits),
                 "top_score": hits[0]["score"] if hits else 0.0}
    if q["type"] == "negative" or not gold:
        return res
    first_gold = None
    first_stale = None
    covered: set[int] = set()
    for rank, h in enumerate(hits, 1):
        g_idx = [i for i, g in enumerate(gold) if overlaps(h, g)]
        if g_idx:
            if first_gold is None:
                first_gold = rank
                res["first_gold_score"] = h["score"]
            if rank <= k:
                covered.update(g_idx)
        elif stale and first_stale is None and any(overlaps(h, s) for s in stale):
            first_stale = rank
    grp = groups(gold)
    res["first_gold_rank"] = first_gold
    res["hit@1"] = 1.0 if first_gold == 1 else 0.0
    res[f"hit@{k}"] = 1.0 if first_gold is not None and first_gold <= k else 0.0
    res[f"recall@{k}"] = sum(1 for g in grp if covered.intersection(g)) / len(grp)
    res[f"mrr@{mrr_k}"] = 1.0 / first_gold if first_gold is not None and first_gold <= mrr_k else 0.0
    if stale:
        fg = first_gold if first_gold is not None and first_gold <= stale_k else None
        fs = first_stale if first_stale is not None and first_stale <= stale_k else None
        res["first_stale_rank"] = first_stale
        res["stale_above_gold"] = 1.0 if fs is not None and (fg is None or fs < fg) else 0.0
    return res


def mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def aggregate(rows: list[dict], k: int, mrr_k: int, min_score: float | None) -> dict:
    pos = [r for r in rows if r["type"] != "negative" and "hit@1" in r]
    neg = [r for r in rows if r["type"] == "negative"]
    out: dict = {"queries": len(rows), "positive": len(pos), "negative": len(neg)}
    for m in ("hit@1", f"hit@{k}", f"recall@{k}", f"mrr@{mrr_k}"):
        out[m] = mean([r[m] for r in pos])
    st = [r["stale_above_gold"] for r in pos if "stale_above_gold" in r]
    out["stale_queries"] = len(st)
    out["stale_above_gold"] = mean(st)
    if pos:
        out["positive_empty"] = mean([1.0 if r["n_hits"] == 0 else 0.0 for r in pos])
    if neg:
        out["negative_empty_count"] = sum(1 for r in neg if r["n_hits"] == 0)
        out["negative_empty"] = out["negative_empty_count"] / len(neg)
        tops = [r["top_score"] for r in neg]
        out["negative_top_score_mean"] = mean(tops)
        out["negative_top_score_max"] = max(tops)
    if pos:
        out["positive_top_score_mean"] = mean([r["top_score"] for r in pos])
    if min_score is not None:
        if neg:
            out["negative_above_min_score"] = mean([1.0 if r["top_score"] >= min_score else 0.0 for r in neg])
        if pos:
            out["positive_gold_above_min_score"] = mean(
                [1.0 if r.get("first_gold_score", float("-inf")) >= min_score else 0.0 for r in pos])
    return out


def fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="?", help="results JSONL (one object per query id)")
    ap.add_argument("--queries", default=str(HERE / "queries.jsonl"), help="queries JSONL")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--per-query", action="store_true", help="include per-query rows")
    ap.add_argument("--k", type=int, default=5, help="cut-off for hit@k and recall@k (default 5)")
    ap.add_argument("--mrr-k", type=int, default=10, help="cut-off for MRR (default 10)")
    ap.add_argument("--stale-k", type=int, default=10, help="ranks considered for stale-above-gold (default 10)")
    ap.add_argument("--min-score", type=float, help="also report how many negatives / golds clear this score")
    ap.add_argument("--type", choices=TYPES, action="append", help="only score these types (repeatable)")
    ap.add_argument("--oracle", action="store_true", help="use the gold entries themselves as the run")
    args = ap.parse_args()

    queries = load_jsonl(Path(args.queries))
    if args.type:
        queries = [q for q in queries if q["type"] in args.type]
    if args.oracle:
        run = {}
        for q in queries:
            grp = groups(q["gold"])
            order = [g[0] for g in grp] + [i for g in grp for i in g[1:]]  # one entry per group first
            run[q["id"]] = [{"path": q["gold"][i]["path"], "start": q["gold"][i]["start_line"],
                             "end": q["gold"][i]["end_line"], "score": 1.0} for i in order]
    else:
        if not args.results:
            ap.error("give a results file, or --oracle")
        run = {}
        for r in load_jsonl(Path(args.results)):
            hits = r.get("hits", r.get("results", [])) or []
            run[str(r["id"])] = [norm_hit(h) for h in hits]
    missing = [q["id"] for q in queries if q["id"] not in run]

    rows = [score_query(q, run.get(q["id"], []), args.k, args.mrr_k, args.stale_k) for q in queries]
    overall = aggregate(rows, args.k, args.mrr_k, args.min_score)
    per_type = {t: aggregate([r for r in rows if r["type"] == t], args.k, args.mrr_k, args.min_score)
                for t in TYPES if any(r["type"] == t for r in rows)}
    report = {"overall": overall, "per_type": per_type, "missing_ids": missing,
              "settings": {"k": args.k, "mrr_k": args.mrr_k, "stale_k": args.stale_k, "min_score": args.min_score}}
    if args.per_query:
        report["per_query"] = rows

    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0

    k, mk = args.k, args.mrr_k
    cols = ["n", "hit@1", f"hit@{k}", f"recall@{k}", f"MRR@{mk}", "stale>gold", "top score (neg)"]
    print(f"{'type':<13}" + "".join(f"{c:>16}" for c in cols))
    for name, a in [("overall", overall)] + list(per_type.items()):
        n = a["negative"] if name == "negative" else a["positive"]
        stale = f"{fmt(a['stale_above_gold'])} ({a['stale_queries']})" if a["stale_queries"] else "-"
        neg = (f"{fmt(a.get('negative_top_score_mean'))} / {fmt(a.get('negative_top_score_max'))}"
               if a.get("negative") else "-")
        vals = [n, a["hit@1"], a[f"hit@{k}"], a[f"recall@{k}"], a[f"mrr@{mk}"], stale, neg]
        print(f"{name:<13}" + "".join(f"{fmt(v):>16}" for v in vals))
    print("\nstale>gold: share of queries with stale lines where a stale match outranks the first gold match "
          f"(top {args.stale_k}); number of such queries in brackets.")
    print("top score (neg): mean / max rank-1 score on negative queries "
          f"(positives' mean rank-1 score: {fmt(overall.get('positive_top_score_mean'))}).")
    if args.min_score is not None:
        print(f"min-score {args.min_score}: negatives at or above it: {fmt(overall.get('negative_above_min_score'))}; "
              f"positives whose first gold match is at or above it: {fmt(overall.get('positive_gold_above_min_score'))}")
    if missing:
        print(f"\n{len(missing)} query id(s) missing from the run (scored as empty): {', '.join(missing[:10])}"
              + (" ..." if len(missing) > 10 else ""))
    if args.per_query:
        print("\nper query: id type first_gold_rank recall stale_rank top_score")
        for r in rows:
            print(f"  {r['id']} {r['type']:<12} {fmt(r.get('first_gold_rank'))} "
                  f"{fmt(r.get(f'recall@{k}'))} {fmt(r.get('first_stale_rank'))} {fmt(r['top_score'])}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        sys.exit(0)
