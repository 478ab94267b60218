"""Fourth ranking round of issue 10: levers not measured before, offline on devmem and convmem together.

Same method as ``bench/rank_levers2.py --narrow`` (whose cached dumps it reads
with ``--cache DIR``): every chunk of every query is scored once per lever,
starting from the built default (log-odds fusion 0.45/0.55, unit weight 0.7,
local synonyms of unknown query words, theta 0.45, gamma 0.8, top 5), and the
as-configured figures (top 6, ``minScore`` 0.015) of both sets are printed:
hit@1 / hit@5 / paraphrase hit@5 / MRR@10. Levers:

* **BM25 parameters** ``k1`` and ``b`` of the keyword evidence, with the
  keyword calibration refitted on the top-20 pool of both sets (else the
  fusion balance moves with them);
* **term proximity inside a line**: the IDF share of the query's terms that
  one line of the chunk holds together (two terms or more), added to the
  evidence times ``lam``;
* **soft-max over lines** on the vector side: the best line's cosine plus
  ``beta`` times the second best's excess over the chunk's cosine, or a
  log-sum-exp over the lines at temperature ``tau`` (vector calibration refitted);
* **keyword pseudo-relevance feedback**: the ``n`` terms with the highest
  tf-idf in the top ``m`` chunks by vector score join the query at ``alpha`` x
  their IDF;
* **unknown words out of the keyword normalisation**: a query word no chunk
  holds (and no stand-in replaces) no longer lowers every chunk's evidence,
  so the keyword side keeps its weight for the words it can judge;
* **the person as a filter**: a chunk lacking every name of the query (a
  capitalised word after the first, held by the index) has its fused log-odds
  lowered by ``delta``;
* **month cues**: a query naming a month favours dated notes (``YYYY-MM-DD``
  in the file name) of that month by ``delta`` in log-odds (inside the fusion,
  and after it as the built ``month-cue`` post-processor does);
* **answer type**: a "how much / how many" question favours chunks whose best
  line holds a number, a "when" question one whose best line holds a date or
  time;
* **other languages' function words** (German, Dutch, Spanish, French) left
  out of the query like English stop words;
* **weights that adapt to the query**: the vector weight moves with the IDF
  share of the query's words that no chunk holds, or with the number of its
  content terms.

    python bench/rank_levers2.py --narrow --built-only --thetas 0.45 --cache DIR   # makes the dumps once
    python bench/rank_levers3.py --cache DIR [--datasets devmem,convmem] [--only month,combo]
"""

from __future__ import annotations

import argparse
import pickle
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import rank_levers as rl  # noqa: E402
import rank_levers2 as rl2  # noqa: E402
from calibration_fit import fit_logistic  # noqa: E402

from symi_memory.chronology import file_date  # noqa: E402
from symi_memory.fusion import FUSION_CALIBRATION as FUSION  # noqa: E402

MONTHS = "january february march april may june july august september october november december".split()


