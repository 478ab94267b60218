"""Searches right after a first sync to postgres: before autovacuum analyses the new rows, the planner has none.

A first sync writes an agent's rows into tables the server has no statistics
of until autovacuum's next round (``autovacuum_naptime``, a minute by
default). Without them it probes each query word's document frequency by a
scan of the agent's rows instead of the GIN index. The plugin now runs
``ANALYZE`` on the tables a sync changed substantially (or that have no
statistics). This script syncs ``--notes`` notes into a fresh schema, then at
once runs searches (short queries and one of ``--long`` words) and prints the
p50 and max wall time of each kind, and whether the chunks table has
statistics when the first search runs. With ``--baseline PYTHON`` it runs the
same in that interpreter too (its own copy of the plugin), side by side:

    python bench/postgres_first_sync.py --dsn "host=127.0.0.1 port=PORT user=postgres dbname=postgres" \
        --baseline /tmp/py-baseb13
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import string
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from long_query import plugin  # noqa: E402


def workspace(root: Path, notes: int, vocab: list[str], seed: int = 3) -> None:
    rng = random.Random(seed)
    (root / "memory").mkdir(parents=True)
    for i in range(notes):
        body = "\n".join(f"- {' '.join(rng.choices(vocab, k=12))}" for _ in range(6))
        (root / "memory" / f"n{i:05d}.md").write_text(f"# Note {i}\n\n{body}\n", encoding="utf-8")


def run(args: argparse.Namespace) -> dict[str, object]:
    import psycopg

    from symi_memory import load_config
    from symi_memory.manager import open_memory

    rng = random.Random(3)
    vocab = ["".join(rng.choice(string.ascii_lowercase) for _ in range(6)) for _ in range(5000)]
    qrng = random.Random(11)
    short = [" ".join(qrng.choices(vocab, k=qrng.randint(2, 6))) for _ in range(args.searches)]
    # A pasted text: words the notes mostly do not hold, and a few they do (a query of only the notes' own words
    # matches nearly every chunk, and its time goes to scoring them all, statistics or not).
    long_q = " ".join(["".join(qrng.choice(string.ascii_lowercase) for _ in range(8)) for _ in range(args.long - 2)]
                      + qrng.sample(vocab, 2))
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        workspace(work / "ws", args.notes, vocab)
        plugin(work)
        schema = f"bench_{uuid.uuid4().hex[:8]}"
        overrides = {"plugins": {"slots": {"memory": "postgres"}}, "agents": {"defaults": {"memorySearch": {
            "provider": "none", "sync": {"watch": False},
            "store": {"postgres": {"dsn": args.dsn, "schema": schema}}}}}}
        cfg = load_config(None, state_dir=work / "state", overrides=overrides)
        try:
            if args.other_notes:  # another agent's rows already there, analysed: this agent's first sync joins them
                workspace(work / "other", args.other_notes, vocab, seed=4)
                with open_memory(cfg, workspace=work / "other", agent_id="other", start=False) as mem:
                    mem.sync()
                with psycopg.connect(args.dsn, autocommit=True) as conn:
                    conn.execute(f"ANALYZE {schema}.chunks, {schema}.files")
            with open_memory(cfg, workspace=work / "ws", agent_id="main", start=False) as mem:
                t0 = time.perf_counter()
                mem.sync()
                out["sync_s"] = time.perf_counter() - t0
                with psycopg.connect(args.dsn, autocommit=True) as conn:
                    out["stats"] = conn.execute("SELECT count(*) > 0 FROM pg_stats WHERE schemaname = %s "
                                                "AND tablename = 'chunks'", (schema,)).fetchone()[0]
                for kind, queries in (("short", short), ("long", [long_q] * args.rounds)):
                    times, warned = [], 0
                    for q in queries:
                        t0 = time.perf_counter()
                        resp = mem.search(q, min_score=0)
                        times.append(time.perf_counter() - t0)
                        warned += bool(resp.warnings)
                    out[kind] = {"p50": statistics.median(times), "max": max(times), "n": len(times), "warned": warned}
        finally:
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", required=True, help="a running PostgreSQL with pgvector")
    ap.add_argument("--notes", type=int, default=2000)
    ap.add_argument("--searches", type=int, default=30, help="short queries (2-6 words) right after the sync")
    ap.add_argument("--long", type=int, default=200, help="words of the long query")
    ap.add_argument("--rounds", type=int, default=3, help="times the long query runs")
    ap.add_argument("--other-notes", type=int, default=0,
                    help="another agent's notes synced (and analysed) first, in the same tables")
    ap.add_argument("--baseline", help="another interpreter to run the same in, side by side")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.json:
        print(json.dumps(run(args)))
        return
    runs = [("this checkout", sys.executable)] + ([("baseline", args.baseline)] if args.baseline else [])
    for label, python in runs:
        cmd = [python, __file__, "--json", "--dsn", args.dsn, "--notes", str(args.notes), "--searches",
               str(args.searches), "--long", str(args.long), "--rounds", str(args.rounds), "--other-notes", str(args.other_notes)]
        res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
        print(f"{label:14s} sync {res['sync_s']:.1f} s, chunks has statistics at first search: {res['stats']}")
        for kind in ("short", "long"):
            r = res[kind]
            print(f"  {kind:5s} x{r['n']:<3d} p50 {r['p50'] * 1000:8.1f} ms   max {r['max'] * 1000:8.1f} ms   "
                  f"answers with warnings {r['warned']}", flush=True)


if __name__ == "__main__":
    main()
