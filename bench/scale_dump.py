"""Every response of many searches on a copy of a scale store, one JSON line each, to compare checkouts byte for byte.

The 300 queries of ``bench/scale.py`` at that size, and six variants of the first 100 (the two words alone, an
upper-case word, common words, a word with an underscore, a stop-word question, more identifiers), each asked in
two rounds (cold caches, then warm): the response as configured (``minScore`` applied), the ranking view
(``min_score=0``) and the backend's candidates with every field. Run it with each checkout's interpreter on the same
store (``bench/scale.py``'s ``build_store``, or ``bench/search_steps.py --build``) and ``cmp`` the files:

    python bench/scale_dump.py STORE N OUT
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402


def main() -> int:
    import attrs

    from symi_memory import load_config
    from symi_memory.manager import open_memory
    from symi_memory.types import SearchQuery

    os.environ.setdefault("SYMI_MEMORY_TESTING", "1")
    src, n, out = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    work = Path(tempfile.mkdtemp(prefix="scale-dump-"))
    db = work / "store.sqlite"
    shutil.copy(src, db)  # opening syncs against the (empty) workspace: never the original
    queries = scale.make_queries(n, 300)
    for i, q in enumerate(list(queries[:100])):
        w = q["text"].split()
        for text in (" ".join(w[:2]), w[0].upper() + " " + w[1], f"{w[0]} common{i % 300} Common{(i * 7) % 300}",
                     f"{w[0]}_x {w[1]}", f"what is {w[1]}", f"{w[0]} {w[1]} c{i}w{i % 40} zz{i}"):
            queries.append({"text": text, "vector": q["vector"]})
    table = {q["text"]: q["vector"] for q in queries}

    cfg = load_config(None, state_dir=work, overrides={
        "plugins": {"slots": {"memory": "builtin-sqlite"}},
        "agents": {"defaults": {"memorySearch": {"provider": "bench", "store": {"path": str(db)}}}}})
    mem = open_memory(cfg, workspace=work / "ws", start=False, plugins=[("bench", scale.bench_plugin(table))])
    try:
        while not mem.backend.vectors.ready():
            time.sleep(0.05)
        with out.open("w", encoding="utf-8") as f:
            for _ in range(2):
                for q in queries:
                    configured = mem.search(q["text"], max_results=10).to_dict()
                    ranking = mem.search(q["text"], max_results=10, min_score=0).to_dict()
                    got = mem.backend.search(SearchQuery(text=q["text"], max_results=10, min_score=0.0,
                                                         candidate_limit=50))
                    f.write(json.dumps({"q": q["text"], "default": configured, "ranking": ranking, "mode": got.mode,
                                        "backend": [attrs.asdict(c) for c in got.candidates]},
                                       sort_keys=True, default=repr) + "\n")
    finally:
        mem.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(queries)} queries, 2 rounds: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