class Side:
    """One dataset's pieces: the dump, its keyword tables, the built synonyms and per-line term sets."""

    def __init__(self, d: dict[str, Any], name: str, words: dict[str, Any]) -> None:
        from symi_memory.chunking import CHARS_PER_TOKEN
        from symi_memory.index import analysis

        self.d, self.name = d, name
        self.kw = rl2.Keywords(d, name, CHARS_PER_TOKEN * 400)
        self.syn = [self.kw.synonyms(i, words, 0.45, 5, True) for i in range(len(d["qs"]))]
        self.line_terms = [[set(analysis.term_counts(ln)) for ln in c["text"].split("\n")] for c in d["chunks"]]
        self.cos_lines = d["Q"]["question"] @ d["units"]["lines"]["vec"].T
        self.cc = d["Q"]["question"] @ d["C"].T
        self.months, self.years = [], []
        for c in d["chunks"]:
            stamp = file_date(c["path"])
            day = datetime.fromtimestamp(stamp, tz=UTC) if stamp is not None else None
            self.months.append(day.month if day else 0)
            self.years.append(day.year if day else 0)

    def evidence(self, i: int, k1: float = 1.2, b: float = 0.75, extra: dict[str, float] | None = None,
                 drop_unknown: bool = False) -> np.ndarray:
        weights = self.kw.weights(i)
        syn = self.syn[i]
        if drop_unknown:
            weights = {t: w for t, w in weights.items() if self.kw.df.get(t, 0) > 0 or syn.get(t)}
        total = sum(weights.values())
        if extra:
            weights = dict(weights, **extra)
            total += sum(extra.values())
        ev = np.zeros(self.kw.n)
        if total <= 0:
            return ev
        for ci, tc in enumerate(self.kw.counts):
            norm = k1 * (1 - b + b * self.kw.lens[ci])
            score = 0.0
            for t, w in weights.items():
                tf = tc.get(t, 0)
                best = tf * (k1 + 1) / (tf + norm) if tf else 0.0
                for s, sim in syn.get(t, ()):
                    if tc.get(s):
                        best = max(best, 0.8 * sim * tc[s] * (k1 + 1) / (tc[s] + norm))
                score += w * best
            ev[ci] = score / total
        return ev

    def proximity(self, i: int) -> np.ndarray:
        weights = self.kw.weights(i)
        total = sum(weights.values())
        out = np.zeros(self.kw.n)
        if total <= 0 or len(weights) < 2:
            return out
        for ci, lines in enumerate(self.line_terms):
            best = 0.0
            for ts in lines:
                held = [w for t, w in weights.items() if t in ts]
                if len(held) >= 2:
                    best = max(best, sum(held) / total)
            out[ci] = best
        return out

    def vector_cos(self, beta: float = 0.0, tau: float | None = None, unit_w: float = rl.UNIT_W) -> np.ndarray:
        d = self.d
        nq, nc = self.cc.shape
        chunk_of = d["units"]["lines"]["chunk"]
        best = np.full((nq, nc), -1.0)
        second = np.full((nq, nc), -1.0)
        lse = np.zeros((nq, nc))
        for j, c in enumerate(chunk_of):
            x = self.cos_lines[:, j]
            second[:, c] = np.maximum(second[:, c], np.minimum(best[:, c], x))
            best[:, c] = np.maximum(best[:, c], x)
            if tau is not None:
                lse[:, c] += np.exp(x / tau)
        agg = best
        if tau is not None:
            has = lse > 0
            agg = np.where(has, tau * np.log(np.where(has, lse, 1.0)), best)
        elif beta:
            agg = best + beta * np.maximum(0.0, second - self.cc)
        return (1 - unit_w) * self.cc + unit_w * np.maximum(self.cc, agg)


def fused(p: np.ndarray, evs: list[np.ndarray], kcal: tuple[float, float] | None = None,
          bias: list[np.ndarray] | None = None, vw: float = rl2.VW, post: list[np.ndarray] | None = None) -> rl2.Scorer:
    """The default fusion; ``bias`` is added to the fused log-odds (before the rules for chunks holding no query
    word or every one), ``post`` to the log-odds of the final score (what a post-processor does)."""
    from symi_memory.index.analysis import EXACT_KEYWORD_FLOOR, KEYWORD_CALIBRATION

    slope, mid = kcal or KEYWORD_CALIBRATION

    def fn(i: int, qq: dict[str, Any]) -> np.ndarray:
        ev = evs[i]
        pt = np.where(ev > 0, rl.sig(ev, slope, mid), 0.0)
        pt = np.where(qq["exact"], np.maximum(pt, EXACT_KEYWORD_FLOOR), pt)
        pv = p[i]
        if qq["has_ident"]:
            s = 0.3 * pv + 0.7 * pt
        else:
            z = FUSION[0] * (vw * rl2.logit(pv) + (1 - vw) * slope * (np.maximum(ev, 0) - mid)) + FUSION[1]
            if bias is not None:
                z = z + bias[i]
            s = 1 / (1 + np.exp(-z))
            s = np.where(ev > 0, s, vw * pv)
        s = np.where(qq["exact"], np.maximum(s, pt), s)
        if post is not None:
            x = np.clip(s, 1e-12, 1 - 1e-12)
            s = np.where(s > 0, 1 / (1 + np.exp(-(np.log(x / (1 - x)) + post[i]))), s)
        return s
    return fn


def refit_keyword(sides: list[Side], evss: list[list[np.ndarray]]) -> tuple[float, float]:
    xs, ys = [], []
    for s, evs in zip(sides, evss, strict=True):
        for i, qq in enumerate(s.d["qs"]):
            idx = np.argsort(-evs[i])[:20]
            idx = idx[evs[i][idx] > 0]
            xs.append(evs[i][idx])
            ys.append(qq["label"][idx])
    return fit_logistic(np.concatenate(xs).astype(float), np.concatenate(ys).astype(float))


