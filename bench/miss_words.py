"""What a question's words find: document frequency, nearest index words, and the question's cosine with its gold lines.

For the questions named (``--ids``), prints each content word's index term and
how many chunks hold it, the six nearest words of the index's vocabulary by
the provider's word vectors (what local synonyms would pick from, before the
least cosine and the unknown-word rule), and the cosine of the question with
each gold line embedded alone. It reads the index ``bench/rank_misses.py``
keeps under ``--state`` (built on first use).

    python bench/miss_words.py --ids q011,q018 [--dataset devmem] [--state DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ids", required=True, help="question ids, comma-separated")
    ap.add_argument("--dataset", default="devmem")
    ap.add_argument("--state", type=Path, default=Path("/tmp/symi-rank-misses"))
    args = ap.parse_args()

    from symi_memory import load_config
    from symi_memory.evaluation import _throwaway_config, load_queries
    from symi_memory.index.analysis import QueryAnalysis, stem
    from symi_memory.index.synonyms import Vocabulary
    from symi_memory.manager import open_memory

    ds = REPO / "bench" / "datasets" / args.dataset
    state = args.state / f"{args.dataset}-local-default"
    state.mkdir(parents=True, exist_ok=True)
    qs = {q["id"]: q for q in load_queries(ds / "queries.jsonl")}
    cfg = load_config(None, state_dir=str(state),
                      overrides={"agents": {"defaults": {"memorySearch": {"provider": "local"}}}})
    with open_memory(_throwaway_config(cfg, state), workspace=ds / "workspace", start=False) as mem:
        mem.sync(reason="eval")
        be = mem._require()
        prov = be.choice.provider
        loaded = Vocabulary(be.store)._matrix(prov)
        if loaded is None:
            raise SystemExit("the index holds no word vectors (local synonyms off?)")
        _, words, m = loaded
        gen = be.store.generation_key()
        for qid in args.ids.split(","):
            q = qs[qid]
            qa = QueryAnalysis.of(q["query"])
            df = be.store._doc_freqs(list(qa.terms), gen)
            print(f"\n{qid}: {q['query']}")
            qv = np.asarray(prov.embed_query(q["query"]), dtype=float)
            qv /= np.linalg.norm(qv)
            wv = np.asarray(prov.embed_documents(list(qa.words)), dtype=float)
            wv /= np.linalg.norm(wv, axis=1, keepdims=True)
            for w, v in zip(qa.words, wv, strict=True):
                t = stem(w)
                row = m @ v
                best = np.argsort(-row)[:6]
                print(f"   {w} ({t}, {df.get(t, 0)} chunks): " + ", ".join(f"{words[j]} {row[j]:.2f}" for j in best))
            for g in q.get("gold", []):
                lines = (ds / "workspace" / g["path"]).read_text(encoding="utf-8").splitlines()
                for n in range(g["start_line"], g["end_line"] + 1):
                    lv = np.asarray(prov.embed_documents([lines[n - 1]])[0], dtype=float)
                    print(f"   gold {g['path']}:{n} cosine {float(qv @ lv / np.linalg.norm(lv)):.3f}: {lines[n - 1][:100]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
