"""Fit the score calibrations on the dev sets and try fusion settings offline (issue 10).

For every (query, chunk) pair of the datasets it records the cosine of the
local model, the keyword evidence (BM25 normalised by the query) and whether the chunk holds a
gold line. Then it

* fits the logistic ``P(relevant) = 1 / (1 + exp(-slope * (x - midpoint)))``
  for the cosine of each local model (the numbers declared in
  ``symi_memory_local.hooks.CALIBRATIONS``) and for the keyword evidence
  (``symi_memory.index.analysis.KEYWORD_CALIBRATION``);
* scores every chunk with the fused calibrated score for a grid of vector
  weights and ``minScore`` values and prints the as-configured figures
  (gold in the top 5, empty results on positive and negative queries);
* with ``--fusion 0.45`` fits the weighted fusion's ``(k, c)``
  (``symi_memory.fusion.FUSION_CALIBRATION``): ``P(relevant) = sigmoid(k *
  (w_v * vector log-odds + w_t * keyword log-odds) + c)`` for that vector
  weight, and prints the ranking figures of both ways of fusing (the old
  probability mix ``w_v * p_v + w_t * p_t`` and the log-odds sum) side by side.

The candidate pool here is every chunk (the real search only scores the top
keyword and vector candidates), so use ``bench/recall_bench.py`` to confirm.

    python bench/calibration_fit.py [--datasets devmem,convmem] [--models all-MiniLM-L6-v2,multilingual-e5-small]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / "bench" / "datasets"


def dump(dataset: Path, model: str, settings: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Per query: label, cosine, keyword evidence and identifier flag of every chunk.

    The cosine is the vector side's score: with unit vectors (``chunking.units``), the chunk's cosine
    blended with its best line's by ``store.vector.unitWeight``, as the search computes it.
    """
    from symi_memory import load_config
    from symi_memory.chunking import CHARS_PER_TOKEN
    from symi_memory.evaluation import _overlaps, _throwaway_config, load_queries
    from symi_memory.index import analysis
    from symi_memory.index.keyword import ExactMatcher, query_tokens
    from symi_memory.index.vectors import combined_cosines
    from symi_memory.manager import open_memory

    queries = load_queries(dataset / "queries.jsonl")
    out = []
    with tempfile.TemporaryDirectory(prefix="symi-calib-") as tmp:
        ms = {"provider": "local", "local": {"model": model}}
        for key, value in (settings or {}).items():
            node = ms
            *parents, leaf = key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        cfg = load_config(None, state_dir=tmp, overrides={"agents": {"defaults": {"memorySearch": ms}}})
        with open_memory(_throwaway_config(cfg, Path(tmp)), workspace=dataset / "workspace", start=False) as mem:
            mem.sync(reason="calibration")
            backend = mem._require()
            store, provider = backend.store, backend.choice.provider
            rows = store._read("SELECT c.rowid, c.path, c.start_line, c.end_line, c.text FROM chunks c "
                               "WHERE c.source = 'memory' AND c.vector IS NOT NULL ORDER BY c.rowid").fetchall()
            weight = float(mem.agent.memory_search["store"]["vector"].get("unitWeight", 0.0))
            chunk_terms = [analysis.term_counts(r[4]) for r in rows]
            n = len(rows)
            ref_len = CHARS_PER_TOKEN * int(mem.agent.memory_search["chunking"]["tokens"])
            df: dict[str, int] = {}
            for ts in chunk_terms:
                for t in ts:
                    df[t] = df.get(t, 0) + 1
            for q in queries:
                qv = provider.embed_query(q["query"])
                ids = [r[0] for r in rows]
                chunk_only = combined_cosines(store, qv, ids, 0.0)
                best = combined_cosines(store, qv, ids, 1.0)  # max(chunk, best unit)
                cos_chunk = np.array([chunk_only[r] for r in ids])
                cos_best = np.array([best[r] for r in ids])
                cos = (1 - weight) * cos_chunk + weight * cos_best
                qterms = analysis.query_terms(query_tokens(q["query"]))
                weights = {t: analysis.idf(df.get(t, 0), n) for t in qterms}
                cov = np.array([analysis.keyword_evidence(ts, len(r[4]) / ref_len, weights)
                                for ts, r in zip(chunk_terms, rows, strict=True)])
                matcher = ExactMatcher.for_query(q["query"])
                ident = np.array([matcher.classify(r[4])[1] for r in rows])
                every = np.array([bool(qterms) and all(t in ts for t in qterms) for ts in chunk_terms])
                hits = [{"path": r[1], "start": r[2], "end": r[3]} for r in rows]
                label = np.array([any(_overlaps(h, g) for g in q.get("gold", [])) for h in hits])
                out.append({"q": q, "cos": cos, "cos_chunk": cos_chunk, "cos_best": cos_best, "cov": cov, "ident": ident, "label": label, "hits": hits,
                            "nterms": len(qterms), "has_ident": bool(matcher.idents), "every": every})
    return out


