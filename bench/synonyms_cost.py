"""What local synonyms cost (``query.hybrid.synonyms``): index time and search CPU, on and off in one process.

Indexes a dataset with the local model and the switch on (the default), then
opens the same index a second time with the switch off, and runs every query
through both, interleaved, timing each search's CPU (``time.process_time``:
the machine is shared, wall time is noise). Prints the CPU the vocabulary
update took at index time (its word vectors, once), the median and p90 search
CPU both ways, for all queries and for the ones holding a word the index does
not (the only ones that embed anything more), and the ratio: for the first
round (each unknown word embedded) and the later ones (the process keeps a
query word's vector).

    python bench/synonyms_cost.py [--dataset devmem] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    from symi_memory import load_config
    from symi_memory.evaluation import _throwaway_config, load_queries, parse_now
    from symi_memory.index.analysis import QueryAnalysis
    from symi_memory.index.synonyms import Vocabulary, vocabulary_words
    from symi_memory.manager import open_memory

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="devmem")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    root = REPO / "bench" / "datasets" / args.dataset
    queries = load_queries(root / "queries.jsonl")
    with tempfile.TemporaryDirectory(prefix="symi-syncost-") as tmp:
        def mem(on: bool):  # type: ignore[no-untyped-def]
            ms = {"provider": "local", "query": {"hybrid": {"synonyms": {"enabled": on}}}}
            cfg = load_config(None, state_dir=tmp, overrides={"agents": {"defaults": {"memorySearch": ms}}})
            return open_memory(_throwaway_config(cfg, Path(tmp)), workspace=root / "workspace", start=False)

        with mem(False) as off:
            t = time.process_time()
            off.sync(reason="eval")
            build = time.process_time() - t
            store = off.backend.store
            words = vocabulary_words(r[0] for r in store._read("SELECT text FROM chunks"))
            t = time.process_time()
            added = Vocabulary(store).update(off.backend.choice.provider, words, max_words=len(words))
            vocab_cpu = time.process_time() - t
            with mem(True) as on:
                gen = store.generation_key()
                unknown = set()
                for q in queries:
                    qa = QueryAnalysis.of(q["query"])
                    df = store._doc_freqs(list(qa.terms), gen)
                    if any(not df.get(t) for t in qa.terms):
                        unknown.add(q["id"])
                for m in (off, on):  # warm-up: model load, optimised session, word vectors
                    for q in queries[:3]:
                        m.search(q["query"], now=parse_now(q.get("now")))
                cpu: dict[bool, dict[str, list[float]]] = {False: {}, True: {}}
                for _ in range(args.rounds):
                    for q in queries:
                        for flag, m in ((False, off), (True, on)):
                            t = time.process_time()
                            m.search(q["query"], now=parse_now(q.get("now")))
                            cpu[flag].setdefault(q["id"], []).append(time.process_time() - t)
    print(f"{args.dataset}: {len(queries)} queries, {len(unknown)} with a word the index does not hold")
    print(f"index build (switch off) {build:.1f} s CPU; vocabulary update {vocab_cpu:.1f} s CPU for {added} words")

    def stats(flag: bool, ids: set[str] | None, first: bool) -> tuple[float, float]:
        # first: the first round (each unknown word embedded); else the best of the later rounds (its
        # vector kept by the process, as when a word comes back)
        xs = sorted(1000 * (v[0] if first else min(v[1:] or v)) for k, v in cpu[flag].items() if ids is None or k in ids)
        return statistics.median(xs), xs[int(0.9 * (len(xs) - 1))]

    print("| queries | round | off p50 / p90 ms CPU | on p50 / p90 ms CPU | ratio p50 |")
    print("|---|---|---|---|---|")
    for name, ids in (("all", None), ("with an unknown word", unknown),
                      ("every word in the index", {q["id"] for q in queries} - unknown)):
        for first in (True, False):
            a, b = stats(False, ids, first), stats(True, ids, first)
            print(f"| {name} | {'first (words embedded)' if first else 'later (words kept)'} | {a[0]:.1f} / {a[1]:.1f} "
                  f"| {b[0]:.1f} / {b[1]:.1f} | {b[0] / a[0]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
