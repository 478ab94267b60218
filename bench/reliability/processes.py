"""Processes: SIGKILL during reindex, and readers beside a writer.

    python bench/reliability/processes.py [--kills 50] [--seconds 60] [--readers 4] [--files 1000]

1. **SIGKILL loop.** Builds an index of ``--files`` notes with the
   deterministic ``hash`` provider, then ``--kills`` times starts
   ``symi-memory index --force`` in a child process and SIGKILLs it at a
   random point of the rewrite. After every kill it checks ``PRAGMA
   integrity_check``, that a new process still sees every file and finds
   the probe notes, and measures the ``*.build-*`` files left beside the
   index before and after that next open.
2. **Readers + writer.** ``--readers`` processes search probe queries in a
   loop for ``--seconds`` while this process keeps editing a note and
   syncing (every fifth sync a forced full rewrite). A search that misses
   a probe note is a wrong result; exceptions and "database is locked"
   log lines are counted.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SYMI_MEMORY_PLUGINS", "symi_memory.testing.plugin")  # opts in to the deterministic `hash` provider

PROBES = {"pelican migration count": "MEMORY.md", "ticket QZ-4471 leak": "MEMORY.md",
          "sourdough starter feeding": "memory/probe-bread.md"}


def make_workspace(ws: Path, files: int) -> None:
    words = "garden harbour router backup standup knee dentist ticket deploy pipeline beagle".split()
    (ws / "memory" / "notes").mkdir(parents=True, exist_ok=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- Pelican migration count was 212.\n- Ticket QZ-4471 tracks the leak.\n",
                                  encoding="utf-8")
    (ws / "memory" / "probe-bread.md").write_text("# Bread\n\nSourdough starter feeding at 8am daily.\n",
                                                  encoding="utf-8")
    for i in range(files):
        body = "\n".join(" ".join(words[(i + j + k) % len(words)] for k in range(12)) for j in range(30))
        (ws / "memory" / "notes" / f"n{i:04d}.md").write_text(f"# Note {i}\n\n{body}\n", encoding="utf-8")


def write_config(root: Path) -> Path:
    cfg = root / "symi.json"
    cfg.write_text(json.dumps({"agents": {"defaults": {"memorySearch": {
        "provider": "hash", "query": {"minScore": 0}, "sync": {"watch": False}}}}}), encoding="utf-8")
    return cfg


def open_mem(cfg: Path, root: Path, ws: Path):
    from symi_memory.config import load_config
    from symi_memory.manager import open_memory

    return open_memory(load_config(cfg, state_dir=root / "state"), workspace=ws, start=False)


def integrity(db: str) -> str:
    import apsw
    import sqlite_vec

    con = apsw.Connection(db)
    con.enable_load_extension(True)
    con.load_extension(sqlite_vec.loadable_path())
    try:
        return ";".join(str(r[0]) for r in con.execute("PRAGMA integrity_check").fetchall())
    finally:
        con.close()


def build_bytes(db: str) -> int:
    d = Path(db).parent
    return sum(f.stat().st_size for f in d.glob(Path(db).name + ".build-*") if f.is_file())


def cli(cfg: Path, root: Path, ws: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, SYMI_STATE_DIR=str(root / "state"))
    return subprocess.Popen([sys.executable, "-m", "symi_memory.cli", "--config", str(cfg), "--state-dir",
                             str(root / "state"), "--workspace", str(ws), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def kill_loop(kills: int, files: int, rng: random.Random) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ws = root / "ws"
        make_workspace(ws, files)
        cfg = write_config(root)
        with open_mem(cfg, root, ws) as mem:
            mem.sync()
            expected = mem.status()["files"]
            db = mem.status()["dbPath"]
        t0 = time.perf_counter()
        cli(cfg, root, ws, "status").communicate(timeout=600)
        startup = time.perf_counter() - t0
        t0 = time.perf_counter()
        cli(cfg, root, ws, "index", "--force").communicate(timeout=600)
        full = time.perf_counter() - t0
        corrupt = lost = missed = finished = 0
        left_before: list[int] = []
        left_after: list[int] = []
        for _ in range(kills):
            proc = cli(cfg, root, ws, "index", "--force")
            time.sleep(rng.uniform(startup * 0.8, max(startup, full * 0.95)))
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            else:
                finished += 1
            proc.communicate(timeout=60)
            left_before.append(build_bytes(db))
            if integrity(db) != "ok":
                corrupt += 1
            with open_mem(cfg, root, ws) as mem:
                if mem.status()["files"] != expected:
                    lost += 1
                for query, path in PROBES.items():
                    if path not in [h.path for h in mem.search(query).results]:
                        missed += 1
            left_after.append(build_bytes(db))
        print(f"SIGKILL loop: {kills} kills during `index --force` ({files + 2} files; the command takes "
              f"~{full:.1f}s, ~{startup:.1f}s of it start-up; {finished} runs finished before the kill)")
        print(f"  corrupt indexes {corrupt}, indexes with lost files {lost}, probe searches that missed {missed}")
        print(f"  build files left after the kill: max {max(left_before) / 1e6:.1f} MB; after the next open: "
              f"{left_after[-1] / 1e6:.1f} MB (max {max(left_after) / 1e6:.1f} MB)")


READER = r"""
import json, logging, sys, time, os
sys.path.insert(0, sys.argv[5])
from processes import open_mem, PROBES
from pathlib import Path
class C(logging.Handler):
    n = 0
    def emit(self, r):
        if "locked" in r.getMessage() or r.exc_info: C.n += 1
