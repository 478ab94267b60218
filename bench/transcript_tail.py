"""Per-sync time of a 10 MB session transcript that keeps growing by small appends, this tree against a baseline.

    python bench/transcript_tail.py [--mb 10] [--appends 20] [--baseline-python /tmp/py-baseb96] [--write docs]
        [--limit BYTES] [--backend postgres --pg-dir /tmp/pg-main]

Writes a transcript of ``--mb`` MB (user and assistant messages of 20-200 words, every third line a tool result of
~2 KB), indexes it once (builtin-sqlite, the deterministic ``hash`` provider, ``chunking.units`` lines), then
appends 3 lines and syncs (an explicit sync, which takes every new line), ``--appends`` times; then appends 60
lines (past the watcher's ``deltaMessages`` of 50) and runs an ``interval`` sync, 3 times. Each interpreter runs
in its own child process on its own copy of the same files, one after the other in this run. ``--profile`` adds,
per child, where one 3-line sync's time goes (cProfile, cumulative seconds of the steps). ``--write`` replaces the
section in ``<folder>/benchmarks.md``.

``--limit`` sets ``sync.maxFileBytes`` (below the transcript's message text: the window of newest messages moves at
every sync). ``--backend postgres`` indexes into the server ``.ci/start-postgres.sh`` started in ``--pg-dir``
(a schema of each child's own, dropped after), the plugin taken from each tree's ``contrib/``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

WORDS = ("garden harbour router backup standup sourdough knee dentist ticket deploy pipeline beagle otter weir "
         "kumquat quokka").split()
TITLE = "Session transcripts: a growing 10 MB transcript, per sync"
#: Functions whose cumulative time ``--profile`` reports: (label, file suffix, function name).
STEPS = (
    ("read + parse + redact (_load_transcript; this tree: + chunking)", "indexer.py", "_load_transcript"),
    ("  of which redaction", "redact.py", "redact"),
    ("chunking (+ units) apart (_chunk)", "indexer.py", "_chunk"),
    ("embedding-cache lookups + embedding", "indexer.py", "_embed"),
    ("DB writes (replace_files)", ("writes.py", "store.py"), "replace_files"),
    ("whole sync", "indexer.py", "sync"),
)


def line(rng: random.Random, n: int) -> str:
    if n % 3 == 2:
        return json.dumps({"type": "tool_result", "id": n, "output": "ls -la output line\n" * 100})
    role = "user" if n % 3 == 0 else "assistant"
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 200)))
    return json.dumps({"type": "message", "timestamp": 1_700_000_000 + n, "message": {"role": role, "content": text}})


def child(workdir: Path, mb: float, appends: int, profile: bool, limit: int | None = None,
          pg_dir: str | None = None) -> dict[str, Any]:
    os.environ.setdefault("SYMI_MEMORY_PLUGINS", "symi_memory.testing.plugin")
    schema = dsn = None
    if pg_dir:
        import symi_memory

        # The plugin of the tree whose core this child runs.
        sys.path.insert(0, str(Path(symi_memory.__file__).resolve().parents[2] / "contrib" / "symi-memory-postgres"))
        os.environ["SYMI_MEMORY_PLUGINS"] += ",symi_memory_postgres.hooks"
        port = int((Path(pg_dir) / "port").read_text().strip())
        dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
        schema = f"bench_tail_{os.getpid()}"
    from symi_memory import load_config

    rng = random.Random(34)
    ws = workdir / "ws"
    ws.mkdir(parents=True)
    (ws / "MEMORY.md").write_text("- the otter lives by the weir\n", encoding="utf-8")
    sessions = workdir / "state" / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    path = sessions / "s.jsonl"
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        while fh.tell() < mb * 1_000_000:
            fh.write(line(rng, n) + "\n")
            n += 1
    ms: dict[str, Any] = {"provider": "hash", "sources": ["memory", "sessions"], "experimental": {"sessionMemory": True},
                          "sync": {"watch": False, **({"maxFileBytes": limit} if limit else {})}}
    overrides: dict[str, Any] = {"agents": {"defaults": {"memorySearch": ms}}}
    if schema:
        ms["store"] = {"postgres": {"dsn": dsn, "schema": schema}}
        overrides["plugins"] = {"slots": {"memory": "postgres"}}
    cfg = load_config(None, state_dir=workdir / "state", overrides=overrides)
    out: dict[str, Any] = {"lines": n, "bytes": path.stat().st_size}
    try:
        return _measure(cfg, ws, grow_to(path, rng, n), appends, profile, out)
    finally:
        if schema:
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def grow_to(path: Path, rng: random.Random, n: int) -> Any:
    """A function appending ``count`` lines to the transcript."""
    state = {"n": n}

    def grow(count: int) -> None:
        with path.open("a", encoding="utf-8") as fh:
            for _ in range(count):
                fh.write(line(rng, state["n"]) + "\n")
                state["n"] += 1
    return grow


def _measure(cfg: Any, ws: Path, grow: Any, appends: int, profile: bool, out: dict[str, Any]) -> dict[str, Any]:
    from symi_memory.manager import open_memory

    with open_memory(cfg, workspace=ws, start=False) as mem:
        t = time.perf_counter()
        mem.sync(reason="manual")
        out["first"] = time.perf_counter() - t
        small, chunks = [], []
        for _ in range(appends):
            grow(3)
            t = time.perf_counter()
            report = mem.sync(reason="manual")
            small.append(time.perf_counter() - t)
            chunks.append(report.chunks_written)
        paced = []
        for _ in range(3):
            grow(60)
            t = time.perf_counter()
            mem.sync(reason="interval")
            paced.append(time.perf_counter() - t)
        st = mem.status()
        out.update(small=small, chunks=chunks, paced=paced, status_chunks=st["chunks"], partial=bool(st["partial"]))
        if profile:
            import cProfile
            import pstats

            grow(3)
            prof = cProfile.Profile()
            prof.enable()
            mem.sync(reason="manual")
            prof.disable()
            stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
            steps = {}
            for label, suffix, name in STEPS:
                steps[label] = sum(v[3] for (file, _, func), v in stats.items() if file.endswith(suffix) and func == name)
            # (the baseline reads in read_transcript, called by _load_transcript or, before, by _chunk's caller)
            out["profile"] = steps
    return out


def run(python: str, mb: float, appends: int, profile: bool, limit: int | None = None,
        pg_dir: str | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="symi-tail-") as tmp:
        cmd = [python, __file__, "--child", tmp, "--mb", str(mb), "--appends", str(appends)]
        if profile:
            cmd.append("--profile")
        if limit:
            cmd += ["--limit", str(limit)]
        if pg_dir:
            cmd += ["--backend", "postgres", "--pg-dir", pg_dir]
        env = dict(os.environ)
        if python == sys.executable:
            root = Path(__file__).resolve().parent.parent
            env["PYTHONPATH"] = f"{root / 'core'}{os.pathsep}{root / 'plugins'}"
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def table(rows: dict[str, dict[str, Any]]) -> str:
    names = list(rows)
    first = next(iter(rows.values()))
    counts = ", ".join(f"{name} {len(r['small'])}" for name, r in rows.items())
    lines = [f"Transcript: {first['bytes'] / 1e6:.1f} MB, {first['lines']} JSONL lines (two thirds messages); "
             f"syncs after 3-line appends: {counts}; then 3 `interval` syncs after 60-line appends each"
             f"{' (its messages past sync.maxFileBytes: only the newest indexed)' if first.get('partial') else ''}.", "",
             "| per sync (s) | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]

    def row(label: str, values: list[str]) -> None:
        lines.append(f"| {label} | " + " | ".join(values) + " |")

    row("first index (full build)", [f"{r['first']:.2f}" for r in rows.values()])
    row("3-line append, median", [f"{statistics.median(r['small']):.3f}" for r in rows.values()])
    row("3-line append, max", [f"{max(r['small']):.3f}" for r in rows.values()])
    row("chunks written per 3-line sync, median", [f"{statistics.median(r['chunks']):.0f}" for r in rows.values()])
    row("60-line append (`interval`), median", [f"{statistics.median(r['paced']):.3f}" for r in rows.values()])
    if all("profile" in r for r in rows.values()):
        lines += ["", "Where one 3-line sync's time goes (cProfile, cumulative s; profiling adds overhead):", "",
                  "| step | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
        for label, _, _ in STEPS:
            row(label, [f"{r['profile'][label]:.3f}" for r in rows.values()])
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=10.0)
    ap.add_argument("--appends", type=int, default=20)
    ap.add_argument("--baseline-python", default=None)
    ap.add_argument("--baseline-appends", type=int, default=5, help="3-line syncs for the baseline (each is slow)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--write", default=None, help="folder of benchmarks.md to write the section into")
    ap.add_argument("--note", default="")
    ap.add_argument("--baseline-label", default="baseline (21bf0f3)")
    ap.add_argument("--limit", type=int, default=None, help="sync.maxFileBytes (default: the config's, 10 MB)")
    ap.add_argument("--backend", choices=("builtin-sqlite", "postgres"), default="builtin-sqlite")
    ap.add_argument("--pg-dir", default=os.environ.get("SYMI_TEST_PG_DIR"),
                    help="with --backend postgres: the folder of a server .ci/start-postgres.sh started")
    ap.add_argument("--child", default=None)
    args = ap.parse_args()
    pg_dir = args.pg_dir if args.backend == "postgres" else None
    if args.backend == "postgres" and not pg_dir:
        ap.error("--backend postgres needs --pg-dir (or SYMI_TEST_PG_DIR)")
    if args.child:
        print(json.dumps(child(Path(args.child), args.mb, args.appends, args.profile, args.limit, pg_dir)))
        return 0
    rows: dict[str, dict[str, Any]] = {}
    if args.baseline_python:
        rows[args.baseline_label] = run(args.baseline_python, args.mb, args.baseline_appends, args.profile,
                                        args.limit, pg_dir)
    rows["this tree"] = run(sys.executable, args.mb, args.appends, args.profile, args.limit, pg_dir)
    body = table(rows) + (f"\n\n{args.note}" if args.note else "")
    print(body)
    if args.write:
        from scale import write_section

        title = TITLE
        if args.limit:
            title += f", past sync.maxFileBytes = {args.limit}"
        if pg_dir:
            title += ", postgres"
        write_section(Path(args.write) / "benchmarks.md", title, "Measured by `bench/transcript_tail.py`.\n\n" + body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
