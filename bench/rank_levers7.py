"""Ninth ranking round (issue 10, branch recall37): two score-shape levers, measured end to end.

Indexes devmem and convmem once each (state kept under ``--state``), then searches every query through
``MemoryManager.search`` as a user would (the default config: ``minScore``, ``maxResults``, supersession,
month cue, tie order) and again in the ranking view (``minScore`` 0, 10 results), and prints hit@1 / hit@5 /
MRR per set, per-type hit@1 / hit@5, the never-said questions that returned nothing, and each question whose
rank moved against the first (unchanged) configuration.

The levers change the weighted fusion's arithmetic inside ``fusion.score_hits`` (written out inline there for
speed, so it cannot be wrapped): this script recompiles ``score_hits`` from its source with the experiment's
lines added, and fails loudly when the anchors it edits are gone. Nothing in the product changes.

* ``ft``: the keyword side's log-odds floored at ``logit(ft)`` for a chunk holding some query word (weak keyword
  evidence counted as none: the vector side decides among such chunks);
* ``fv``: the vector side's log-odds floored at ``logit(fv)``;
* ``alpha`` (with ``s0``, ``n``): each query's vector log-odds spread normalised, ``m + (l - m) * (s0 / s) **
  alpha`` with ``m`` and ``s`` the mean and standard deviation of the query's top ``n`` vector log-odds
  (a distribution-based fusion: ``alpha`` 1 gives every query the same vector spread, 0 is today's);
* ``coord``: the keyword evidence times the share of the query's IDF the chunk holds, to the power ``coord``
  (Lucene's classic coordination factor: a chunk holding more of the question's words counts more);
* ``centrality`` (``beta``): each query term's IDF times ``(c / mean c) ** beta``, ``c`` the cosine of the word's
  embedding with the question's (floored at 0.05): ``beta`` > 0 weighs the words the question is about, < 0
  the ones the embedding of the question leaves out (names, specifics). The words are embedded here with the
  index's provider (a product would read the stored word vectors of ``query.hybrid.synonyms``).

    python bench/rank_levers7.py [--state DIR] '{}' '{"ft": 0.08}' '{"alpha": 0.3, "s0": 1.1}'
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / "bench" / "datasets"

EXP: dict[str, float] = {}
PROVIDER: list[Any] = []  # the open index's embedding provider (centrality)

_PRE = """    vget = vector_scores.get
    keys = list(scored)"""
_PRE_NEW = """    vget = vector_scores.get
    _vm = _vs = 0.0
    if "alpha" in _EXP and vector_scores:
        _ls = sorted((log(min(hi, max(lo, v)) / (1.0 - min(hi, max(lo, v)))) for v in vector_scores.values()),
                     reverse=True)[: int(_EXP.get("n", 20))]
        _vm = sum(_ls) / len(_ls)
        _vs = (sum((x - _vm) ** 2 for x in _ls) / len(_ls)) ** 0.5
    keys = list(scored)"""
_EVID = """            evidence = acc / total"""
_EVID_NEW = """            evidence = acc / total
            if "coord" in _EXP and acc > 0.0:
                _held = sum(w for t, w in term_weights.items() if counts.get(t, 0)
                            or any(counts.get(x, 0) for x, _f in (syn or {}).get(t, ())))
                evidence *= (_held / total) ** _EXP["coord"]"""
_FUSE = """            z = fk * (vw * log(p / (1.0 - p)) + tw * lt) + fc"""
_FUSE_NEW = """            _lv = log(p / (1.0 - p))
            _lt = max(lt, _EXP["ft"]) if "ft" in _EXP else lt
            if "fv" in _EXP:
                _lv = max(_lv, _EXP["fv"])
            if "alpha" in _EXP and _vs > 0:
                _lv = _vm + (_lv - _vm) * (_EXP["s0"] / _vs) ** _EXP["alpha"]
            z = fk * (vw * _lv + tw * _lt) + fc"""


def install() -> None:
    """Recompile fusion.score_hits with the experiment's lines (reading the log-odds settings from EXP)."""
    from symi_memory import fusion

    src = textwrap.dedent(inspect.getsource(fusion.score_hits))
    for old, new in ((_PRE, _PRE_NEW), (_EVID, _EVID_NEW), (_FUSE, _FUSE_NEW)):
        if src.count(old) != 1:
            raise SystemExit(f"rank_levers7: score_hits no longer holds the line this experiment edits:\n{old}")
        src = src.replace(old, new)
    ns = dict(vars(fusion))
    ns["_EXP"] = EXP
    exec(compile(src, fusion.__file__, "exec"), ns)  # noqa: S102  (our own function's source, edited above)
    edited = ns["score_hits"]
    words: dict[str, Any] = {}

    def unit(text: str) -> Any:
        import numpy as np

        if text not in words:
            v = np.asarray(PROVIDER[0].embed_query(text), dtype=np.float32)
            words[text] = v / (float(np.linalg.norm(v)) or 1.0)
        return words[text]

    def score_hits(query: str, hybrid: Any, *, term_weights: Any, analysis: Any = None, **kw: Any) -> Any:
        beta = EXP.get("centrality")
        if beta is not None and PROVIDER and analysis is not None and len(term_weights) > 1 \
                and len(analysis.words) == len(analysis.terms):
            q = unit(query)
            cos = {t: max(0.05, float(unit(w) @ q)) for w, t in zip(analysis.words, analysis.terms, strict=True)}
            mean = sum(cos.values()) / len(cos)
            term_weights = {t: w * (cos.get(t, mean) / mean) ** beta for t, w in term_weights.items()}
        return edited(query, hybrid, term_weights=term_weights, analysis=analysis, **kw)

    fusion.score_hits = score_hits
    for mod in list(sys.modules.values()):  # modules that imported the name
        if getattr(mod, "score_hits", None) is not None and mod is not fusion and \
                getattr(mod, "__name__", "").startswith("symi_memory"):
            mod.score_hits = score_hits  # type: ignore[attr-defined]


