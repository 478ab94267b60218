"""Sixth ranking round of issue 10: the stand-ins of local synonyms, offline on devmem and convmem together.

Same method as ``bench/rank_levers4.py`` (it reads ``bench/rank_levers2.py``'s
cached dumps with ``--cache DIR``): every chunk of every query is scored once
per lever, starting from the built default (log-odds fusion 0.45/0.55, unit
weight 0.7, local synonyms of unknown query words, month cue +0.4 after
fusion, ties at the exact-match floor ordered by the fused score before it),
and the as-configured figures (top 6, ``minScore`` 0.015) of both sets are
printed: hit@1 / hit@5 / paraphrase hit@5 / MRR@10. With ``--per-query`` each
lever also lists the questions whose gold rank (in the top 6) changed against
the default. Levers:

* **rare known words expanded too** (``rare``): a query word the index
  holds in at most ``max_df`` chunks (not a name, not a calendar word) gets
  stand-ins as an unknown word does ("special" and "stall" are held once,
  "redeploy" and "tutor" twice), at their own least cosine and weight
  (``theta_known``, ``gamma_known``); the word itself still counts in full
  where it is held. The second round expanded every word and lost convmem
  hit@1 through siblings of common words (May and June); a rare word is one
  whose own matches say little;
* **stand-ins that fit the question** (``context``): a stand-in word is
  kept only if its cosine with the whole question's embedding is at least
  ``c`` (the question says which sense of a word is meant: "words" in
  "Japanese measure words" is not "keyword"), or its weight is scaled by
  that cosine against the original word's;
* **a stand-in at its own IDF** (``idf``): a stand-in counts at most its
  own IDF, not the unknown word's (which, held by no chunk, has the largest
  IDF of the query), optionally with the unknown word weighing its best
  stand-in's IDF in the normalisation;
* **a unit weight for long chunks** (``units``): chunks of more than ``cut``
  lines take their best line at ``w_long`` instead of 0.7 (their chunk
  vector is a mean of many topics), vector calibration refitted.

    python bench/rank_levers2.py --narrow --built-only --thetas 0.45 --cache DIR   # makes the dumps once
    python bench/rank_levers5.py --cache DIR [--datasets devmem,convmem] [--only rare,context,idf,units] [--per-query]
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rank_levers as rl  # noqa: E402
import rank_levers2 as rl2  # noqa: E402
import rank_levers3 as rl3  # noqa: E402
import rank_levers4 as rl4  # noqa: E402

Syn = dict[str, list[tuple[str, float]]]


def synonyms(s: rl3.Side, wv: dict[str, Any], i: int, *, theta: float = 0.45, top: int = 5, max_df: int = 0,
             ctx: float | None = None, ctx_scale: bool = False, gamma_known: float = 0.8,
             theta_known: float | None = None) -> Syn:
    """The built stand-ins of query ``i`` (unknown words, theta, top 5), with the levers above."""
    from symi_memory.index import analysis

    kw = s.kw
    weights = kw.weights(i)
    out: Syn = {t: [] for t in weights}
    vocab = wv["V"][wv["vocab"]]
    qv = s.d["Q"]["question"][i]
    qv = qv / max(float(np.linalg.norm(qv)), 1e-9)
    toks = s.d["qs"][i]["q"]["query"].split()
    names = {analysis.stem(w.strip("?,.!").removesuffix("'s")) for w in toks[1:] if w[:1].isupper()}
    calendar = {analysis.stem(x) for x in rl2.CALENDAR}
    for word in kw.analyses[i].words:
        t = analysis.stem(word)
        j = wv["index"].get(word.lower())
        if t not in out or j is None:
            continue
        df = kw.df.get(t, 0)
        if df > 0 and (df > max_df or t in names or t in calendar or word[:1].isupper()):
            continue
        sims = vocab @ wv["V"][j]
        own_q = float(wv["V"][j] @ qv)
        for k in np.argsort(-sims)[:top * 4]:
            if sims[k] < (theta if df == 0 or theta_known is None else theta_known) or len(out[t]) >= top:
                break
            st = wv["stems"][wv["vocab"][k]]
            if st == t or st in weights or st in analysis.STOP_WORDS or any(st == x for x, _ in out[t]):
                continue
            if df > 0 and st in calendar:
                continue
            sim = float(sims[k])
            if ctx is not None:
                cq = float(vocab[k] @ qv)
                if ctx_scale:
                    sim *= min(1.0, max(0.0, cq) / max(own_q, 1e-6))
                elif cq < ctx:
                    continue
            out[t].append((st, sim if df == 0 else sim * gamma_known / 0.8))
    return out


def evidence(s: rl3.Side, i: int, syn: Syn, own_idf: int = 0) -> np.ndarray:
    """The keyword evidence of query ``i`` with these stand-ins (as ``rank_levers3.Side.evidence``).

    ``own_idf`` 1: a stand-in counts at most its own IDF (x min(1, its IDF / the word's)); 2: the same, and
    an expanded word weighs its best stand-in's IDF in the normalisation, not its own."""
    from symi_memory.index import analysis

    k1, b = 1.2, 0.75
    weights = s.kw.weights(i)
    factor: dict[tuple[str, str], float] = {}
    if own_idf:
        for t, ps in syn.items():
            for st, _ in ps:
                factor[(t, st)] = min(1.0, analysis.idf(s.kw.df.get(st, 0), s.kw.n) / max(weights[t], 1e-9))
            if own_idf == 2 and ps:
                weights = dict(weights, **{t: weights[t] * max(factor[(t, st)] for st, _ in ps)})
    total = sum(weights.values())
    ev = np.zeros(s.kw.n)
    if total <= 0:
        return ev
    for ci, tc in enumerate(s.kw.counts):
        norm = k1 * (1 - b + b * s.kw.lens[ci])
        score = 0.0
        for t, w in weights.items():
            tf = tc.get(t, 0)
            best = tf * (k1 + 1) / (tf + norm) if tf else 0.0
            for st, sim in syn.get(t, ()):
                if tc.get(st):
                    f = 1.0 if own_idf != 1 else factor[(t, st)]
                    if own_idf == 2:
                        f = factor[(t, st)] / max(factor[(t, x)] for x, _ in syn[t])
                    best = max(best, f * 0.8 * sim * tc[st] * (k1 + 1) / (tc[st] + norm))
            score += w * best
        ev[ci] = score / total
    return ev


def ranks(s: rl3.Side, keys: Callable[[int, dict[str, Any]], tuple[np.ndarray, ...]]
          ) -> tuple[tuple[float, ...], dict[str, int | None]]:
    """The figures of ``rank_levers4.evaluate`` and each answerable question's gold rank in the top 6."""
    from symi_memory.evaluation import _overlaps

    figures = rl4.evaluate(s, keys)
    d = s.d
    out: dict[str, int | None] = {}
    for i, qq in enumerate(d["qs"]):
        gold = qq["q"].get("gold")
        if not gold or not qq["terms"]:
            continue
        k = keys(i, qq)
        order = np.lexsort(tuple(-x for x in reversed(k)))
        top = [j for j in order[:6] if k[0][j] >= rl2.MIN_SCORE]
        out[qq["q"]["id"]] = next((r for r, j in enumerate(top, 1)
                                   if any(_overlaps({"path": d["chunks"][j]["path"], "start": d["chunks"][j]["start"],
                                                     "end": d["chunks"][j]["end"]}, g) for g in gold)), None)
    return figures, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="devmem,convmem")
    ap.add_argument("--cache", type=Path, required=True, help="the dumps of bench/rank_levers2.py --cache")
    ap.add_argument("--per-query", action="store_true", help="list the questions whose gold rank changed")
    ap.add_argument("--only", default="", help="some of rare,context,idf,units (default: all)")
    args = ap.parse_args()
    names = args.datasets.split(",")

    def cached(key: str) -> Any:
        return pickle.loads((args.cache / f"{key}.pkl").read_bytes())

    data = [cached(n) for n in names]
    words = [cached(f"{n}-words") for n in names]
    sides = [rl3.Side(d, n, w) for d, n, w in zip(data, names, words, strict=True)]
    p_base = [rl.sig(np.clip(s.vector_cos(), 0, 1), *rl.VCAL) for s in sides]

    print("| lever | " + " | ".join(f"{n} hit@1 / hit@5 / paraphrase hit@5 / MRR@10" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    base: list[dict[str, int | None]] = []

    def row(name: str, own_idf: int = 0, p_of: list[np.ndarray] | None = None, **kw: Any) -> None:
        cells = []
        for k, s in enumerate(sides):
            pk = (p_of or p_base)[k]
            evs = [evidence(s, i, synonyms(s, words[k], i, **kw), own_idf) for i in range(len(s.d["qs"]))]
            fig, rk = ranks(s, lambda i, qq, s=s, pk=pk, evs=evs: (*rl4.scores(s, pk, evs, i, qq), evs[i]))
            cells.append((fig, rk))
        print(f"| {name} | " + " | ".join(" / ".join(f"{x:.3f}" for x in c[0][:4]) for c in cells) + " |", flush=True)
        if not base:
            base.extend(c[1] for c in cells)
        elif args.per_query:
            for (_, rk), b in zip(cells, base, strict=True):
                moved = [f"{q} {b[q] or '-'}->{r or '-'}" for q, r in rk.items() if r != b[q]]
                if moved:
                    print("    " + ", ".join(moved))

    only = set(args.only.split(",")) if args.only else {"rare", "context", "idf", "units"}
    row("default (built)")
    if "rare" in only:
        for max_df in (1, 2, 3):
            for theta in (0.45, 0.55, 0.65):
                for g in (0.3, 0.5, 0.8):
                    row(f"rare known words (held by <= {max_df} chunks) expanded at theta {theta}, "
                        f"their stand-ins at gamma {g}", max_df=max_df, theta_known=theta, gamma_known=g)
    if "context" in only:
        for c in (0.15, 0.2, 0.25, 0.3):
            row(f"stand-ins kept only if their cosine with the question is >= {c}", ctx=c)
        row("stand-in weight x min(1, its cosine with the question / the word's)", ctx=0.0, ctx_scale=True)
        for max_df in (1, 2):
            row(f"rare known words (<= {max_df}) expanded at theta 0.45, gamma 0.8, stand-ins kept if their "
                "cosine with the question >= 0.2", max_df=max_df, ctx=0.2)
    if "idf" in only:
        row("a stand-in counts at most its own IDF", own_idf=1)
        row("a stand-in counts at most its own IDF, and the word weighs its best stand-in's IDF", own_idf=2)
    if "units" in only:
        lines = [np.maximum(np.bincount(s.d["units"]["lines"]["chunk"], minlength=len(s.d["chunks"])), 1)
                 for s in sides]
        for cut in (8, 12, 16):
            for w_long in (0.8, 0.9):
                coss = []
                for s, n in zip(sides, lines, strict=True):
                    best = np.full(s.cc.shape, -1.0)
                    for j, c in enumerate(s.d["units"]["lines"]["chunk"]):
                        best[:, c] = np.maximum(best[:, c], s.cos_lines[:, j])
                    w = np.where(n > cut, w_long, rl.UNIT_W)[None, :]
                    coss.append((1 - w) * s.cc + w * np.maximum(s.cc, best))
                cal = rl.refit(data, coss)
                row(f"unit weight {w_long} for chunks of more than {cut} lines (0.7 below; calibration refitted "
                    f"{cal[0]:.1f}, {cal[1]:.3f})", p_of=[rl.sig(np.clip(c, 0, 1), *cal) for c in coss])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
