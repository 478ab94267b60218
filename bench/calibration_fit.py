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
  (gold in the top 5, empty results on positive and negative queries).

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


def dump(dataset: Path, model: str) -> list[dict[str, Any]]:
    """Per query: label, cosine, keyword evidence and identifier flag of every chunk."""
    from symi_memory import load_config
    from symi_memory.chunking import CHARS_PER_TOKEN
    from symi_memory.evaluation import _overlaps, _throwaway_config, load_queries
    from symi_memory.index import analysis
    from symi_memory.index.keyword import ExactMatcher, query_tokens
    from symi_memory.manager import open_memory

    queries = load_queries(dataset / "queries.jsonl")
    out = []
    with tempfile.TemporaryDirectory(prefix="symi-calib-") as tmp:
        cfg = load_config(None, state_dir=tmp, overrides={"agents": {"defaults": {"memorySearch": {
            "provider": "local", "local": {"model": model}}}}})
        with open_memory(_throwaway_config(cfg, Path(tmp)), workspace=dataset / "workspace", start=False) as mem:
            mem.sync(reason="calibration")
            backend = mem._require()
            store, provider = backend.store, backend.choice.provider
            rows = store._read("SELECT rowid, path, start_line, end_line, text, embedding FROM chunks "
                               "WHERE source = 'memory' ORDER BY rowid").fetchall()
            mat = np.stack([np.frombuffer(r[5], dtype=np.float32) for r in rows])
            chunk_terms = [analysis.term_counts(r[4]) for r in rows]
            n = len(rows)
            ref_len = CHARS_PER_TOKEN * int(mem.agent.memory_search["chunking"]["tokens"])
            df: dict[str, int] = {}
            for ts in chunk_terms:
                for t in ts:
                    df[t] = df.get(t, 0) + 1
            for q in queries:
                qv = np.asarray(provider.embed_query(q["query"]), dtype=np.float32)
                cos = mat @ qv
                qterms = analysis.query_terms(query_tokens(q["query"]))
                weights = {t: analysis.idf(df.get(t, 0), n) for t in qterms}
                cov = np.array([analysis.keyword_evidence(ts, len(r[4]) / ref_len, weights)
                                for ts, r in zip(chunk_terms, rows, strict=True)])
                matcher = ExactMatcher.for_query(q["query"])
                ident = np.array([matcher.classify(r[4])[1] for r in rows])
                hits = [{"path": r[1], "start": r[2], "end": r[3]} for r in rows]
                label = np.array([any(_overlaps(h, g) for g in q.get("gold", [])) for h in hits])
                out.append({"q": q, "cos": cos, "cov": cov, "ident": ident, "label": label, "hits": hits,
                            "nterms": len(qterms)})
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="devmem")
    ap.add_argument("--models", default="all-MiniLM-L6-v2")
    ap.add_argument("--grid", action="store_true", help="print the fusion grid")
    args = ap.parse_args()
    fits: dict[str, Any] = {}
    for model in args.models.split(","):
        data: dict[str, list[dict[str, Any]]] = {}
        for name in args.datasets.split(","):
            data[name] = dump(DATASETS / name, model)
        alld = [d for v in data.values() for d in v]
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
