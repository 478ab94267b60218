"""A 10k hybrid search's thread CPU with this checkout's search code and a baseline checkout's, in one process.

The search path's functions (``fusion.score_hits``, the methods of ``IndexedBackend``, ``KeywordSearch``,
``ExactMatcher`` and ``ExactVectors``, and ``backend._identifier_candidates``) are loaded from the baseline
checkout's files beside this checkout's and swapped every 10 searches, in alternating order, over the same store,
the same searches and the same caches: both see the same load. Each side must keep the other's store format and
the same helper signatures (a baseline a few commits back does). Thread CPU a search, p25 and p50 of each side.

    python bench/search_ab.py --baseline ../base --n 10000 --passes 5
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402

MODULES = ["fusion", "index/keyword", "index/backend", "index/fts", "index/vectors"]


def load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, required=True, help="the baseline checkout's root")
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--passes", type=int, default=5)
    args = ap.parse_args()
    import symi_memory.fusion as fusion
    import symi_memory.index.backend as backend
    import symi_memory.index.fts as fts
    import symi_memory.index.keyword as keyword
    import symi_memory.index.vectors as vectors

    base = {m: load("symi_memory." + m.replace("/", ".") + "_baseline", args.baseline / "core/symi_memory" / f"{m}.py")
            for m in MODULES}
    base["index/backend"]._import_search_path()
    backend._import_search_path()
    swaps: list[tuple[Any, str, Any, Any]] = []  # (owner, name, this checkout's, the baseline's)
    for ours, theirs in ((keyword.ExactMatcher, base["index/keyword"].ExactMatcher),
                         (backend.IndexedBackend, base["index/backend"].IndexedBackend),
                         (fts.KeywordSearch, base["index/fts"].KeywordSearch),
                         (vectors.ExactVectors, base["index/vectors"].ExactVectors)):
        for name, value in vars(theirs).items():
            if callable(value) and not name.startswith("__") and name in vars(ours):
                swaps.append((ours, name, vars(ours)[name], value))
    swaps.append((backend, "_identifier_candidates", backend._identifier_candidates,
                  base["index/backend"]._identifier_candidates))
    swaps.append((backend, "score_hits", fusion.score_hits, base["fusion"].score_hits))

    def use(side: str) -> None:
        for owner, name, this, baseline in swaps:
            setattr(owner, name, this if side == "this" else baseline)

    work = Path(tempfile.mkdtemp(prefix="search-ab-"))
    db = work / "store.sqlite"
    scale.build_store(db, args.n)
    queries = scale.make_queries(args.n, 400)
    mem, ws = scale.open_sqlite_memory(db, {q["text"]: q["vector"] for q in queries})
    for q in queries[:200]:
        mem.search(q["text"], max_results=10, min_score=0)
    cpu: dict[str, list[int]] = {"this": [], "baseline": []}
    timed = queries[200:]
    for p in range(args.passes):
        for i in range(0, len(timed), 10):
            for side in (("this", "baseline") if (i // 10 + p) % 2 else ("baseline", "this")):
                use(side)
                for q in timed[i:i + 10]:
                    t = time.thread_time_ns()
                    mem.search(q["text"], max_results=10, min_score=0)
                    cpu[side].append(time.thread_time_ns() - t)
    use("this")
    mem.close()
    shutil.rmtree(ws, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    figures = {side: (np.percentile(v, 25) / 1e6, np.percentile(v, 50) / 1e6) for side, v in cpu.items()}
    (t25, t50), (b25, b50) = figures["this"], figures["baseline"]
    print(f"N = {args.n:,}, {len(timed)} searches x {args.passes} passes, load {os.getloadavg()[0]:.1f}; thread CPU a search")
    print(f"p25 {t25:.3f} / {b25:.3f} ms ({t25 / b25:.3f}), p50 {t50:.3f} / {b50:.3f} ms ({t50 / b50:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