def names_of(query: str, df: dict[str, int]) -> set[str]:
    from symi_memory.index import analysis

    toks = query.split()
    out = set()
    for w in toks[1:]:
        w = w.strip("?,.!:;\"()").removesuffix("'s").removesuffix("’s")
        if w[:1].isupper() and w.isalpha() and w.lower() not in analysis.STOP_WORDS and w.lower() not in MONTHS:
            t = analysis.stem(w)
            if df.get(t, 0) > 0:
                out.add(t)
    return out


def month_bias(s: Side, qq: dict[str, Any], delta: float) -> np.ndarray:
    """+delta for the dated notes of a month the query names (the product's rule, ``monthcue.months_named``)."""
    from symi_memory_postprocess.monthcue import months_named

    named = months_named(qq["q"]["query"])
    if not named or not delta or qq["has_ident"]:
        return np.zeros(s.kw.n)
    return np.array([delta if any(m == month and y in (None, yr) for month, y in named) else 0.0
                     for m, yr in zip(s.months, s.years, strict=True)])


NUM_Q = re.compile(r"^\s*(how (much|many|long|far|old|heavy|often)|what (amount|share|percentage))\b", re.I)
DATE_Q = re.compile(r"^\s*(when|what (time|date|day))\b", re.I)
NUM_L = re.compile(r"\d")
DATE_L = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}|\b\d{2}-\d{2}\b|\b(mon|tues|wednes|thurs|fri|satur|sun)day\b|\b("
                    + "|".join(MONTHS) + r")\b", re.I)


def answer_type_bias(s: Side, i: int, qq: dict[str, Any], delta: float) -> np.ndarray:
    """+delta for a chunk whose best line (by the query's cosine) holds what the question asks for: a number for
    "how much / many / long ...", a date or time for "when / what time ..."."""
    q = qq["q"]["query"]
    pat = NUM_L if NUM_Q.search(q) else DATE_L if DATE_Q.search(q) else None
    out = np.zeros(s.kw.n)
    if pat is None or not delta:
        return out
    u = s.d["units"]["lines"]
    cos = s.cos_lines[i]
    best: dict[int, int] = {}
    for j, c in enumerate(u["chunk"]):
        if c not in best or cos[j] > cos[best[c]]:
            best[c] = j
    texts = rl2._line_texts(s.d)
    for c, j in best.items():
        if pat.search(texts[j]):
            out[c] = delta
    return out


FOREIGN_FUNCTION_WORDS = frozenset("""
der das dem den des ein eine einer einem einen und oder ist sind wurde wurden hat hatte haben wie wann wer wo was warum
welche welcher welches von zu zum zur mit auf aus bei nach für über unter vor nicht auch noch sich sie er es ich du wir
ihr ihre sein seine im ins am vom
het een en of zijn werd wordt heeft had hoe wanneer wie waar wat waarom welke voor met op uit bij naar niet ook nog zich
ze hij ik jij wij jullie haar hun mijn je te ter
el la los las un una unos unas y o es son fue era ha han había cómo cuándo quién quiénes dónde qué por para con sin
sobre entre se su sus mi tu del al lo le les mientras está están
le les une et ou est sont était été avait comment quand qui où quoi pourquoi quel quelle pour avec sans sur dans du au
aux ce cette ces il elle ils elles nous vous leur
""".split())


