"""The postgres backend's first-sync build rate, split into the row write and the HNSW build.

    python bench/postgres_build_rate.py --n 20000,100000 [--sqlite]

A throwaway server (``.ci/start-postgres.sh``); the rows are bench/postgres_scale.py's
(same texts and 384-d vectors as bench/scale.py), written as a first full sync writes
an agent: one transaction, then the HNSW index built ``CONCURRENTLY``. ``--sqlite``
also builds builtin-sqlite over the same rows in the same run (the baseline). Used to
extrapolate the 1M build (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import postgres_scale as ps  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="20000,100000")
    ap.add_argument("--sqlite", action="store_true", help="also build builtin-sqlite over the same rows")
    args = ap.parse_args()
    ps.ensure_plugin(Path(tempfile.mkdtemp(prefix="bench-pg-site-")))
    import psycopg

    from symi_memory_postgres.store import PgStore, ensure_schema

    split: dict[str, float] = {}

    class Timed(PgStore):
        def _ensure_hnsw(self) -> None:  # the write transaction committed: the HNSW build starts
            split["write_done"] = time.perf_counter()
            super()._ensure_hnsw()

    d = tempfile.mkdtemp(prefix="bench-pg-")
    script = HERE.parent / ".ci" / "start-postgres.sh"
    port = subprocess.run(["bash", str(script), "start", d], capture_output=True, text=True, check=True).stdout.split()[-1]
    dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
    try:
        for n in (int(x) for x in args.n.split(",")):
            rows = list(ps.rows_for(n))
            with psycopg.connect(dsn, autocommit=True) as conn:
                schema = f"rate_{n}"
                ensure_schema(conn, schema)
                store = Timed(conn=conn, schema=schema, owner="bench")
                start = time.perf_counter()
                store.build_full(iter(rows), skipped={}, meta={})
                end = time.perf_counter()
            out = {"n": n, "write_s": round(split["write_done"] - start, 1), "hnsw_s": round(end - split["write_done"], 1),
                   "write_rows_per_s": round(n / (split["write_done"] - start)), "total_s": round(end - start, 1)}
            if args.sqlite:
                from scale import build_store

                out["builtin_sqlite_s"] = round(build_store(Path(tempfile.mkdtemp()) / "idx.sqlite", n)["seconds"], 1)
            print(json.dumps(out), flush=True)
    finally:
        subprocess.run(["bash", str(script), "stop", d], capture_output=True)


if __name__ == "__main__":
    main()
