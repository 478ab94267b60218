"""Differential fuzz of the exact vector side: ExactVectors.search and rescore, this checkout against a baseline.

Each run builds a random store (clustered, uniform, three distinct vectors, or one vector plus 1e-6 noise; 5%
duplicated rows; NaN, inf, zero and 1e30 values in a few rows; with or without line units), then asks a random
sequence of searches (k = 1, 10, 80, 200, now and then the row count and around it; queries near a stored vector,
a stored vector itself, random, huge, holding NaN or inf, or one-hot with -0.0), on this thread or on another one
whose state is adopted (the scan worker's hand-off), each followed by a rescore of 60 random rowids with the same
list, another list of the same floats, the list changed in place, or a 0.0 turned -0.0; and writes between them
(a file written again or removed), some searched while the new copy's load is held back (the old copy serves).
Each interpreter runs the same seed in a child and writes every answer (rowids, float.hex of the scores); the
files must be equal. With this checkout's interpreter each search is also compared with a float32 scan
(``scan = "float32"``) of the same store: "DIFF" there counts answers that are not bit for bit the float32 scan's
(expected from 32,768 rows, where the float32 scan's product runs in BLAS, not einsum).

    python bench/vectors_fuzz.py --baseline-python ../base/.venv/bin/python [--configs "SEED N DIMS UNITS STEPS" ...]

A search whose query is not finite answers rows scoring -inf (NaN in the float32 scan) in an order that depends
on faiss's handling of NaN: those differences are reported apart ("nonfinite query"), not as failures.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

DEFAULT_CONFIGS = ["61 8192 64 0 80", "62 9000 384 0 50", "63 12000 32 0 100", "64 8500 64 1 50",
                   "65 20000 16 0 80", "71 8300 16 0 100", "73 8200 5 0 120", "76 49999 8 0 30"]


def _compare(new: Path, base: Path) -> str:
    a = [json.loads(x) for x in new.read_text().splitlines()]
    b = [json.loads(x) for x in base.read_text().splitlines()]
    if len(a) != len(b):
        return f"FAIL: {len(a)} answers against {len(b)}"
    real, nonfinite = [], 0
    after_nonfinite = False
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x[0] == "search":
            after_nonfinite = x[2] == 8 or all(s in ("-inf", "nan") for _, s in x[3] + y[3])
        elif x[0] == "stale":  # a search served by the old copy: its answer is [rowid, score] pairs too
            after_nonfinite = bool(x[1] + y[1]) and all(s in ("-inf", "nan") for _, s in x[1] + y[1])
        if x == y:
            continue
        if x[0] in ("search", "stale") and after_nonfinite:
            nonfinite += 1
        elif x[0] in ("rescore", "stale-rescore") and after_nonfinite:
            nonfinite += 1  # its random rowids were drawn after a search whose answer differed
        else:
            real.append(i)
    return ("FAIL at answers " + str(real[:10])) if real else f"same ({nonfinite} nonfinite-query differences)"


def compare_main() -> int:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline-python", required=True)
    ap.add_argument("--configs", nargs="*", default=DEFAULT_CONFIGS)
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="vectors-fuzz-"))
    failed = 0
    for cfg in args.configs:
        tag = cfg.replace(" ", "-")
        runs = {}
        for side, python in (("this", sys.executable), ("base", args.baseline_python)):
            path = out / f"{side}-{tag}.jsonl"
            env = {**os.environ, "ORACLE": "1" if side == "this" else ""}
            proc = subprocess.run([python, __file__, "--child", *cfg.split(), str(path)], env=env,
                                  capture_output=True, text=True)
            if proc.returncode:
                print(f"{tag} {side}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
            runs[side] = (path, proc.stderr.strip().splitlines()[-1:] if proc.stderr else [])
        verdict = _compare(runs["this"][0], runs["base"][0])
        failed += verdict.startswith("FAIL")
        print(f"{tag}: {verdict}; this checkout: {' '.join(runs['this'][1])}")
    return 1 if failed else 0


if __name__ == "__main__" and sys.argv[1:2] != ["--child"]:
    sys.exit(compare_main())

import numpy as np  # noqa: E402

from symi_memory.index import vectors as vm  # noqa: E402
from symi_memory.index.store import ChunkRow, FileRow, IndexStore, UnitRow  # noqa: E402
from symi_memory.index.vectors import ExactVectors  # noqa: E402

seed, n, dims, units = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
steps, out_path = int(sys.argv[6]), sys.argv[7]

rng = np.random.default_rng(seed)
IDENT = json.dumps({"provider": "test", "model": "m", "fingerprint": "f"})
W = 0.7 if units else 0.0

# Gate the background load so that a search during it is deterministic (old copy, not current).
gate = threading.Event()
gate.set()
orig_bg = ExactVectors._background


def gated(self, generation):  # type: ignore[no-untyped-def]  # noqa: ANN001
    gate.wait()
    orig_bg(self, generation)


ExactVectors._background = gated
KEPT = [0]
if hasattr(ExactVectors, "_search_kept"):
    _orig_kept = ExactVectors._search_kept

    def _counted(self, *a):  # type: ignore[no-untyped-def]
        KEPT[0] += 1
        return _orig_kept(self, *a)

    ExactVectors._search_kept = _counted

def make_vecs(m):
    kind = rng.integers(0, 4)
    if kind == 0:  # clustered
        centres = rng.normal(size=(20, dims)).astype(np.float32)
        v = centres[rng.integers(0, 20, m)] + 0.05 * rng.normal(size=(m, dims)).astype(np.float32)
    elif kind == 1:  # uniform random
        v = rng.normal(size=(m, dims)).astype(np.float32)
    elif kind == 2:  # few distinct vectors: massive ties
        base = rng.normal(size=(3, dims)).astype(np.float32)
        v = base[rng.integers(0, 3, m)].copy()
    else:  # near-ties: one vector plus tiny noise
        b = rng.normal(size=dims).astype(np.float32)
        v = (b + 1e-6 * rng.normal(size=(m, dims))).astype(np.float32)
    # duplicates
    d = rng.integers(0, m, m // 20)
    v[d] = v[rng.integers(0, m, len(d))]
    # NaN / inf / zero / huge rows
    for bad in (np.nan, np.inf, 0.0, 1e30):
        if rng.random() < 0.5:
            v[rng.integers(0, m, 3), rng.integers(0, dims)] = bad
    if rng.random() < 0.3:
        v[rng.integers(0, m, 2)] = 0.0
    return v


def file_rows(f, vecs, tag):
    rows = []
    for i, vec in enumerate(vecs):
        us = ()
        if units and i % 3:
            us = tuple(UnitRow(start_line=j + 1, end_line=j + 1, hash=f"{tag}f{f}u{i}.{j}",
                               embedding=(vec + 0.3 * rng.normal(size=dims)).astype(np.float32).tobytes())
                       for j in range(i % 3))
        rows.append(ChunkRow(id=f"{tag}f{f}c{i}", path=f"memory/{f}.md", source="memory", start_line=i + 1,
                             end_line=i + 1, hash=f"{tag}f{f}h{i}", text=f"chunk {i}", embedding=vec.tobytes(), units=us))
    return (FileRow(path=f"memory/{f}.md", source="memory", hash=f"{tag}{f}", mtime=0.0, size=0), rows)


tmp = Path(tempfile.mkdtemp(prefix="revvec10k-fz"))
store = IndexStore.open(tmp / "s.sqlite")
vecs = make_vecs(n)
per = 500
nfiles = (n + per - 1) // per
store.replace_files([file_rows(f, vecs[f * per:(f + 1) * per], "a") for f in range(nfiles)],
                    meta={"identity": IDENT, **({"units": "lines"} if units else {})})
ev = ExactVectors(store, unit_weight=W)
out = []


def enc_hits(h):
    return [[int(r), float(s).hex()] for r, s in h]


def enc_scores(d):
    return [[int(r), float(s).hex()] for r, s in sorted(d.items())]


def all_rowids():
    return [r for (r,) in store.db.execute("SELECT rowid FROM chunks").fetchall()] if hasattr(store, "db") else []


QK = [0]


def query():
    kind = rng.integers(0, 10)
    QK[0] = int(kind)
    if kind <= 4:
        q = vecs[rng.integers(0, len(vecs))] + 0.02 * rng.normal(size=dims)
    elif kind == 5:
        q = vecs[rng.integers(0, len(vecs))].astype(np.float64)  # exactly a stored vector (duplicates tie)
    elif kind == 6:
        q = rng.normal(size=dims)
    elif kind == 7:
        q = rng.normal(size=dims) * 1e20  # huge
    elif kind == 8:
        q = rng.normal(size=dims)
        q[rng.integers(0, dims)] = np.nan if rng.random() < 0.5 else np.inf
    else:
        q = np.zeros(dims)
        q[rng.integers(0, dims)] = -1.0 if rng.random() < 0.5 else 1.0
        if rng.random() < 0.5:
            q[rng.integers(0, dims)] = -0.0
    if rng.random() < 0.2:
        return [np.float32(x) for x in q]
    if rng.random() < 0.1:
        return [np.array(x) for x in q]  # elements that can change in place
    return q.tolist()


ks = [1, 10, 80, 200]
ORACLE = ExactVectors(store, scan="float32", unit_weight=W) if os.environ.get("ORACLE") else None
ORC = {"same": 0, "nonfinite": 0, "DIFF": 0}


def safe_search(q, k):
    try:
        got = ev.search(q, k)
    except TypeError as e:
        out.append(["raised", type(e).__name__])
        return []
    if ORACLE is not None and getattr(ev._last, "current", False):
        try:
            want = ORACLE.search(q, k)
            if ORACLE._thread is not None:
                ORACLE._thread.join()
                want = ORACLE.search(q, k)
        except TypeError:
            return got
        if got == want:
            ORC["same"] += 1
        elif any(not math.isfinite(s) for _, s in want + got) or not all(math.isfinite(x) for x in q):
            ORC["nonfinite"] += 1
        else:
            ORC["DIFF"] += 1
            sys.stderr.write(f"ORACLE-DIFF k={k} qk={QK[0]} got={got[:5]} want={want[:5]}\n")
    return got
for step in range(steps):
    op = rng.random()
    if op < 0.12:  # a write
        f = int(rng.integers(0, nfiles + 2))
        if rng.random() < 0.3 and f < nfiles:
            store.replace_files([], remove=[f"memory/{f}.md"], meta={"identity": IDENT})
            out.append(["rm", f])
        else:
            m = int(rng.integers(1, 300))
            nv = make_vecs(m)
            vecs = np.concatenate([vecs, nv])
            store.replace_files([file_rows(f, nv, f"w{step}")], meta={"identity": IDENT})
            out.append(["write", f, m])
        if rng.random() < 0.5:  # search with the old copy (background load gated)
            gate.clear()
            vm.SYNC_LOAD_LIMIT = 0
            q = query()
            k = int(rng.choice(ks))
            out.append(["stale", enc_hits(safe_search(q, k))])
            cands = [int(x) for x in rng.integers(1, n + 2000, 40)]
            out.append(["stale-rescore", enc_scores(ev.rescore(q, cands))])
            gate.set()
            if ev._thread is not None:
                ev._thread.join()
            vm.SYNC_LOAD_LIMIT = 20_000
        continue
    q = query()
    k = int(rng.choice(ks + [len(vecs) - 1, len(vecs), len(vecs) + 5] if rng.random() < 0.05 else ks))
    if rng.random() < 0.3:  # on another thread, its state adopted here (the scan worker's hand-off)
        box: list = []
        th = threading.Thread(target=lambda q=q, k=k, box=box: box.append((safe_search(q, k), ev.search_state())))
        th.start()
        th.join()
        hits, state = box[0]
        ev.adopt_search_state(state)
    else:
        hits = safe_search(q, k)
    if ev._thread is not None:
        ev._thread.join()
    out.append(["search", k, QK[0], enc_hits(hits)])
    hit_ids = [r for r, _ in hits]
    cands = [int(x) for x in rng.integers(1, n + 2000, 60)]
    mode = rng.integers(0, 4)
    if mode == 0:
        q2 = q
    elif mode == 1:
        q2 = list(q)  # another list, same floats
    elif mode == 2:
        q2 = q
        if len(q):
            i = int(rng.integers(0, len(q)))
            q[i] = q[i] * 1.5 + 0.1  # mutated in place
    else:
        q2 = q
        if len(q):
            i = int(rng.integers(0, len(q)))
            q[i] = -q[i] if q[i] == 0 else q[i]  # -0.0 vs 0.0
            if isinstance(q[i], np.ndarray):
                q[i][()] = q[i] * 1.5 + 0.1  # in place: the same element object, another query
    out.append(["rescore", int(mode), enc_scores(ev.rescore(q2, cands))])

Path(out_path).write_text("\n".join(json.dumps(o) for o in out) + "\n")
store.close()
sys.stderr.write(f"kept-copy searches {KEPT[0]}, against the float32 scan: {ORC}\n")
