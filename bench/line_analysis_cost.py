"""What supersession's stored line analysis costs an index build, and proof that its bytes do not change.

    python bench/line_analysis_cost.py [--baseline-python /work/main/.venv/bin/python] [--repeat 3] [--json]

Every chunk an index writes gets ``symi_memory.supersession.line_analysis(path, start_line, text)``, stored
beside it (``chunks.lines``). This times that call, in CPU seconds (``time.process_time``) of a child process
per interpreter, on four corpora:

- ``scale``: the chunks of ``bench/scale.py``'s store (60 words of a cluster's vocabulary, one line each),
  the first 20,000 of its 100k;
- ``mixed``: 20,000 chunks of 1-12 lines drawn from the devmem and convmem notes and from templates of
  what the analysis looks at (ISO and month dates, plans, clock times, quantities with units, versions,
  past states, change words, "History" headings), in random letter case, some with non-ASCII letters and
  digits (the four letters that match ASCII ones when case is ignored: İ ı ſ K; Arabic-Indic digits),
  under dated and undated paths;
- ``devmem`` and ``convmem``: every chunk of the two benchmark workspaces (bench/datasets), chunked as
  the indexer does (400 tokens, 80 overlap).

``--store N`` also times what the analysis adds to an index build: ``bench/scale.py``'s store of N chunks
(precomputed vectors, so the time is the store write) written by each interpreter, in CPU seconds of the
child (user + system), beside the same build by this checkout with the analysis left out (``lines`` NULL),
the floor both share; what each adds is its time above that floor.

The corpora are written once, so both interpreters analyse the same chunks, and both children run with
``PYTHONHASHSEED=0``: the stored encoding joins Python sets, whose order follows the process's string
hashes, so only under one seed can two processes' bytes be compared. Each child reports the sha256 of all
its analyses in order; the table says whether the baseline's (``--baseline-python``, a venv of another
checkout) and this checkout's are identical. Each child's time is the best of ``--repeat`` passes over a
corpus (the first pass fills per-token caches, as the first chunks of a build do). The two interpreters' children alternate
(``--rounds``), so host load hits both alike.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATASETS = HERE / "datasets"
CORPUS_SIZE = 20_000


def dataset_chunks(name: str) -> list[tuple[str, int, str]]:
    from symi_memory.chunking import chunk_text

    root = DATASETS / name / "workspace"
    out = []
    for p in sorted(root.rglob("*.md")):
        rel = p.relative_to(root).as_posix()
        for c in chunk_text(p.read_text(encoding="utf-8"), 400, 80):
            out.append((rel, c.start_line, c.text))
    return out


def scale_chunks(n: int) -> list[tuple[str, int, str]]:
    import numpy as np

    sys.path.insert(0, str(HERE))
    import scale

    _, labels, _ = scale.make_data(100_000)
    rng = np.random.default_rng(2)
    return [(f"memory/gen/{i // 50:06d}.md", i % 50 + 1, " ".join(scale.words(int(labels[i]), rng, 60)))
            for i in range(n)]


MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December", "Sept", "Jan"]
UNITS = ["kg", "ms", "%", "GB", "minutes", "IU", "mg", "EUR", "people", "x", "km", "", "", "h"]
TEMPLATES = [
    "- {date}: {words}",
    "{words} since {date}, {words}",
    "Until {date} the {word} was {ident}; now {ident2}",
    "Previous {word}: {words}",
    "{words} moved to {time} from {time2}",
    "{words} raised to {num} {unit} (was {num2} {unit})",
    "{words} is visiting from {date} to {date2}",
    "expected {date}; {words} {num},{num2} {word}",
    "{words} on {md}, then {md2}",
    "{Word} {words} in {early}{month} {year} {words}",
    "v{num}.{num2}.{num3} — {date}: {words}",
    "{words} {num}:{num2} and {num3}/{num2} {unit}",
    "No longer {words}; replaced by {ident}",
    "{words} swapped the {word} for {ident2} instead",
    "{ip} {ident} {words} {num}{unit}",
    "| {word} | {num} {unit} | {date} |",
    "{words}",
    "{words}",
]


def mixed_chunks(n: int, seed: int = 7) -> list[tuple[str, int, str]]:
    """Chunks mixing real note lines with lines made to reach every rule of the analysis."""
    rng = random.Random(seed)
    real = [ln for name in ("devmem", "convmem") for _, _, t in dataset_chunks(name)
            for ln in t.split("\n") if ln.strip()]
    vocab = sorted({w for ln in real for w in ln.split() if w.isalpha()})
    odd = ["İstanbul", "ınstead", "ſince", "Kelvin", "café", "naïve", "Zürich", "moved—", "→", "٢٠٢٦-٠٧-١٥",
           "１２", "ſtopped", "İNSTEAD", "ſwapped"]

    def date() -> str:
        return f"{rng.choice([2025, 2026, 2027, 1999])}-{rng.randint(1, 13):02d}-{rng.randint(1, 32):02d}"

    def words(k: int | None = None) -> str:
        k = k or rng.randint(1, 8)
        return " ".join(rng.choice(vocab) if rng.random() > 0.06 else rng.choice(odd) for _ in range(k))

    def fill(tpl: str) -> str:
        return tpl.format(
            date=date(), date2=date(), words=words(), word=rng.choice(vocab), Word=rng.choice(vocab).title(),
            ident=f"{rng.choice(vocab).lower()}-{rng.randint(1, 99)}.{rng.choice(['eu', 'home', 'lan'])}",
            ident2=f"CT_{rng.randint(100, 999)}", time=f"{rng.randint(0, 23):02d}:{rng.choice([0, 15, 30, 45]):02d}",
            time2=f"{rng.randint(0, 23):02d}:{rng.choice([0, 15, 30, 45]):02d}", num=rng.randint(0, 3000),
            num2=rng.randint(0, 99), num3=rng.randint(0, 9), unit=rng.choice(UNITS),
            md=f"{rng.randint(1, 12):02d}-{rng.randint(1, 31):02d}", md2=f"{rng.randint(1, 12):02d}-{rng.randint(1, 31):02d}",
            early=rng.choice(["", "early ", "mid-", "late ", "end of "]), month=rng.choice(MONTHS),
            year=rng.choice([2025, 2026, "0000"]), ip=".".join(str(rng.randint(0, 255)) for _ in range(4)))

    def case(s: str) -> str:
        r = rng.random()
        return s.upper() if r < 0.05 else s.lower() if r < 0.1 else s.title() if r < 0.15 else s

    out = []
    for _ in range(n):
        lines = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.08:
                lines.append(rng.choice(["## History", "## Current setup", "### Previously", f"## {date()}", "# Notes"]))
            elif r < 0.12:
                lines.append(rng.choice(["", "   ", "\t"]))
            elif r < 0.5:
                lines.append(case(rng.choice(real)))
            else:
                lines.append(("  " if rng.random() < 0.1 else "") + case(fill(rng.choice(TEMPLATES))))
        path = rng.choice(["MEMORY.md", f"memory/{date()}.md", f"memory/{date()}-notes.md", "memory/topics/home.md",
                           "notes/x.md"])
        out.append((path, rng.randint(1, 400), "\n".join(lines)))
    return out


def run_child(corpus_file: Path, repeat: int) -> None:
    """Analyse every corpus in ``corpus_file`` ``repeat`` times; print {name: {cpu, sha256, chunks}}."""
    from symi_memory.supersession import line_analysis

    corpora = json.loads(corpus_file.read_text(encoding="utf-8"))
    out: dict[str, Any] = {}
    for name, chunks in corpora.items():
        best = float("inf")
        digest = ""
        for _ in range(repeat):
            started = time.process_time()
            blobs = [line_analysis(p, s, t) for p, s, t in chunks]
            best = min(best, time.process_time() - started)
            h = hashlib.sha256()
            for b in blobs:
                h.update(len(b).to_bytes(4, "little"))
                h.update(b)
            digest = h.hexdigest()
        out[name] = {"cpu_s": best, "sha256": digest, "chunks": len(chunks),
                     "bytes": sum(len(b) for b in blobs)}
    print(json.dumps(out))


# A keyword-only reindex (sync(force=True), provider none) of a workspace, timed in CPU seconds of the sync.
REINDEX = """
import json, sys, time
from symi_memory import load_config
from symi_memory.manager import open_memory
ws, state = sys.argv[1], sys.argv[2]
overrides = {"agents": {"defaults": {"memorySearch": {"provider": "none", "sync": {"watch": False}}}}}
cfg = load_config(None, state_dir=state, overrides=overrides)
with open_memory(cfg, workspace=ws, start=False) as mem:
    mem.sync()
    started = time.process_time()
    again = mem.sync(force=True)
    print(json.dumps({"cpu_s": time.process_time() - started, "chunks": again.chunks_written, "full": again.full}))