def person_bias(s: Side, qq: dict[str, Any], delta: float) -> np.ndarray:
    """-delta for the chunks holding none of the query's names (a capitalised word after the first)."""
    people = names_of(qq["q"]["query"], s.kw.df)
    if not people or not delta:
        return np.zeros(s.kw.n)
    held = np.array([any(t in tc for t in people) for tc in s.kw.counts])
    return np.where(held, 0.0, -delta)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="devmem,convmem")
    ap.add_argument("--cache", type=Path, required=True, help="the dumps of bench/rank_levers2.py --cache")
    ap.add_argument("--only", default="", help="comma-separated lever groups: bm25,prox,lines,prf,unknown,person,month,atype,stopml,adapt,combo")
    args = ap.parse_args()
    names = args.datasets.split(",")
    only = {x for x in args.only.split(",") if x}

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
    sides = [Side(d, n, w) for d, n, w in zip(data, names, words, strict=True)]
    base_cos = [s.vector_cos() for s in sides]
    p_base = [rl.sig(np.clip(c, 0, 1), *rl.VCAL) for c in base_cos]
    ev_base = [[s.evidence(i) for i in range(len(s.d["qs"]))] for s in sides]

    print("| lever | " + " | ".join(f"{n} hit@1 / hit@5 / paraphrase hit@5 / MRR@10" for n in names) + " |")
    print("|---|" + "---|" * len(names))

    def row(name: str, ps: list[np.ndarray], evss: list[list[np.ndarray]], kcal: tuple[float, float] | None = None,
            biases: list[list[np.ndarray]] | None = None, post: list[list[np.ndarray]] | None = None) -> None:
        cells = []
        for k, s in enumerate(sides):
            evs = evss[k]
            fn = fused(ps[k], evs, kcal, biases[k] if biases else None, post=post[k] if post else None)
            cells.append(rl2.evaluate(s.d, fn, lambda i, qq, e=evs: e[i], mrr=True)[:4])
        print(f"| {name} | " + " | ".join(" / ".join(f"{x:.3f}" for x in c) for c in cells) + " |", flush=True)

    row("default (built: log-odds 0.45/0.55, local synonyms)", p_base, ev_base)

    if not only or "bm25" in only:
        for k1 in (0.6, 0.9, 1.2, 1.6, 2.0):
            for b in (0.3, 0.5, 0.75, 0.9):
                evs = [[s.evidence(i, k1, b) for i in range(len(s.d["qs"]))] for s in sides]
                kcal = refit_keyword(sides, evs)
                row(f"BM25 k1 {k1}, b {b} (keyword calibration refitted {kcal[0]:.2f}, {kcal[1]:.3f})",
                    p_base, evs, kcal)

    if not only or "prox" in only:
        prox = [[s.proximity(i) for i in range(len(s.d["qs"]))] for s in sides]
        for lam in (0.1, 0.2, 0.3, 0.5):
            evs = [[e + lam * x * (e > 0) for e, x in zip(eb, pr, strict=True)] for eb, pr in zip(ev_base, prox, strict=True)]
            row(f"proximity: evidence + {lam} x IDF share held by one line", p_base, evs)

    if not only or "lines" in only:
        for beta in (0.1, 0.2, 0.3):
            cos = [s.vector_cos(beta=beta) for s in sides]
            cal = rl.refit(data, cos)
            row(f"vector: best line + {beta} x second line's excess (calibration {cal[0]:.1f}, {cal[1]:.3f})",
                [rl.sig(np.clip(c, 0, 1), *cal) for c in cos], ev_base)
        for tau in (0.01, 0.02, 0.05):
            cos = [s.vector_cos(tau=tau) for s in sides]
            cal = rl.refit(data, cos)
            row(f"vector: log-sum-exp over lines, tau {tau} (calibration {cal[0]:.1f}, {cal[1]:.3f})",
                [rl.sig(np.clip(c, 0, 1), *cal) for c in cos], ev_base)

    if not only or "prf" in only:
        from symi_memory.index import analysis

        for m, n, alpha in ((3, 3, 0.3), (3, 5, 0.3), (2, 3, 0.5), (5, 5, 0.2)):
            evss = []
            for s, cos in zip(sides, base_cos, strict=True):
                evs = []
                for i in range(len(s.d["qs"])):
                    weights = s.kw.weights(i)
                    if not weights or s.d["qs"][i]["has_ident"]:
                        evs.append(ev_base[sides.index(s)][i])
                        continue
                    top = np.argsort(-cos[i])[:m]
                    score: dict[str, float] = {}
                    for ci in top:
                        for t, tf in s.kw.counts[ci].items():
                            if t in weights or t in analysis.STOP_WORDS or not t.isalpha():
                                continue
                            score[t] = score.get(t, 0.0) + tf * analysis.idf(s.kw.df.get(t, 0), s.kw.n)
                    picks = sorted(score, key=lambda t: -score[t])[:n]
                    extra = {t: alpha * analysis.idf(s.kw.df[t], s.kw.n) for t in picks}
                    evs.append(s.evidence(i, extra=extra))
                evss.append(evs)
            row(f"keyword PRF: {n} terms of the top {m} vector hits at {alpha} x IDF", p_base, evss)

    if not only or "unknown" in only:
        evs = [[s.evidence(i, drop_unknown=True) for i in range(len(s.d["qs"]))] for s in sides]
        row("unknown words (no stand-in) out of the keyword normalisation", p_base, evs)
        kcal = refit_keyword(sides, evs)
        row(f"the same, keyword calibration refitted ({kcal[0]:.2f}, {kcal[1]:.3f})", p_base, evs, kcal)

    if not only or "person" in only:
        for delta in (0.5, 1.0, 2.0):
            row(f"person as a filter: chunks lacking every name of the query -{delta} log-odds", p_base, ev_base,
                biases=[[person_bias(s, qq, delta) for qq in s.d["qs"]] for s in sides])

    if not only or "month" in only:
        for delta in (0.3, 0.6, 1.0):
            row(f"month cue: dated notes of a month the query names +{delta} log-odds", p_base, ev_base,
                biases=[[month_bias(s, qq, delta) for qq in s.d["qs"]] for s in sides])
        for delta in (0.2, 0.3, 0.4, 0.5, 0.7):
            row(f"month cue after fusion (the built post-processor), +{delta} log-odds of the final score", p_base,
                ev_base, post=[[month_bias(s, qq, delta) for qq in s.d["qs"]] for s in sides])

    if not only or "atype" in only:
        for delta in (0.2, 0.4, 0.7):
            row(f"answer type: best line holds a number (how much/many) or a date (when) +{delta}, with the month cue",
                p_base, ev_base, post=[[answer_type_bias(s, i, qq, delta) + month_bias(s, qq, 0.4)
                                        for i, qq in enumerate(s.d["qs"])] for s in sides])

    if not only or "stopml" in only:
        from symi_memory.index import analysis

        old = analysis.STOP_WORDS
        analysis.STOP_WORDS = frozenset(old | FOREIGN_FUNCTION_WORDS)  # what QueryAnalysis leaves out
        try:
            cells = []
            for s in [Side(d, n, w) for d, n, w in zip(data, names, words, strict=True)]:
                qs = []
                for i, qq in enumerate(s.d["qs"]):
                    terms = s.kw.analyses[i].terms
                    every = np.array([bool(terms) and all(t in tc for t in terms) for tc in s.kw.counts])
                    qs.append(dict(qq, exact=qq["ident"] | every, terms=terms or qq["terms"]))
                evs = [s.evidence(i) for i in range(len(qs))]
                fn = fused(rl.sig(np.clip(s.vector_cos(), 0, 1), *rl.VCAL), evs,
                           post=[month_bias(s, qq, 0.4) for qq in qs])
                cells.append(rl2.evaluate(dict(s.d, qs=qs), fn, lambda i, qq, e=evs: e[i], mrr=True)[:4])
        finally:
            analysis.STOP_WORDS = old
        print(f"| German, Dutch, Spanish and French function words ({len(FOREIGN_FUNCTION_WORDS)}) as stop words, "
              "with the month cue | " + " | ".join(" / ".join(f"{x:.3f}" for x in c) for c in cells) + " |", flush=True)

    if not only or "adapt" in only:
        def feature(s: Side, i: int, kind: str) -> float:
            w = s.kw.weights(i)
            if kind == "unknown":  # the share of the query's IDF that no chunk holds, around 0.2
                return sum(v for t, v in w.items() if s.kw.df.get(t, 0) == 0) / (sum(w.values()) or 1.0) - 0.2
            return min(len(w), 10) / 10 - 0.5  # the number of content terms, around 5
        for kind in ("unknown", "nterms"):
            for a in (-0.2, -0.1, 0.1, 0.2):
                cells = []
                for s, p, evs in zip(sides, p_base, ev_base, strict=True):
                    post = [month_bias(s, qq, 0.4) for qq in s.d["qs"]]
                    fns = [fused(p, evs, post=post,
                                 vw=float(np.clip(rl2.VW + a * feature(s, i, kind), 0.1, 0.9)))
                           for i in range(len(s.d["qs"]))]
                    cells.append(rl2.evaluate(s.d, lambda i, qq, fns=fns: fns[i](i, qq),
                                              lambda i, qq, e=evs: e[i], mrr=True)[:4])
                what = "unknown words' IDF share" if kind == "unknown" else "number of content terms"
                print(f"| vector weight 0.45 {a:+} x ({what} - its middle), with the month cue | "
                      + " | ".join(" / ".join(f"{x:.3f}" for x in c) for c in cells) + " |", flush=True)

    if not only or "combo" in only:
        for beta, dm, dp in ((0.3, 0.3, 0.5), (0.3, 0.3, 0.0), (0.3, 0.0, 0.5), (0.0, 0.3, 0.5), (0.2, 0.3, 0.5),
                             (0.3, 0.6, 0.5), (0.3, 0.3, 1.0)):
            cos = [s.vector_cos(beta=beta) for s in sides]
            cal = rl.refit(data, cos) if beta else rl.VCAL
            row(f"second line {beta}, month cue +{dm}, person -{dp}",
                [rl.sig(np.clip(c, 0, 1), *cal) for c in cos], ev_base,
                biases=[[month_bias(s, qq, dm) + person_bias(s, qq, dp) for qq in s.d["qs"]] for s in sides])
    return 0


if __name__ == "__main__":
    sys.exit(main())