logging.getLogger().addHandler(C()); logging.getLogger().setLevel(logging.WARNING)
cfg, root, ws, seconds = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4])
searches = wrong = errors = 0
misses = []
with open_mem(cfg, root, ws) as mem:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for q, path in PROBES.items():
            try:
                resp = mem.search(q)
                hits = [h.path for h in resp.results]
                searches += 1
                if path not in hits:
                    wrong += 1
                    if wrong <= 3:
                        misses.append({"query": q, "mode": resp.mode, "hits": hits[:6],
                                       "status": {k: mem.status().get(k) for k in ("files", "chunks", "dirty")}})
            except Exception as exc:
                errors += 1
print(json.dumps({"searches": searches, "wrong": wrong, "errors": errors, "logged": C.n, "misses": misses}))
"""


def readers_writer(seconds: float, readers: int, files: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ws = root / "ws"
        make_workspace(ws, files)
        cfg = write_config(root)
        with open_mem(cfg, root, ws) as mem:
            mem.sync()
            here = str(Path(__file__).resolve().parent)
            procs = [subprocess.Popen([sys.executable, "-c", READER, str(cfg), str(root), str(ws), str(seconds), here],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=dict(os.environ, SYMI_STATE_DIR=str(root / "state")))
                     for _ in range(readers)]
            syncs = sync_errors = 0
            end = time.monotonic() + seconds
            churn = ws / "memory" / "churn.md"
            while time.monotonic() < end:
                churn.write_text(f"# Churn\n\nedit {syncs} at {time.time()}\n", encoding="utf-8")
                try:
                    mem.sync(force=syncs % 5 == 4)
                except Exception:
                    sync_errors += 1
                syncs += 1
            results = []
            for p in procs:
                out, err = p.communicate(timeout=seconds + 120)
                lines = out.strip().splitlines()
                results.append(json.loads(lines[-1]) if lines else {"searches": 0, "wrong": 0, "errors": 1,
                                                                    "logged": err.count("\n")})
        total = sum(r["searches"] for r in results)
        print(f"readers + writer: {readers} reader processes x {seconds:g}s beside {syncs} syncs "
              f"(every fifth a full rewrite)")
        print(f"  searches {total}, wrong results {sum(r['wrong'] for r in results)}, reader errors "
              f"{sum(r['errors'] for r in results)}, locked/exception log lines {sum(r['logged'] for r in results)}, "
              f"writer sync errors {sync_errors}")
        for r in results:
            for miss in r.get("misses", []):
                print(f"    missed: {json.dumps(miss)[:300]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--readers", type=int, default=4)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=14)
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    if args.kills:
        kill_loop(args.kills, args.files, random.Random(args.seed))
    if args.seconds:
        readers_writer(args.seconds, args.readers, args.files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
