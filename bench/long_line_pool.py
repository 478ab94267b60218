"""The worst case of the long-line reach (``LINE_PIECES_REACH``): every keyword candidate cites the same line.

One note whose single line holds ``--entries`` ledger entries (thousands of pieces, each holding ``ledger``) and
nothing else holding the word: a search for ``ledger`` finds its keyword candidates all citing that line, so
builtin-sqlite / faiss look down the keyword ranking up to 16 times the candidates for another line, find none, and
read every row they looked at. Run with this checkout's interpreter and the baseline's, side by side:

    python bench/long_line_pool.py --entries 200000
    /tmp/py-baseb13 bench/long_line_pool.py --entries 200000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=200_000)
    ap.add_argument("--provider", default="none")
    ap.add_argument("--backend", default=None)
    ap.add_argument("--searches", type=int, default=7)
    ap.add_argument("--max-results", type=int, default=6)
    args = ap.parse_args()

    from symi_memory import load_config, tools
    from symi_memory.manager import open_memory

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "memory").mkdir(parents=True)
        (ws / "memory" / "log.md").write_text(
            "# Log\n\n" + " ".join(f"ledger entry {i} settled" for i in range(args.entries)) + "\n")
        over: dict = {"agents": {"defaults": {"memorySearch": {"provider": args.provider}}}}
        if args.backend:
            over["plugins"] = {"slots": {"memory": args.backend}}
        cfg = load_config(None, state_dir=Path(tmp) / "state", overrides=over)
        with open_memory(cfg, workspace=ws, start=False) as mem:
            t0 = time.perf_counter()
            mem.sync()
            built = time.perf_counter() - t0
            walls, cpus = [], []
            for _ in range(args.searches):
                w, c = time.perf_counter(), time.thread_time()
                out = tools.memory_search(mem, {"query": "ledger", "maxResults": args.max_results, "minScore": 0})
                cpus.append(time.thread_time() - c)
                walls.append(time.perf_counter() - w)
            chunks = mem.status().get("chunks")
    print(f"entries={args.entries} chunks={chunks} sync={built:.1f}s results={len(out['results'])} "
          f"search wall p50={statistics.median(walls) * 1000:.1f} ms max={max(walls) * 1000:.1f} ms "
          f"cpu p50={statistics.median(cpus) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
