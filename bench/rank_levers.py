"""Ranking levers of issue 10, measured offline on devmem and convmem together, side by side with the product's scoring.

Indexes each dataset with the local model (the default config), dumps what
every query needs (each chunk's and each line's cosine, the keyword evidence,
identifier and every-word flags, gold labels) plus the extra embeddings some
levers need (rewritten queries, line pairs, lines with their heading), then
scores every chunk of every query once per lever and prints the as-configured
hit@1 / hit@5 (top 6, ``minScore`` of the lever's scale) of both sets. Every
chunk is a candidate here, so the figures are a simulation; the ``main`` rows
reproduce ``bench/recall_bench.py`` within a query or two. Levers that change
the vector scores refit the vector calibration on the top-20 pool
(``calibration_fit.fit_logistic``) so each is judged at its best.

    python bench/rank_levers.py [--datasets devmem,convmem]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / "bench" / "datasets"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_fit import fit_logistic  # noqa: E402

VCAL = (13.6, 0.571)  # all-MiniLM-L6-v2, line-aware (symi_memory_local)
UNIT_W = 0.7
QWORDS = set("what which who whom whose when where why how is are was were do does did has have had can could "
             "should would will much many long far often".split())
SPLIT = re.compile(r",?\s+and\s+(?=(?:what|which|who|when|where|why|how|is|are|was|did|does)\b)|[;?]\s+(?=\S)",
                   re.I)


def _strip_question(q: str) -> str:
    words = q.rstrip("?").split()
    i = 0
    while i < len(words) and words[i].lower().strip(",") in QWORDS:
        i += 1
    return " ".join(words[i:]) or q


def _heading(lines: list[str], n: int) -> str:
    for k in range(n - 2, -1, -1):
        m = re.match(r"^#+\s+(.*)", lines[k])
        if m:
            return m.group(1)
    return ""


def dump(name: str) -> dict[str, Any]:
    """Everything the levers score, for one dataset (one index build, one model load)."""
    from symi_memory import load_config
    from symi_memory.chunking import CHARS_PER_TOKEN
    from symi_memory.evaluation import _overlaps, _throwaway_config, load_queries
    from symi_memory.index import analysis
    from symi_memory.index.indexer import chunk_units
    from symi_memory.index.keyword import ExactMatcher
    from symi_memory.manager import open_memory

    root = DATASETS / name
    queries = load_queries(root / "queries.jsonl")
    with tempfile.TemporaryDirectory(prefix="symi-levers-") as tmp:
        cfg = load_config(None, state_dir=tmp, overrides={"agents": {"defaults": {"memorySearch": {"provider": "local"}}}})
        with open_memory(_throwaway_config(cfg, Path(tmp)), workspace=root / "workspace", start=False) as mem:
            mem.sync(reason="eval")
            backend = mem._require()
            store, provider = backend.store, backend.choice.provider
            rows = store._read("SELECT c.rowid, c.path, c.start_line, c.end_line, c.text, v.embedding FROM chunks c "
                               "JOIN embedding_cache v ON v.id = c.vector WHERE c.source = 'memory' "
                               "ORDER BY c.rowid").fetchall()
            files: dict[str, list[str]] = {}
            for r in rows:
                files.setdefault(r[1], (root / "workspace" / r[1]).read_text(encoding="utf-8").split("\n"))
            chunks = [{"path": r[1], "start": r[2], "end": r[3], "text": r[4]} for r in rows]
            unit_sets: dict[str, list[tuple[int, int, int, str]]] = {"lines": [], "pairs": [], "heading": []}
            for i, c in enumerate(chunks):
                lines = files[c["path"]]
                units = chunk_units("\n".join(lines[c["start"] - 1:c["end"]]), tuple(range(c["start"], c["end"] + 1)),
                                    "lines")
                for k, (a, b, t) in enumerate(units):
                    unit_sets["lines"].append((i, a, b, t))
                    head = _heading(lines, a)
                    unit_sets["heading"].append((i, a, b, f"{head}: {t}" if head else t))
                    if k + 1 < len(units):
                        unit_sets["pairs"].append((i, a, units[k + 1][1], f"{t}\n{units[k + 1][2]}"))

            def embed(texts: list[str]) -> np.ndarray:
                m = np.array(provider.embed_documents(texts), dtype=np.float32) if texts else np.zeros((0, 384))
                return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)

            chunk_vecs = np.stack([np.frombuffer(r[5], dtype=np.float32) for r in rows])
            units = {k: {"chunk": np.array([u[0] for u in v]), "lines": [(u[1], u[2]) for u in v], "vec": embed([u[3] for u in v])}
                     for k, v in unit_sets.items()}
            counts = [analysis.term_counts(c["text"]) for c in chunks]
            n = len(chunks)
            df: dict[str, int] = {}
            for tc in counts:
                for t in tc:
                    df[t] = df.get(t, 0) + 1
            ref = CHARS_PER_TOKEN * int(mem.agent.memory_search["chunking"]["tokens"])
            common = {t for t, c in df.items() if c / n > 0.35}
            qs = []
            variants: dict[str, list[str]] = {"question": [], "stripped": [], "content": [], "uncommon": []}
            parts: list[list[str]] = []
            for q in queries:
                qa = analysis.QueryAnalysis.of(q["query"])
                weights = store.term_weights(qa.terms) if qa.terms else {}
                matcher = ExactMatcher.for_tokens((), qa.identifiers)
                ident = np.array([bool(matcher.idents) and matcher.holds_identifier(c["text"]) for c in chunks])
                every = np.array([bool(weights) and all(t in tc for t in weights) for tc in counts])
                label = np.array([any(_overlaps({"path": c["path"], "start": c["start"], "end": c["end"]}, g)
                                      for g in q.get("gold", [])) for c in chunks])
                ev = np.array([analysis.keyword_evidence(tc, len(c["text"]) / ref, weights)
                               for tc, c in zip(counts, chunks, strict=True)])
                qs.append({"q": q, "terms": qa.terms, "has_ident": bool(matcher.idents), "ident": ident,
                           "exact": ident | every, "label": label, "ev": ev})
                variants["question"].append(q["query"])
                variants["stripped"].append(_strip_question(q["query"]))
                variants["content"].append(" ".join(qa.words) or q["query"])
                kept = [w for w in re.findall(r"\w+|\W+", q["query"]) if not (w[:1].isalnum() and analysis.stem(w) in common)]
                variants["uncommon"].append("".join(kept).strip() or q["query"])
                parts.append([p for p in SPLIT.split(q["query"]) if len(p.split()) >= 2])
            qvecs = {k: embed(v) for k, v in variants.items()}
            part_vecs = [embed(p) if len(p) > 1 else None for p in parts]
            dates = []
            for c in chunks:
                m = re.search(r"(\d{4}-\d{2}-\d{2})", c["path"].rsplit("/", 1)[-1])
                dates.append(np.datetime64(m.group(1)) if m else None)
    chunk_vecs /= np.linalg.norm(chunk_vecs, axis=1, keepdims=True)
    return {"name": name, "chunks": chunks, "C": chunk_vecs, "units": units, "qs": qs, "Q": qvecs,
            "parts": part_vecs, "dates": dates}


# ----------------------------------------------------------------------------------------------- scoring


def sig(x: Any, slope: float, mid: float) -> Any:
    return 1.0 / (1.0 + np.exp(-slope * (x - mid)))


def keyword_p(ev: np.ndarray, exact: np.ndarray) -> np.ndarray:
    from symi_memory.index.analysis import EXACT_KEYWORD_FLOOR, KEYWORD_CALIBRATION

    p = np.where(ev > 0, sig(ev, *KEYWORD_CALIBRATION), 0.0)
    return np.where(exact, np.maximum(p, EXACT_KEYWORD_FLOOR), p)


def best_unit(d: dict[str, Any], q: np.ndarray, kind: str = "lines", keep: np.ndarray | None = None) -> np.ndarray:
    """Per query and chunk, the best unit cosine (the chunk's own cosine when it has no unit)."""
    u = d["units"][kind]
    cos = q @ u["vec"].T
    if keep is not None:
        cos = np.where(keep[None, :], cos, -1.0)
    best = np.full((q.shape[0], len(d["chunks"])), -1.0)
    for j, c in enumerate(u["chunk"]):
        best[:, c] = np.maximum(best[:, c], cos[:, j])
    return best


def vector_cos(d: dict[str, Any], q: np.ndarray | None = None, kind: str = "lines", unit_w: float = UNIT_W) -> np.ndarray:
    q = d["Q"]["question"] if q is None else q
    cc = q @ d["C"].T
    return (1 - unit_w) * cc + unit_w * np.maximum(cc, best_unit(d, q, kind))


def mix(d: dict[str, Any], cos: np.ndarray, vcal: tuple[float, float] = VCAL, vw: float = 0.7,
        log_odds: tuple[float, float] | None = None) -> Callable[[int, dict[str, Any]], np.ndarray]:
    """Main's probability mix (``log_odds`` None) or the log-odds fusion ``(k, c)``, as fusion.fuse_weighted."""
    from symi_memory.index.analysis import keyword_log_odds

    def fn(i: int, qq: dict[str, Any]) -> np.ndarray:
        pv = sig(np.clip(cos[i], 0, 1), *vcal)
        pt = keyword_p(qq["ev"], qq["exact"])
        w = 0.3 if qq["has_ident"] else vw
        if log_odds is None or qq["has_ident"]:  # an identifier look-up mixes probabilities in both
            s = w * pv + (1 - w) * pt
        else:
            lv = np.log(np.clip(pv, 1e-6, 1 - 1e-6) / np.clip(1 - pv, 1e-6, 1))
            lt = np.array([keyword_log_odds(e) for e in qq["ev"]])
            s = 1 / (1 + np.exp(-(log_odds[0] * (w * lv + (1 - w) * lt) + log_odds[1])))
            s = np.where(qq["ev"] > 0, s, w * pv)  # none of the query's words: the vector side alone
        return np.where(qq["exact"], np.maximum(s, pt), s)
    return fn


def refit(data: list[dict[str, Any]], coss: list[np.ndarray], *, clip: bool = True) -> tuple[float, float]:
    """The vector calibration of these cosines (or, ``clip`` False, any scores), fitted on each query's
    top-20 chunks of both sets."""
    xs, ys = [], []
    for d, cos in zip(data, coss, strict=True):
        for i, qq in enumerate(d["qs"]):
            idx = np.argsort(-cos[i])[:20]
            xs.append(np.clip(cos[i][idx], 0, 1) if clip else cos[i][idx])
            ys.append(qq["label"][idx])
    return fit_logistic(np.concatenate(xs).astype(float), np.concatenate(ys).astype(float))


def evaluate(d: dict[str, Any], fn: Callable[[int, dict[str, Any]], np.ndarray], min_score: float) -> tuple[float, float]:
    from symi_memory.evaluation import score_run

    run = {}
    for i, qq in enumerate(d["qs"]):
        if not qq["terms"]:
            run[qq["q"]["id"]] = []
            continue
        s = fn(i, qq)
        order = np.lexsort((-qq["ev"], -s))  # ties: the keyword ranking's order, as the backend
        run[qq["q"]["id"]] = [dict(path=d["chunks"][j]["path"], start=d["chunks"][j]["start"],
                                   end=d["chunks"][j]["end"], score=float(s[j]))
                              for j in order[:6] if s[j] >= min_score]
    o = score_run([qq["q"] for qq in d["qs"]], run)["overall"]
    return o["hit@1"], o["hit@5"]


def levers(data: list[dict[str, Any]]) -> list[tuple[str, list[Callable[[int, dict[str, Any]], np.ndarray]], float]]:
    """(name, one scoring function per dataset, minScore) of every lever."""
    out: list[tuple[str, list[Any], float]] = []

    def with_cos(name: str, coss: list[np.ndarray]) -> None:
        cal = refit(data, coss)
        out.append((name, [mix(d, c, cal) for d, c in zip(data, coss, strict=True)], 0.025))

    base = [vector_cos(d) for d in data]
    out.append(("main: probability mix 0.7/0.3", [mix(d, c) for d, c in zip(data, base, strict=True)], 0.025))
    out.append(("log-odds fusion 0.45/0.55 (this change)",
                [mix(d, c, vw=0.45, log_odds=(1.327, 0.841)) for d, c in zip(data, base, strict=True)], 0.015))
    out.append(("probability mix 0.5/0.5", [mix(d, c, vw=0.5) for d, c in zip(data, base, strict=True)], 0.025))
    for v in ("stripped", "content"):
        with_cos(f"query embedded as {v}", [vector_cos(d, d["Q"][v]) for d in data])

    def avg(d: dict[str, Any], v: str) -> np.ndarray:
        q = d["Q"]["question"] + d["Q"][v]
        return q / np.linalg.norm(q, axis=1, keepdims=True)
    with_cos("query: mean of question and stripped", [vector_cos(d, avg(d, "stripped")) for d in data])
    with_cos("query: mean with corpus-common words left out", [vector_cos(d, avg(d, "uncommon")) for d in data])

    def prf(d: dict[str, Any], cos: np.ndarray) -> np.ndarray:
        q = d["Q"]["question"].copy()
        for i in range(len(q)):
            q[i] += 0.3 * d["C"][np.argsort(-cos[i])[:3]].mean(0)
        return vector_cos(d, q / np.linalg.norm(q, axis=1, keepdims=True))
    with_cos("pseudo-relevance feedback (top 3, 0.3)", [prf(d, c) for d, c in zip(data, base, strict=True)])

    def centred(d: dict[str, Any]) -> np.ndarray:
        mu = d["units"]["lines"]["vec"].mean(0)
        n = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)  # noqa: E731
        dd = dict(d, C=n(d["C"] - mu), units=dict(d["units"], lines=dict(d["units"]["lines"],
                                                                          vec=n(d["units"]["lines"]["vec"] - mu))))
        return vector_cos(dd, n(d["Q"]["question"] - mu))
    with_cos("embeddings centred (corpus mean)", [centred(d) for d in data])
    for kind in ("pairs", "heading"):
        with_cos(f"units: {kind} instead of lines", [vector_cos(d, kind=kind) for d in data])
    with_cos("units: lines and heading-context lines",
             [np.maximum(vector_cos(d), vector_cos(d, kind="heading")) for d in data])

    def no_headings(d: dict[str, Any]) -> np.ndarray:
        heads = np.array([_is_heading(d, j) for j in range(len(d["units"]["lines"]["chunk"]))])
        q = d["Q"]["question"]
        cc = q @ d["C"].T
        return (1 - UNIT_W) * cc + UNIT_W * np.maximum(cc, best_unit(d, q, keep=~heads))
    with_cos("units: heading lines not embedded", [no_headings(d) for d in data])

    def parts(d: dict[str, Any]) -> np.ndarray:
        cos = vector_cos(d).copy()
        for i, pv in enumerate(d["parts"]):
            if pv is not None:
                cos[i] = 0.5 * cos[i] + 0.5 * np.mean(vector_cos(d, pv), axis=0)
        return cos
    with_cos("sub-questions (mean with the whole, 0.5)", [parts(d) for d in data])

    def recency(d: dict[str, Any], fn: Callable[[int, dict[str, Any]], np.ndarray]) -> Callable[..., np.ndarray]:
        def g(i: int, qq: dict[str, Any]) -> np.ndarray:
            now = np.datetime64(str(qq["q"].get("now") or "2026-12-31")[:10])
            age = np.array([(now - x).astype(int) if x is not None else -1 for x in d["dates"]], dtype=float)
            f = np.where(age >= 0, 0.8 + 0.2 * 2 ** (-np.maximum(age, 0) / 120), 1.0)
            s = fn(i, qq)
            return np.where(qq["ident"], s, s * f)
        return g
    out.append(("recency prior (0.8 + 0.2 x 2^(-age/120 d))",
                [recency(d, mix(d, c)) for d, c in zip(data, base, strict=True)], 0.025))
    return out


def _is_heading(d: dict[str, Any], j: int) -> bool:
    u = d["units"]["lines"]
    c = d["chunks"][u["chunk"][j]]
    a = u["lines"][j][0]
    lines = c["text"].split("\n")
    k = a - c["start"]
    return 0 <= k < len(lines) and lines[k].lstrip().startswith("#")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="devmem,convmem")
    args = ap.parse_args()
    data = [dump(name) for name in args.datasets.split(",")]
    print("| lever | " + " | ".join(f"{d['name']} hit@1 / hit@5" for d in data) + " |")
    print("|---|" + "---|" * len(data))
    for name, fns, min_score in levers(data):
        cells = [evaluate(d, fn, min_score) for d, fn in zip(data, fns, strict=True)]
        print(f"| {name} | " + " | ".join(f"{h1:.3f} / {h5:.3f}" for h1, h5 in cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
