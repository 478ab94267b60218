"""What unit vectors (``chunking.units``) cost: index time, disk, vectors per chunk, search time (issue 10).

Indexes each dataset with the offline ``local`` provider once per ``chunking.units`` value, one after
the other in the same run (so the figures are side by side on the same machine load), each in a
throwaway state dir with an empty embedding cache:

    python bench/unit_vectors.py [--datasets devmem,convmem] [--units off,lines]

Prints, per dataset and setting: sync seconds, embeddings computed, chunks, unit vectors, vectors
per chunk, index file size (after a WAL checkpoint) and the median search time over the queries.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / "bench" / "datasets"


def measure(dataset: Path, units: str) -> dict[str, float]:
    from symi_memory import load_config
    from symi_memory.evaluation import _throwaway_config, load_queries
    from symi_memory.manager import open_memory

    queries = load_queries(dataset / "queries.jsonl")
    with tempfile.TemporaryDirectory(prefix="symi-units-") as tmp:
        cfg = load_config(None, state_dir=tmp, overrides={"agents": {"defaults": {"memorySearch": {
            "provider": "local", "chunking": {"units": units}}}}})
        with open_memory(_throwaway_config(cfg, Path(tmp)), workspace=dataset / "workspace", start=False) as mem:
            mem.search("warm up the model")  # model load is not index time
            started = time.perf_counter()
            report = mem.sync(reason="bench")
            seconds = time.perf_counter() - started
            backend = mem._require()
            store = backend.store
            chunks = store.chunk_count()
            unit_count = store.unit_count()
            store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            size = os.path.getsize(store.path)
            times = []
            for q in queries:
                t0 = time.perf_counter()
                mem.search(q["query"])
                times.append((time.perf_counter() - t0) * 1000)
    return {"sync_s": seconds, "computed": report.embeddings_computed, "chunks": chunks, "units": unit_count,
            "per_chunk": (chunks + unit_count) / max(1, chunks), "mb": size / 1e6,
            "p50_ms": statistics.median(times)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="devmem,convmem")
    ap.add_argument("--units", default="off,lines")
    args = ap.parse_args()
    print("| dataset | chunking.units | sync s | embeddings | chunks | unit vectors | vectors per chunk | index MB "
          "| search p50 ms |\n|---|---|---|---|---|---|---|---|---|")
    for name in args.datasets.split(","):
        for units in args.units.split(","):
            m = measure(DATASETS / name, units)
            print(f"| {name} | {units} | {m['sync_s']:.1f} | {m['computed']} | {m['chunks']} | {m['units']} "
                  f"| {m['per_chunk']:.1f} | {m['mb']:.2f} | {m['p50_ms']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