POOL = 20


def pool(x: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Indices of the top POOL chunks by ``x`` among ``ok``: the candidates a search would score."""
    idx = np.argsort(-x)[:POOL]
    return idx[ok[idx]]


def fit_logistic(x: np.ndarray, y: np.ndarray, iters: int = 50) -> tuple[float, float]:
    """(slope, midpoint) of the maximum-likelihood logistic of y on x (Newton's method)."""
    a, b = 1.0, 0.0
    X = np.stack([x, np.ones_like(x)], axis=1)
    w = np.array([a, b], dtype=float)
    for _ in range(iters):
        p = 1 / (1 + np.exp(-(X @ w)))
        g = X.T @ (y - p)
        h = (X * (p * (1 - p))[:, None]).T @ X + 1e-6 * np.eye(2)
        w = w + np.linalg.solve(h, g)
    slope, icpt = float(w[0]), float(w[1])
    return slope, -icpt / slope


def sig(x: np.ndarray, slope: float, mid: float) -> np.ndarray:
    return 1 / (1 + np.exp(-slope * (x - mid)))


def simulate(data: list[dict[str, Any]], vcal: tuple[float, float], kcal: tuple[float, float], vw: float,
             min_score: float, max_results: int = 6) -> dict[str, Any]:
    from symi_memory.evaluation import score_run

    run = {}
    for d in data:
        pv = sig(np.maximum(d["cos"], 0), *vcal)
        pt = np.where(d["cov"] > 0, sig(d["cov"], *kcal), 0.0)
        s = vw * pv + (1 - vw) * pt
        s = np.where(d["ident"], np.maximum(s, pt), s)
        if d["nterms"] == 0:  # only stop words: the search returns nothing
            s = np.zeros_like(s) - 1.0
        order = np.argsort(-s)
        hits = [dict(d["hits"][i], score=float(s[i])) for i in order[:max_results] if s[i] >= min_score]
        run[d["q"]["id"]] = hits
    return score_run([d["q"] for d in data], run)


def _fused(d: dict[str, Any], vcal: tuple[float, float], kcal: tuple[float, float], vw: float,
           fusion: tuple[float, float] | None) -> np.ndarray:
    """The weighted fusion of one query's chunks: the probability mix (``fusion`` None) or the log-odds sum."""
    w = 1.0 - 0.7 if d["has_ident"] else vw  # an identifier query leans on keywords (fusion.IDENTIFIER_TEXT_SHARE)
    lv = vcal[0] * (np.clip(d["cos"], 0, 1) - vcal[1])
    lt = kcal[0] * (d["cov"] - kcal[1])
    pv, pt = 1 / (1 + np.exp(-lv)), np.where(d["cov"] > 0, 1 / (1 + np.exp(-lt)), 0.0)
    exact = d["ident"] | d["every"]
    pt_floor = np.where(exact, np.maximum(pt, 0.5), pt)
    if fusion is None:
        s = w * pv + (1 - w) * pt_floor
    else:
        s = 1 / (1 + np.exp(-(fusion[0] * (w * lv + (1 - w) * lt) + fusion[1])))
    return np.where(exact, np.maximum(s, pt_floor), s)


def fit_fusion(alld: list[dict[str, Any]], vcal: tuple[float, float], kcal: tuple[float, float],
               vw: float) -> tuple[float, float]:
    """``(k, c)`` of the log-odds fusion for vector weight ``vw``, on the top POOL chunks of the probability mix."""
    zs, ys = [], []
    for d in alld:
        w = 1.0 - 0.7 if d["has_ident"] else vw
        z = w * vcal[0] * (np.clip(d["cos"], 0, 1) - vcal[1]) + (1 - w) * kcal[0] * (d["cov"] - kcal[1])
        idx = np.argsort(-_fused(d, vcal, kcal, 0.7, None))[:POOL]
        zs.append(z[idx])
        ys.append(d["label"][idx])
    slope, mid = fit_logistic(np.concatenate(zs), np.concatenate(ys).astype(float))
    return slope, -slope * mid


def ranking(data: list[dict[str, Any]], scores: list[np.ndarray], max_results: int = 10) -> dict[str, Any]:
    """Ranking-view figures (no minScore) of these per-query scores; ties keep the higher keyword evidence first."""
    from symi_memory.evaluation import score_run

    run = {}
    for d, s in zip(data, scores, strict=True):
        order = np.lexsort((-d["cov"], -s)) if d["nterms"] else []
        run[d["q"]["id"]] = [dict(d["hits"][i], score=float(s[i])) for i in list(order)[:max_results]]
    return score_run([d["q"] for d in data], run)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="devmem")
    ap.add_argument("--models", default="all-MiniLM-L6-v2")
    ap.add_argument("--grid", action="store_true", help="print the fusion grid")
    ap.add_argument("--unit-weights", default="",
                    help="also fit and simulate these store.vector.unitWeight values from the same run, e.g. 0,0.3,0.5,1")
    ap.add_argument("--fusion", default="", help="fit the log-odds fusion for these vector weights, e.g. 0.45,0.5, "
                    "and compare it with the probability mix (0.7/0.3) on each dataset")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                    help="memorySearch setting, e.g. store.vector.unitWeight=0.5")
    args = ap.parse_args()
    settings = {}
    for item in args.set:
        key, _, value = item.partition("=")
        settings[key] = json.loads(value)
    fits: dict[str, Any] = {}
    for model in args.models.split(","):
        data: dict[str, list[dict[str, Any]]] = {}
        for name in args.datasets.split(","):
            data[name] = dump(DATASETS / name, model, settings)
        alld = [d for v in data.values() for d in v]
        for uw in [float(x) for x in args.unit_weights.split(",") if x]:
            for d in alld:
                d["cos_w"] = (1 - uw) * d["cos_chunk"] + uw * d["cos_best"]
            wpool = [pool(d["cos_w"], d["cos_w"] > -2) for d in alld]
            wcos = np.concatenate([d["cos_w"][i] for d, i in zip(alld, wpool, strict=True)])
            wlab = np.concatenate([d["label"][i] for d, i in zip(alld, wpool, strict=True)]).astype(float)
            wcal = fit_logistic(np.maximum(wcos, 0), wlab)
            kp = [pool(d["cov"], d["cov"] > 0) for d in alld]
            kc = fit_logistic(np.concatenate([d["cov"][i] for d, i in zip(alld, kp, strict=True)]),
                              np.concatenate([d["label"][i] for d, i in zip(alld, kp, strict=True)]).astype(float))
            for vw in (0.5, 0.7):
                for ms_ in (0.05, 0.1, 0.15, 0.2):
                    cells = []
                    for name, dd in data.items():
                        r = simulate([dict(d, cos=d["cos_w"]) for d in dd], wcal, kc, vw, ms_)
                        o = r["overall"]
                        neg = r["per_type"].get("negative", {})
                        para = r["per_type"].get("paraphrase", {})
                        cells.append(f"{name}: h1 {o['hit@1']:.3f} h5 {o['hit@5']:.3f} para {para.get('hit@5') or 0:.3f} "
                                     f"neg {neg.get('negative_empty_count', '-')}/{neg.get('negative', '-')}")
                    print(f"unitWeight {uw} (vector slope {wcal[0]:.2f} midpoint {wcal[1]:.3f}) vw {vw} min {ms_}: "
                          + " | ".join(cells), file=sys.stderr)
        vpool = [pool(d["cos"], d["cos"] > -2) for d in alld]
        kpool = [pool(d["cov"], d["cov"] > 0) for d in alld]
        cos = np.concatenate([d["cos"][i] for d, i in zip(alld, vpool, strict=True)])
        lab = np.concatenate([d["label"][i] for d, i in zip(alld, vpool, strict=True)]).astype(float)
        vcal = fit_logistic(np.maximum(cos, 0), lab)
        covs = np.concatenate([d["cov"][i] for d, i in zip(alld, kpool, strict=True)])
        klab = np.concatenate([d["label"][i] for d, i in zip(alld, kpool, strict=True)]).astype(float)
        kcal = fit_logistic(covs, klab)
        fits[model] = {"vector": vcal, "keyword": kcal, "pairs": int(len(lab)), "relevant": int(lab.sum())}
        print(f"{model}: vector slope {vcal[0]:.2f} midpoint {vcal[1]:.3f}; keyword slope {kcal[0]:.2f} "
              f"midpoint {kcal[1]:.3f} ({len(lab)} pairs, {int(lab.sum())} relevant)", file=sys.stderr)
        for vw in [float(x) for x in args.fusion.split(",") if x]:
            fk = fit_fusion(alld, vcal, kcal, vw)
            fits[model][f"fusion {vw}"] = fk
            for label, fus, w in (("probability mix 0.7/0.3", None, 0.7), (f"log-odds {vw}/{1 - vw:.2f}", fk, vw)):
                cells = []
                for name, dd in data.items():
                    r = ranking(dd, [_fused(d, vcal, kcal, w, fus) for d in dd])
                    o, pt = r["overall"], r["per_type"]
                    cells.append(f"{name}: h1 {o['hit@1']:.3f} h5 {o['hit@5']:.3f} para@5 "
                                 f"{(pt.get('paraphrase') or {}).get('hit@5') or 0:.3f}")
                print(f"{label} (k {fk[0]:.3f}, c {fk[1]:.3f}): " + " | ".join(cells), file=sys.stderr)
        if args.grid:
            for vw in (0.5, 0.6, 0.7, 0.8):
                for ms in (0.2, 0.25, 0.3, 0.35, 0.4):
                    cells = []
                    for name, dd in data.items():
                        r = simulate(dd, vcal, kcal, vw, ms)
                        o = r["overall"]
                        neg = r["per_type"].get("negative", {})
                        ml = r["per_type"].get("multilingual", {})
                        cells.append(f"{name}: h1 {o['hit@1']:.3f} h5 {o['hit@5']:.3f} empty {o['positive_empty']:.3f}"
                                     f" neg {neg.get('negative_empty_count', '-')}/{neg.get('negative', '-')}"
                                     f" ml {ml.get('hit@5') or 0:.2f}/{ml.get('positive_empty') or 0:.2f}")
                    print(f"vw {vw} min {ms}: " + " | ".join(cells))
    print(json.dumps({k: {kk: (list(vv) if isinstance(vv, tuple) else vv) for kk, vv in v.items()}
                      for k, v in fits.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
