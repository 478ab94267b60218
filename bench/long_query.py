"""A document pasted as the query (tens of thousands of distinct words): how long one search takes, per backend.

The core cuts every search's query to its first 1,024 distinct content words
(``symi_memory.index.analysis.capped_query``); before, only builtin-sqlite cut
its own, and postgres probed every word's document frequency. Run it with this
checkout's interpreter and the baseline's, side by side:

    python bench/long_query.py --dsn "host=127.0.0.1 port=PORT user=postgres dbname=postgres"
    /tmp/py-baseb13 bench/long_query.py --dsn ...

The postgres plugin is pip-installed (offline) from the contrib/ beside the
``symi_memory`` that runs, so each interpreter runs its own copy.
"""

from __future__ import annotations

import argparse
import importlib
import random
import string
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any


def plugin(work: Path) -> None:
    import symi_memory

    contrib = Path(symi_memory.__file__).resolve().parents[2] / "contrib" / "symi-memory-postgres"
    target = work / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation",
                    "--disable-pip-version-check", "--target", str(target), str(contrib)], check=True)
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()


def workspace(root: Path, notes: int) -> Path:
    rng = random.Random(3)
    vocab = ["".join(rng.choice(string.ascii_lowercase) for _ in range(6)) for _ in range(5000)]
    (root / "memory").mkdir(parents=True)
    for i in range(notes):
        body = "\n".join(f"- {' '.join(rng.choices(vocab, k=12))}" for _ in range(6))
        (root / "memory" / f"n{i:05d}.md").write_text(f"# Note {i}\n\n{body}\n", encoding="utf-8")
    (root / "memory" / "needle.md").write_text("# Feb\n\n- The porcupine enclosure was repaired.\n", encoding="utf-8")
    return root


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", help="a running PostgreSQL with pgvector (postgres is skipped without)")
    ap.add_argument("--notes", type=int, default=2000)
    ap.add_argument("--words", type=int, default=40_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from symi_memory import load_config
    from symi_memory.manager import open_memory

    rng = random.Random(7)
    pasted = " ".join(sorted({"".join(rng.choice(string.ascii_lowercase) for _ in range(8))
                              for _ in range(args.words)}))
    query = f"porcupine {pasted}"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ws = workspace(work / "ws", args.notes)
        backends: list[tuple[str, dict[str, Any]]] = [("builtin-sqlite", {})]
        if args.dsn:
            plugin(work)
            schema = f"bench_{uuid.uuid4().hex[:8]}"
            backends.append(("postgres", {"plugins": {"slots": {"memory": "postgres"}}, "agents": {"defaults": {
                "memorySearch": {"store": {"postgres": {"dsn": args.dsn, "schema": schema}}}}}}))
        for name, extra in backends:
            overrides = {**extra, "agents": {"defaults": {"memorySearch": {
                **extra.get("agents", {}).get("defaults", {}).get("memorySearch", {}),
                "provider": "none", "sync": {"watch": False}}}}}
            cfg = load_config(None, state_dir=work / f"state-{name}", overrides=overrides)
            with open_memory(cfg, workspace=ws, agent_id="main", start=False) as mem:
                mem.sync()
                if name == "postgres":
                    # As autovacuum does within a minute of a build: without statistics the server probes each word
                    # by a scan of the agent's rows (9 s for 200 words over 2,000 notes), whatever the cap.
                    # (The sync does it itself since pg36; kept so that older checkouts compare alike.)
                    import psycopg

                    with psycopg.connect(args.dsn, autocommit=True) as conn:
                        conn.execute(f"ANALYZE {schema}.chunks")
                times: list[float] = []
                for _ in range(args.rounds):
                    t0, c0 = time.perf_counter(), time.process_time()
                    resp = mem.search(query, min_score=0)
                    times.append(time.perf_counter() - t0)
                    cpu = time.process_time() - c0
                top = resp.results[0].path if resp.results else None
                print(f"{name}: {args.notes} notes, {args.words} words: best {min(times):.2f} s wall "
                      f"(last {cpu:.2f} s CPU here), top={top}, warnings={len(resp.warnings)}", flush=True)


if __name__ == "__main__":
    main()
