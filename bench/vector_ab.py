"""This checkout's vector side against a baseline's, in one process: whole searches, alternating blocks.

On a shared host the time of one search moves by more between runs (and between the two children of
``search_steps.py``) than a change of a few percent. Here one process opens a 10k-style store (``bench/scale.py``'s
``build_store``, or ``bench/search_steps.py --build``) and runs the same searches through ``MemoryManager.search``
with the vector side's search functions (``ExactVectors._search_kept``, ``ExactVectors.rescore`` and
``_one_thread_search``) taken from this checkout or from the baseline's ``index/vectors.py`` (loaded beside it, the
rest of the package this checkout's), switching every 10 searches in alternating order, so that both see the same
load, caches and rows. Reports each side's thread-CPU p25 and p50 per search and whether every response of the
first pass was equal on both sides.

    python bench/vector_ab.py STORE BASELINE/core/symi_memory/index/vectors.py [--passes 5]
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

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("baseline_vectors")
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--passes", type=int, default=5)
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    work = Path(tempfile.mkdtemp(prefix="vector-ab-"))
    db = Path(shutil.copy(args.store, work / "store.sqlite"))
    queries = scale.make_queries(args.n, 200)
    mem, _ = scale.open_sqlite_memory(db, {q["text"]: q["vector"] for q in queries})
    import symi_memory.index.vectors as this

    spec = importlib.util.spec_from_file_location("symi_memory.index._baseline_vectors", args.baseline_vectors)
    assert spec is not None and spec.loader is not None
    base = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(base)
    sides = {"this": (this.ExactVectors._search_kept, this.ExactVectors.rescore, this._one_thread_search),
             "baseline": (base.ExactVectors._search_kept, base.ExactVectors.rescore, base._one_thread_search)}

    def use(label: str) -> None:
        this.ExactVectors._search_kept, this.ExactVectors.rescore, this._one_thread_search = sides[label]  # type: ignore[method-assign]

    for q in queries:  # warm: rows, term counts, the scan copy
        mem.search(q["text"], max_results=10, min_score=0)
    cpu: dict[str, list[int]] = {"this": [], "baseline": []}
    answers: dict[str, list[object]] = {"this": [], "baseline": []}
    for p in range(args.passes):
        for i in range(0, len(queries), 10):
            for label in ("this", "baseline") if (p + i // 10) % 2 == 0 else ("baseline", "this"):
                use(label)
                for q in queries[i : i + 10]:
                    t = time.thread_time_ns()
                    got = mem.search(q["text"], max_results=10, min_score=0)
                    cpu[label].append(time.thread_time_ns() - t)
                    if p == 0:
                        answers[label].append(got)
    use("this")
    mem.close()
    shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"{args.passes} passes of {len(queries)} searches each side, load average {load:.1f}; "
          f"responses equal: {answers['this'] == answers['baseline']}")
    a, b = np.array(cpu["this"]), np.array(cpu["baseline"])
    for label, v in (("this", a), ("baseline", b)):
        print(f"{label}: thread CPU p25 {np.percentile(v, 25) / 1e6:.3f} ms, p50 {np.percentile(v, 50) / 1e6:.3f} ms")
    print(f"ratio this / baseline: p25 {np.percentile(a, 25) / np.percentile(b, 25):.3f}, "
          f"p50 {np.percentile(a, 50) / np.percentile(b, 50):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
