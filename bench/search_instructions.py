"""Instructions per hybrid search, counted by valgrind's callgrind: a figure the host's speed does not move.

On a shared host the same code measures 2.8 ms a search in one phase and 6 ms in another (the baseline moves
alike), so a time says little about a change of a few percent. callgrind counts the instructions each run
executes, and the count repeats from run to run whatever else the machine does. Each side (this checkout, and
``--baseline-python``) opens bench/scale.py's synthetic store (built by its own code), warms up, and runs
under callgrind twice: once stopping after the warm-up, once after ``--queries`` more searches. The
difference, divided by ``--queries``, is what one search executes. It is split by library (the Python
interpreter, faiss, SQLite inside apsw, numpy, the C library).

Instructions are not time: a scan that reads memory costs more per instruction than Python's own work. Use
it beside ``search_interleaved.py``, not instead of it. Needs valgrind (Debian's package); each run takes
about 1.5 minutes at 10,000 chunks, and the four runs go two at a time.

    python bench/search_instructions.py --n 10000 --queries 100 --baseline-python ../base/.venv/bin/python
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402

WARM = 40
# Libraries by the file their code is in (callgrind names the object of each function).
LIBRARIES = [("Python interpreter", r"libpython|python3\.\d+$"), ("faiss", r"faiss"),
             ("SQLite (in apsw)", r"apsw"), ("numpy", r"numpy|_multiarray|openblas"), ("C library", r"libc\.so|libm\.so")]


def child(db: Path, n: int, count: int, made: int) -> None:
    queries = scale.make_queries(n, WARM + made)  # the same set in both runs: they differ only by the searches
    table = {q["text"]: q["vector"] for q in queries}
    mem, ws = scale.open_sqlite_memory(db, table)
    for q in queries[:WARM]:
        mem.search(q["text"], max_results=10, min_score=0)
    for q in queries[WARM:WARM + count]:
        mem.search(q["text"], max_results=10, min_score=0)
    os._exit(0)  # no teardown: the two runs differ only by the searches


def counted(python: str, db: Path, n: int, count: int, made: int, out: Path, env: dict[str, str]) -> dict[str, int]:
    """Instructions of one run under callgrind: in all, and by function (with its library)."""
    # A copy each: the first open of a store does work a later one does not (the scan copy it keeps, say).
    db = Path(shutil.copy(db, out.with_suffix(".sqlite")))
    # Children traced: a baseline interpreter may be a wrapper script that execs Python.
    subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={out}", python, __file__,
                    "--child", str(db), "--n", str(n), "--queries", str(count), "--made", str(made)],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    text = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100", str(out)], check=True,
                          capture_output=True, text=True).stdout
    by: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(.*)$", line)
        if m:
            by[m.group(2)] = by.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
    return by


def library(name: str) -> str:
    m = re.search(r"\[([^\]]*)\]\s*$", name)
    obj = m.group(1) if m else ""
    for label, pattern in LIBRARIES:
        if re.search(pattern, obj):
            return label
    return "other (inlined, unnamed)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--baseline-python", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--made", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(Path(args.child), args.n, args.queries, args.made)
        return 0
    if args.queries < 1:
        ap.error("--queries must be 1 or more")
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        ap.error("needs valgrind and callgrind_annotate (Debian's valgrind package)")
    work = Path(tempfile.mkdtemp(prefix="symi-instructions-"))
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    sides = scale.side_stores(args.n, args.baseline_python, work, env, quiet=True)
    jobs = []
    for label, (python, db) in sides.items():
        for count in (0, args.queries):
            jobs.append((label, count, python, db))
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda j: counted(j[2], j[3], args.n, j[1], args.queries, work / f"cg-{j[0][:4]}-{j[1]}.out", env),
                             jobs))
    shutil.rmtree(work, ignore_errors=True)
    per: dict[str, dict[str, float]] = {}
    for (label, count, _python, _db), by in zip(jobs, runs, strict=True):
        sign = 1 if count else -1
        side = per.setdefault(label, {})
        for name, ir in by.items():
            key = "in all" if name == "PROGRAM TOTALS" else library(name)
            side[key] = side.get(key, 0.0) + sign * ir / args.queries
    labels = list(sides)
    print(f"N = {args.n:,} chunks, {args.queries} searches after {WARM} to warm up; million instructions per "
          "search (callgrind; repeats from run to run)\n")
    print("| part | " + " | ".join(labels) + (" | ratio |" if len(labels) == 2 else " |"))
    print("|---|" + "---|" * (len(labels) + (1 if len(labels) == 2 else 0)))
    keys = ["in all"] + [label for label, _ in LIBRARIES] + ["other (inlined, unnamed)"]
    for key in keys:
        figures = [per[label].get(key, 0.0) / 1e6 for label in labels]
        ratio = f" {figures[0] / figures[1]:.3f} |" if len(figures) == 2 and figures[1] else ""
        print(f"| {key} | " + " | ".join(f"{f:.3f}" for f in figures) + " |" + ratio)
    return 0


if __name__ == "__main__":
    sys.exit(main())