def run(state: Path, sets: list[str]) -> dict[str, Any]:
    from symi_memory import load_config
    from symi_memory.evaluation import _score_query, _throwaway_config, load_queries, parse_now
    from symi_memory.manager import open_memory

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from recall_bench import locate  # heldout/devmem: the held-out questions over devmem's workspace

    out: dict[str, Any] = {}
    for name in sets:
        ds, queries = locate(name)
        st = state / f"{ds.name}-local"  # one index per workspace
        st.mkdir(parents=True, exist_ok=True)
        cfg = load_config(None, state_dir=str(st),
                          overrides={"agents": {"defaults": {"memorySearch": {"provider": "local"}}}})
        ranks: dict[str, tuple[str, int | None, int | None]] = {}
        with open_memory(_throwaway_config(cfg, st), workspace=ds / "workspace", start=False) as mem:
            mem.sync(reason="eval")
            PROVIDER[:] = [mem._require().choice.provider]
            t0 = time.process_time()
            for q in load_queries(queries):
                now = parse_now(q.get("now"))
                hits = [{"path": h.path, "start": h.start_line, "end": h.end_line, "score": h.score}
                        for h in mem.search(q["query"], now=now).results]
                if not q.get("gold"):
                    ranks[q["id"]] = ("negative", len(hits), None)
                    continue
                ranked = [{"path": h.path, "start": h.start_line, "end": h.end_line, "score": h.score}
                          for h in mem.search(q["query"], now=now, max_results=10, min_score=0).results]
                ranks[q["id"]] = (q["type"], _score_query(q, hits)["first_gold_rank"],
                                  _score_query(q, ranked)["first_gold_rank"])
            out[name] = (ranks, (time.process_time() - t0) / len(ranks) * 1000)
    return out


def summary(out: dict[str, Any]) -> str:
    lines = []
    for name, (ranks, cpu) in out.items():
        pos = [(t, r, rr) for t, r, rr in ranks.values() if t != "negative"]
        neg = [n for t, n, _ in ranks.values() if t == "negative"]
        n = len(pos)
        h1 = sum(r == 1 for _, r, _ in pos)
        h5 = sum(bool(r and r <= 5) for _, r, _ in pos)
        mrr = sum(1 / r for _, r, _ in pos if r) / n
        rmrr = sum(1 / rr for _, _, rr in pos if rr and rr <= 10) / n
        per = " ".join(f"{t}={sum(tt == t and r == 1 for tt, r, _ in pos)}/"
                       f"{sum(bool(tt == t and r and r <= 5) for tt, r, _ in pos)}/{sum(tt == t for tt, _, _ in pos)}"
                       for t in sorted({t for t, _, _ in pos}))
        lines.append(f"{name}: hit@1 {h1 / n:.3f} ({h1}) hit@5 {h5 / n:.3f} MRR {mrr:.3f} rank MRR {rmrr:.3f} "
                     f"negatives empty {sum(x == 0 for x in neg)}/{len(neg)} search CPU {cpu:.1f} ms | "
                     f"hit@1/hit@5/n: {per}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("settings", nargs="*", default=["{}"], help="JSON: ft, fv (probabilities), alpha, s0, n")
    ap.add_argument("--state", type=Path, default=Path("/tmp/symi-rank-levers7"))
    ap.add_argument("--datasets", default="devmem,convmem")
    args = ap.parse_args()
    install()
    first: dict[str, Any] | None = None
    for spec in args.settings:
        given = json.loads(spec)
        EXP.clear()
        for k, v in given.items():
            EXP[k] = math.log(v / (1 - v)) if k in ("ft", "fv") else float(v)
        out = run(args.state, args.datasets.split(","))
        print(f"== {spec}\n{summary(out)}")
        if first is None:
            first = out
        else:
            for name, (ranks, _) in out.items():
                for qid, (t, r, _) in ranks.items():
                    if first[name][0][qid][1] != r:
                        print(f"  {name} {qid} [{t}] {first[name][0][qid][1]} -> {r}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
