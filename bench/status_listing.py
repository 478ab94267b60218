"""Time ``status()`` of a builtin-sqlite index of N memory files, this checkout against a baseline, in one run.

``status()`` lists the memory files (for ``dirty``) and, since the unreadable-memory warnings, names what cannot be
listed or read from that same listing. Each side runs in child processes of its own (the baseline from
``git archive <ref>``), alternating, on one workspace and index each side builds first (``provider = "none"``).

    python bench/status_listing.py [--files N] [--rounds R] [--baseline-ref REF] [--dsn DSN] [--json]

With ``--dsn`` the index is the contrib postgres backend's on that server (a schema of its own per side, dropped
after), its package taken from each side's tree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, time
from pathlib import Path
from symi_memory import load_config
from symi_memory.manager import open_memory
root, files, rounds, dsn = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ws = root / "ws"
if not ws.exists():
    for i in range(files):
        p = ws / "memory" / f"d{i // 500}" / f"n{i}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"- note {i} about the heron number {i}\\n", encoding="utf-8")
ms = {"provider": "none", "sync": {"watch": False}}
over = {"agents": {"defaults": {"memorySearch": ms}}}
if dsn:
    ms["store"] = {"postgres": {"dsn": dsn, "schema": "bench_status_" + root.name.replace("-", "_")}}
    over["plugins"] = {"slots": {"memory": "postgres"}}
cfg = load_config(None, state_dir=root / "state", overrides=over)
with open_memory(cfg, workspace=ws, start=False) as mem:
    mem.sync()
    mem.status()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        mem.status()
        times.append(time.perf_counter() - t)
print(json.dumps(times))
"""


def run(tree: Path, root: Path, files: int, rounds: int, dsn: str) -> list[float]:
    paths = [tree / "core", tree / "plugins", *([tree / "contrib" / "symi-memory-postgres"] if dsn else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, paths))}
    if dsn:  # the plugin from the tree, as its entry point names it
        env["SYMI_MEMORY_PLUGINS"] = "symi_memory_postgres.hooks"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(root), str(files), str(rounds), dsn], capture_output=True,
                          text=True, env=env, timeout=1800)
    if proc.returncode:
        raise SystemExit(f"{tree}: {proc.stderr[-2000:]}")
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def drop_schemas(dsn: str, schemas: list[str]) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=5, help="child processes per side (each times 10 status calls)")
    ap.add_argument("--baseline-ref", default="main")
    ap.add_argument("--dsn", default="", help="time the contrib postgres backend on this server instead")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="symi-status-bench-") as tmp:
        base = Path(tmp) / "baseline"
        base.mkdir()
        trees = ["core", "plugins", *(["contrib/symi-memory-postgres"] if args.dsn else [])]
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.baseline_ref, *trees],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        sides = {"baseline": base, "this": REPO}
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(args.rounds):
            for name, tree in sides.items():
                times[name] += run(tree, Path(tmp) / name, args.files, 10, args.dsn)
        if args.dsn:
            drop_schemas(args.dsn, [f"bench_status_{name}" for name in sides])
    out = {name: {"median_ms": round(statistics.median(t) * 1000, 1), "calls": len(t)} for name, t in times.items()}
    out["ratio"] = round(out["this"]["median_ms"] / out["baseline"]["median_ms"], 2)  # type: ignore[index]
    backend = "postgres" if args.dsn else "builtin-sqlite"
    if args.json:
        print(json.dumps({"files": args.files, "backend": backend, "baselineRef": args.baseline_ref, **out}))
    else:
        print(f"{backend} status() on {args.files} files: baseline ({args.baseline_ref}) {out['baseline']['median_ms']} ms, "
              f"this {out['this']['median_ms']} ms, ratio {out['ratio']}")


if __name__ == "__main__":
    main()