"""


def reindex(python: str, ws: Path, state: Path) -> dict[str, Any]:
    import shutil

    shutil.rmtree(state, ignore_errors=True)
    proc = subprocess.run([python, "-c", REINDEX, str(ws), str(state)], capture_output=True, text=True,
                          cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        raise SystemExit(f"reindex failed: {proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def reindex_workspace(root: Path, copies: int) -> None:
    """The devmem and convmem notes, ``copies`` times under their own folders."""
    for name in ("devmem", "convmem"):
        src = DATASETS / name / "workspace"
        for f in src.rglob("*.md"):
            for k in range(copies):
                rel = f.relative_to(src)
                dest = root / ("MEMORY.md" if rel.as_posix() == "MEMORY.md" and k == 0 and name == "devmem"
                               else Path("memory") / f"{name}-{k}" / rel)
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(f.read_text(encoding="utf-8"), encoding="utf-8")


# A store build without the analysis (the floor): line_analysis answers None, so chunks.lines stays NULL.
NO_ANALYSIS = """
import runpy, sys
import symi_memory.supersession as s
s.line_analysis = lambda *a: None
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def store_build(cmd: list[str], where: Path, n: int) -> dict[str, float]:
    """CPU (user + system) and wall seconds of one child writing scale.py's store of ``n`` chunks."""
    db = where / "store.sqlite"
    for leftover in where.glob("store.sqlite*"):
        leftover.unlink()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([*cmd, str(HERE / "scale.py"), "--build-store", str(db), "--n", str(n)],
                          capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"store build failed: {proc.stderr[-3000:]}")
    return {"cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), "wall_s": wall}


def measure(python: str, corpus_file: Path, repeat: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONHASHSEED="0")
    proc = subprocess.run([python, __file__, "--child", str(corpus_file), "--repeat", str(repeat)],
                          capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        raise SystemExit(f"{python} failed: {proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline-python", default=None)
    ap.add_argument("--repeat", type=int, default=3, help="passes per corpus in a child (best is kept)")
    ap.add_argument("--rounds", type=int, default=2, help="children per interpreter, alternating")
    ap.add_argument("--size", type=int, default=CORPUS_SIZE, help="chunks of the scale and mixed corpora")
    ap.add_argument("--store", type=int, default=0, help="also time scale.py's store build of this many chunks")
    ap.add_argument("--reindex", type=int, default=0,
                    help="also time a keyword-only full reindex of the devmem + convmem notes copied this many times")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        run_child(Path(args.child), args.repeat)
        return
    corpora = {"scale": scale_chunks(args.size), "mixed": mixed_chunks(args.size),
               "devmem": dataset_chunks("devmem"), "convmem": dataset_chunks("convmem")}
    with tempfile.TemporaryDirectory(prefix="line-analysis-") as tmp:
        corpus_file = Path(tmp) / "corpora.json"
        corpus_file.write_text(json.dumps(corpora, ensure_ascii=False), encoding="utf-8")
        pythons = {"now": sys.executable}
        if args.baseline_python:
            pythons["baseline"] = args.baseline_python
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in pythons}
        for _ in range(args.rounds):
            for label, py in pythons.items():
                runs[label].append(measure(py, corpus_file, args.repeat))
    rows = []
    for name in corpora:
        row: dict[str, Any] = {"corpus": name, "chunks": len(corpora[name])}
        for label in pythons:
            row[f"{label}_us"] = min(r[name]["cpu_s"] for r in runs[label]) / len(corpora[name]) * 1e6
            row[f"{label}_sha256"] = runs[label][0][name]["sha256"]
            row[f"{label}_bytes"] = runs[label][0][name]["bytes"]
            if len({r[name]["sha256"] for r in runs[label]}) != 1:
                raise SystemExit(f"{label}: the analyses of {name} differ between two runs under one hash seed")
        if "baseline" in pythons:
            row["ratio"] = row["now_us"] / row["baseline_us"]
            row["identical"] = row["now_sha256"] == row["baseline_sha256"]
        rows.append(row)
    builds: dict[str, list[dict[str, float]]] = {}
    if args.store:
        cmds = {label: [py] for label, py in pythons.items()}
        cmds["no analysis"] = [sys.executable, "-c", NO_ANALYSIS]
        with tempfile.TemporaryDirectory(prefix="line-analysis-store-") as tmp:
            for _ in range(args.rounds):
                for label, cmd in cmds.items():
                    builds.setdefault(label, []).append(store_build(cmd, Path(tmp), args.store))
    reindexes: dict[str, list[dict[str, Any]]] = {}
    if args.reindex:
        with tempfile.TemporaryDirectory(prefix="line-analysis-reindex-") as tmp:
            ws = Path(tmp) / "ws"
            reindex_workspace(ws, args.reindex)
            for _ in range(args.rounds):
                for label, py in pythons.items():
                    reindexes.setdefault(label, []).append(reindex(py, ws, Path(tmp) / f"state-{label}"))
    if args.json:
        print(json.dumps({"analysis": rows, "store": builds, "reindex": reindexes}, indent=2))
        return
    if "baseline" in pythons:
        print("| corpus | chunks | CPU per chunk, now (us) | baseline (us) | ratio | speed-up | bytes identical |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['corpus']} | {r['chunks']:,} | {r['now_us']:.0f} | {r['baseline_us']:.0f} | {r['ratio']:.2f} | "
                  f"{1 / r['ratio']:.2f}x | {'yes' if r['identical'] else 'NO'} (sha256 {r['now_sha256'][:12]}) |")
    else:
        print("| corpus | chunks | CPU per chunk (us) | sha256 |")
        print("|---|---|---|---|")
        for r in rows:
            print(f"| {r['corpus']} | {r['chunks']:,} | {r['now_us']:.0f} | {r['now_sha256'][:12]} |")
    if builds:
        floor = min(b["cpu_s"] for b in builds["no analysis"])
        print(f"\nStore build of {args.store:,} chunks (bench/scale.py's store), best of {args.rounds}:\n")
        print("| build | CPU (s) | wall (s) | CPU above the build without analysis (s) |")
        print("|---|---|---|---|")
        for label, runs_ in builds.items():
            cpu = min(b["cpu_s"] for b in runs_)
            wall = min(b["wall_s"] for b in runs_)
            print(f"| {label} | {cpu:.1f} | {wall:.1f} | {cpu - floor:.1f} |")
        if "baseline" in builds:
            now = min(b["cpu_s"] for b in builds["now"]) - floor
            base = min(b["cpu_s"] for b in builds["baseline"]) - floor
            print(f"\nThe analysis's share of the build: {now:.1f} s now against {base:.1f} s "
                  f"({base / now if now > 0 else float('inf'):.2f}x less)")
    if reindexes:
        chunks = reindexes["now"][0]["chunks"]
        print(f"\nKeyword-only full reindex (provider none) of {chunks:,} chunks (devmem + convmem notes x "
              f"{args.reindex}), CPU seconds of the sync, best of {args.rounds}:\n")
        print("| checkout | reindex CPU (s) |")
        print("|---|---|")
        for label, runs_ in reindexes.items():
            print(f"| {label} | {min(r['cpu_s'] for r in runs_):.2f} |")
    if any(r.get("identical") is False for r in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
