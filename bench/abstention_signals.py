"""Can a search tell a never-said question from an answerable one? Signals measured on the dev sets (issue 10).

Under the default config every negative query of devmem and convmem (questions
about things never written in memory, near misses on purpose: "the cat's vet
appointment" in a memory about a dog) returns something, and raising
``minScore`` empties real answers first (docs/search-scores.md). This script
measures whether a *second* signal separates the two kinds of query, before
anything is built on it. It indexes each dataset with the default config and
the offline ``local`` provider (the model can be changed with ``--model``),
searches every query as ``explain`` does (``minScore`` 0), and computes, for
the top hit of each query:

* ``score``: its final score (what ``minScore`` is compared with);
* ``cosine``: its vector score before calibration (chunk and best line blended
  by ``store.vector.unitWeight``);
* ``z_line``: how far the best line of the whole index stands above the
  query's mean line cosine, in standard deviations (a query about nothing
  in memory should have a flat profile);
* ``gap10``: its blended cosine minus that of the 10th chunk of the index;
* ``line_vs_chunk``: its best line's cosine minus its chunk's (agreement of
  the two vectors);
* ``coverage``: the IDF share of the query's terms it holds (terms unknown to
  the index count with their IDF);
* ``unknown_drop``: for queries holding both words the index knows and words it
  has never seen, its blended cosine with the query minus that with the query
  stripped of the unknown words: does the unknown vocabulary (the "piano
  recital" of "Ilse's piano recital") contribute to the match?
* ``unknown_alone``: its blended cosine with the unknown words alone;
* ``side_rank``: minus the sum of its vector rank and keyword rank among the
  candidates (agreement of the two sides);
* ``logistic``: all of the above combined by a logistic regression fitted on
  the same queries (in-sample, so an optimistic ceiling).

For each signal it prints the AUC between answerable queries whose gold is in
the top 5 and negative queries (0.5 is chance), and the negatives a query-level
rule "return nothing when the signal is below t" empties at the most rejecting
t that loses at most ``--budget`` answerable queries per dev set and none of
``fivequestions`` (and, in brackets, with ``fivequestions`` unconstrained).
A signal where ``unknown_*`` does not apply (no unknown or no known word) never
rejects.

Last, the as-configured figures when a query holding at least one word the
index knows needs ``--conditional`` thresholds instead of ``minScore`` (the
reworded questions that score lowest share no word with the index).

    python bench/abstention_signals.py [--datasets devmem,convmem,fivequestions] [--budget 2]
        [--model all-MiniLM-L6-v2] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / "bench" / "datasets"
SIGNALS = ("score", "cosine", "z_line", "gap10", "line_vs_chunk", "coverage", "unknown_drop", "unknown_alone",
           "side_rank")


def _gold_rank(query: dict[str, Any], hits: list[dict[str, Any]]) -> int | None:
    for rank, h in enumerate(hits, 1):
        for g in query.get("gold", []):
            if h["path"] == g["path"] and h["start"] <= g["end_line"] and g["start_line"] <= h["end"]:
                return rank
    return None


def _unit(v: Any) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    n = float(np.linalg.norm(a))
    return a / n if n else a


def features(dataset: Path, model: str | None) -> list[dict[str, Any]]:
    """One row of signals per query of ``dataset`` (see the module docstring)."""
    from symi_memory import load_config
    from symi_memory.evaluation import _throwaway_config, load_queries, parse_now
    from symi_memory.index.analysis import QueryAnalysis, idf, stem, term_counts
    from symi_memory.index.keyword import CJK_RUN_RE
    from symi_memory.manager import open_memory

    ms: dict[str, Any] = {"provider": "local"}
    if model:
        ms["local"] = {"model": model}
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="symi-abst-") as tmp:
        cfg = load_config(None, state_dir=tmp, overrides={"agents": {"defaults": {"memorySearch": ms}}})
        with open_memory(_throwaway_config(cfg, Path(tmp)), workspace=dataset / "workspace", start=False) as mem:
            mem.sync(reason="eval")
            backend: Any = mem.backend
            store, provider = backend.store, backend.choice.provider
            weight = float(mem.agent.memory_search["store"]["vector"].get("unitWeight", 0.0))
            rows = store._read("SELECT rowid, id, text FROM chunks").fetchall()
            rowids = [r[0] for r in rows]
            index_of = {r[1]: i for i, r in enumerate(rows)}
            counts = [term_counts(r[2]) for r in rows]
            n = len(rows)
            df: dict[str, int] = {}
            for c in counts:
                for t in c:
                    df[t] = df.get(t, 0) + 1
            chunk_blobs = store.vectors_by_rowid(rowids)
            unit_blobs = store.unit_vectors_by_rowid(rowids)
            chunks = np.stack([_unit(np.frombuffer(chunk_blobs[r], dtype=np.float32)) for r in rowids])
            lines, owner = [], []
            for i, r in enumerate(rowids):
                for b in unit_blobs.get(r, ()):
                    lines.append(_unit(np.frombuffer(b, dtype=np.float32)))
                    owner.append(i)
            line_m = np.stack(lines) if lines else np.zeros((0, chunks.shape[1]), dtype=np.float32)
            owner_a = np.asarray(owner, dtype=np.int64)

            def blended(qv: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
                cc = chunks @ qv
                lc = line_m @ qv
                best = np.full(n, -1.0, dtype=np.float64)
                if len(lc):
                    np.maximum.at(best, owner_a, lc)
                return (1 - weight) * cc + weight * np.maximum(cc, best), cc, best if len(lc) else cc

            for q in load_queries(dataset / "queries.jsonl"):
                qa = QueryAnalysis.of(q["query"])
                row: dict[str, Any] = {"dataset": dataset.name, "id": q["id"], "type": q["type"], "query": q["query"]}
                if not qa.terms:  # stop words only: the search returns nothing already
                    row.update(empty=True, gold_rank=None, hits=[], knows_a_word=False)
                    out.append(row)
                    continue
                ex = mem.explain(q["query"], max_results=10, min_score=0, now=parse_now(q.get("now")))
                cands = [c for c in ex["candidates"] if "final" in c["stages"]]
                cands.sort(key=lambda c: c["stages"]["final"]["rank"])
                hits = [{"path": c["path"], "start": c["startLine"], "end": c["endLine"],
                         "score": c["stages"]["final"]["score"]} for c in cands]
                row["hits"] = hits
                row["knows_a_word"] = any(df.get(t, 0) > 0 for t in qa.terms)
                if not cands:
                    row.update(empty=True, gold_rank=None)
                    out.append(row)
                    continue
                top = cands[0]
                ti = index_of[top["id"]]
                qv = _unit(provider.embed_query(q["query"]))
                comb, cc, best = blended(qv)
                ranked = np.sort(comb)[::-1]
                lc = line_m @ qv if len(line_m) else cc
                w = {t: idf(df.get(t, 0), n) for t in qa.terms}
                total = sum(w.values()) or 1.0
                unknown = [x for x in qa.words
                           if x.isalpha() and not CJK_RUN_RE.search(x) and df.get(stem(x), 0) == 0]
                known_left = [x for x in qa.words if x not in unknown]
                drop = alone = None
                if unknown and known_left:
                    reduced = " ".join(t for t in qa.tokens if t not in unknown)
                    drop = float(comb[ti] - blended(_unit(provider.embed_query(reduced)))[0][ti])
                    alone = float(blended(_unit(provider.embed_query(" ".join(unknown))))[0][ti])
                by_vec = sorted(cands, key=lambda c: -(c["vector"] or 0.0))
                by_kw = sorted(cands, key=lambda c: -(c["keyword"] or 0.0))
                kw_rank = by_kw.index(top) + 1 if (top["keyword"] or 0.0) > 0 else len(cands) + 1
                row.update(
                    empty=False, gold_rank=_gold_rank(q, hits),
                    score=top["stages"]["final"]["score"], cosine=float(comb[ti]),
                    z_line=float((lc.max() - lc.mean()) / (lc.std() or 1.0)),
                    gap10=float(ranked[0] - ranked[min(9, len(ranked) - 1)]),
                    line_vs_chunk=float(best[ti] - cc[ti]),
                    coverage=sum(w[t] for t in qa.terms if counts[ti].get(t)) / total,
                    unknown_drop=drop, unknown_alone=alone,
                    side_rank=-float(by_vec.index(top) + 1 + kw_rank),
                )
                out.append(row)
    return out


def _auc(pos: list[float], neg: list[float]) -> float | None:
    if not pos or not neg:
        return None
    wins = sum((p > x) + 0.5 * (p == x) for p in pos for x in neg)
    return wins / (len(pos) * len(neg))


def _logistic(rows: list[dict[str, Any]]) -> None:
    """Adds ``logistic``: P(answerable) from every signal, fitted in-sample (negatives weighted up to balance)."""
    usable = [r for r in rows if not r["empty"]]
    if not usable:
        return
    x = np.array([[r[s] if r[s] is not None else math.nan for s in SIGNALS] for r in usable], dtype=np.float64)
    mu, sd = np.nanmean(x, axis=0), np.nanstd(x, axis=0)
    sd[sd == 0] = 1.0
    x = np.nan_to_num((x - mu) / sd)  # a signal that does not apply sits at the mean
    y = np.array([0.0 if r["type"] == "negative" else 1.0 for r in usable])
    neg = max(1.0, float((y == 0).sum()))
    wt = np.where(y == 0, (len(y) - neg) / neg, 1.0)
    w, b = np.zeros(x.shape[1]), 0.0
    for _ in range(4000):
        p = 1.0 / (1.0 + np.exp(-(x @ w + b)))
        g = (p - y) * wt
        w -= 0.05 * (x.T @ g / len(y) + 0.01 * w)
        b -= 0.05 * float(g.mean())
    for r, s in zip(usable, x @ w + b, strict=True):
        r["logistic"] = float(s)


def tradeoff(rows: list[dict[str, Any]], signal: str, budget: int, five: bool) -> tuple[float | None, dict[str, int]]:
    """The most rejecting threshold within the budget, and the negatives it empties per dataset."""
    live = [r for r in rows if not r["empty"] and r.get(signal) is not None]
    answered = [r for r in live if r["type"] != "negative" and r["gold_rank"] is not None and r["gold_rank"] <= 5]
    best: float | None = None
    for t in sorted({r[signal] for r in live}):
        lost: dict[str, int] = {}
        for r in answered:
            if r[signal] < t:
                lost[r["dataset"]] = lost.get(r["dataset"], 0) + 1
        if five and lost.get("fivequestions", 0) > 0:
            break
        if any(v > budget for k, v in lost.items() if k != "fivequestions"):
            break
        best = t
    rejected: dict[str, int] = {}
    if best is not None:
        for r in live:
            if r["type"] == "negative" and r[signal] < best:
                rejected[r["dataset"]] = rejected.get(r["dataset"], 0) + 1
    return best, rejected


def conditional(rows: list[dict[str, Any]], names: list[str], thresholds: list[float], base: float,
                max_results: int) -> list[str]:
    """As-configured figures when queries holding a word the index knows need ``t`` instead of ``base``.

    From the ranking hits (``minScore`` 0), cut at the threshold and ``max_results``, as
    ``bench/recall_bench.py --thresholds`` does; scored by :func:`symi_memory.evaluation.score_run`.
    """
    from symi_memory.evaluation import load_queries, score_run

    lines = []
    for t in [base, *thresholds]:
        cells = []
        for name in names:
            queries = load_queries(DATASETS / name / "queries.jsonl")
            run = {r["id"]: [h for h in r["hits"] if h["score"] >= (t if r["knows_a_word"] else base)][:max_results]
                   for r in rows if r["dataset"] == name}
            res = score_run(queries, run)
            o, pt = res["overall"], res["per_type"]
            neg = pt.get("negative", {})
            para = pt.get("paraphrase", {}).get("hit@5")
            cells.append(f"{name} hit@5 {o['hit@5']:.3f} para@5 {'-' if para is None else f'{para:.3f}'} "
                         f"pos empty {o.get('positive_empty') or 0:.3f} "
                         f"neg empty {neg.get('negative_empty_count', 0)}/{neg.get('negative', 0)}")
        lines.append(f"known-word threshold {t:.3f}: " + "; ".join(cells))
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="devmem,convmem,fivequestions")
    ap.add_argument("--model", default=None, help="local.model (default: the provider's default, all-MiniLM-L6-v2)")
    ap.add_argument("--budget", type=int, default=2, help="answerable queries a rule may empty per dev set")
    ap.add_argument("--conditional", default="0.035,0.04,0.045,0.05",
                    help="thresholds for queries holding a word the index knows (others keep minScore)")
    ap.add_argument("--json-out", type=Path, default=None)
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    names = args.datasets.split(",")
    for name in names:
        rows += features(DATASETS / name, args.model)
        print(f"{name}: indexed and searched", file=sys.stderr)
    _logistic(rows)
    negatives = {name: sum(1 for r in rows if r["dataset"] == name and r["type"] == "negative") for name in names}
    print(f"| signal | AUC {' | AUC '.join(n for n in names if n != 'fivequestions')} | negatives emptied "
          f"(<= {args.budget} answerable lost per set, none of fivequestions) | (fivequestions unconstrained) |")
    print("|---" * (3 + len([n for n in names if n != "fivequestions"])) + "|")
    for signal in (*SIGNALS, "logistic"):
        aucs = []
        for name in names:
            if name == "fivequestions":
                continue
            pos = [r[signal] for r in rows if r["dataset"] == name and r["type"] != "negative" and not r["empty"]
                   and r.get(signal) is not None and r["gold_rank"] is not None and r["gold_rank"] <= 5]
            neg = [r[signal] for r in rows if r["dataset"] == name and r["type"] == "negative" and not r["empty"]
                   and r.get(signal) is not None]
            auc = _auc(pos, neg)
            aucs.append("-" if auc is None else f"{auc:.3f}")
        cells = []
        for five in (True, False):
            _, rej = tradeoff(rows, signal, args.budget, five)
            cells.append(", ".join(f"{n} {rej.get(n, 0)}/{negatives[n]}" for n in names if n != "fivequestions"))
        print(f"| {signal} | {' | '.join(aucs)} | {cells[0]} | {cells[1]} |")
    if args.conditional:
        from symi_memory import load_config

        q = load_config(None).agent("main").memory_search["query"]
        print()
        print("\n".join(conditional(rows, names, [float(x) for x in args.conditional.split(",")],
                                    float(q["minScore"]), int(q["maxResults"]))))
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
