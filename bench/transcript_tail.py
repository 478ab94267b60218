"""Per-sync time of a 10 MB session transcript that keeps growing by small appends, this tree against a baseline.

    python bench/transcript_tail.py [--mb 10] [--appends 20] [--baseline-python /tmp/py-baseb96] [--write docs]

Writes a transcript of ``--mb`` MB (user and assistant messages of 20-200 words, every third line a tool result of
~2 KB), indexes it once (builtin-sqlite, the deterministic ``hash`` provider, ``chunking.units`` lines), then
appends 3 lines and syncs (an explicit sync, which takes every new line), ``--appends`` times; then appends 60
lines (past the watcher's ``deltaMessages`` of 50) and runs an ``interval`` sync, 3 times. Each interpreter runs
in its own child process on its own copy of the same files, one after the other in this run. ``--profile`` adds,
per child, where one 3-line sync's time goes (cProfile, cumulative seconds of the steps). ``--write`` replaces the
section in ``<folder>/benchmarks.md``.
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
    ("read + parse + redact (read_transcript)", "sessions.py", "read_transcript"),
    ("  of which redaction", "redact.py", "redact"),
    ("chunking (+ units)", "indexer.py", "_chunk"),
    ("embedding-cache lookups + embedding", "indexer.py", "_embed"),
    ("DB writes (replace_files)", "writes.py", "replace_files"),
    ("whole sync", "indexer.py", "sync"),
)


def line(rng: random.Random, n: int) -> str:
    if n % 3 == 2:
        return json.dumps({"type": "tool_result", "id": n, "output": "ls -la output line\n" * 100})
    role = "user" if n % 3 == 0 else "assistant"
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 200)))
    return json.dumps({"type": "message", "timestamp": 1_700_000_000 + n, "message": {"role": role, "content": text}})


def child(workdir: Path, mb: float, appends: int, profile: bool) -> dict[str, Any]:
    os.environ.setdefault("SYMI_MEMORY_PLUGINS", "symi_memory.testing.plugin")
    from symi_memory import load_config
    from symi_memory.manager import open_memory

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
    cfg = load_config(None, state_dir=workdir / "state", overrides={"agents": {"defaults": {"memorySearch": {
        "provider": "hash", "sources": ["memory", "sessions"], "experimental": {"sessionMemory": True},
        "sync": {"watch": False}}}}})
    out: dict[str, Any] = {"lines": n, "bytes": path.stat().st_size}

    def grow(count: int) -> None:
        nonlocal n
        with path.open("a", encoding="utf-8") as fh:
            for _ in range(count):
                fh.write(line(rng, n) + "\n")
                n += 1

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
        out.update(small=small, chunks=chunks, paced=paced, status_chunks=mem.status()["chunks"])
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
            out["profile"] = steps
    return out


def run(python: str, mb: float, appends: int, profile: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="symi-tail-") as tmp:
        cmd = [python, __file__, "--child", tmp, "--mb", str(mb), "--appends", str(appends)]
        if profile:
            cmd.append("--profile")
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
             f"syncs after 3-line appends: {counts}; then 3 `interval` syncs after 60-line appends each.", "",
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
    ap.add_argument("--child", default=None)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child), args.mb, args.appends, args.profile)))
        return 0
    rows: dict[str, dict[str, Any]] = {}
    if args.baseline_python:
        rows["baseline (b968017)"] = run(args.baseline_python, args.mb, args.baseline_appends, args.profile)
    rows["this tree"] = run(sys.executable, args.mb, args.appends, args.profile)
    body = table(rows) + (f"\n\n{args.note}" if args.note else "")
    print(body)
    if args.write:
        from scale import write_section

        write_section(Path(args.write) / "benchmarks.md", TITLE, "Measured by `bench/transcript_tail.py`.\n\n" + body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
