"""Scale benchmark: builtin-sqlite vs faiss (flat, HNSW) vs a plain numpy scan, N = 10k..1M chunks.

Synthetic but structured data: Gaussian clusters around random centres in
d = 384, and chunk text drawn from each cluster's own vocabulary so the
keyword side has real matches. The SQLite store is written once per N through
the real IndexStore; then every engine runs in its own subprocess (so peak
RSS is per engine) over the same store and the same precomputed query
vectors (query embedding time is excluded: a provider hands them back).

    python bench/scale.py --sizes 10000,100000,1000000 --queries 200 --out docs

Writes a section into docs/benchmarks.md and docs/scale_latency.png.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

DIMS = 384
K = 10
IDENTITY = {"provider": "bench", "model": "fixed", "fingerprint": "fixed", "chunkTokens": 400, "chunkOverlap": 80}
ENGINES = ["numpy", "builtin-sqlite", "faiss-flat", "faiss-hnsw"]


def cluster_count(n: int) -> int:
    return max(64, n // 500)


def make_data(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(centres, cluster of each chunk, unit vectors)."""
    rng = np.random.default_rng(seed)
    c = cluster_count(n)
    centres = rng.normal(size=(c, DIMS)).astype(np.float32)
    labels = rng.integers(0, c, n)
    vecs = np.empty((n, DIMS), dtype=np.float32)
    for i in range(0, n, 50_000):
        j = min(n, i + 50_000)
        part = centres[labels[i:j]] + 0.6 * rng.normal(size=(j - i, DIMS)).astype(np.float32)
        vecs[i:j] = part / np.linalg.norm(part, axis=1, keepdims=True)
    return centres, labels, vecs


def words(cluster: int, rng: np.random.Generator, count: int) -> list[str]:
    own = [f"c{cluster}w{j}" for j in rng.integers(0, 40, count // 2)]
    common = [f"common{j}" for j in rng.integers(0, 300, count - len(own))]
    return own + common


def build_store(path: Path, n: int) -> dict[str, Any]:
    """Write N chunks (50 per file) through the real IndexStore; returns timings.

    ``SYMI_BENCH_UNITS=K`` gives each chunk K unit (line) vectors too, near its own vector
    (``chunking.units``; devmem has about 9 per chunk), to measure their cost at scale.
    """
    from symi_memory.index.store import ChunkRow, FileRow, IndexStore, UnitRow

    units_per = int(os.environ.get("SYMI_BENCH_UNITS", "0"))

    _, labels, vecs = make_data(n)
    rng = np.random.default_rng(2)
    started = time.perf_counter()
    store = IndexStore.open(path)

    text_bytes = 0

    def files():
        nonlocal text_bytes
        for f in range(0, n, 50):
            rel = f"memory/gen/{f // 50:06d}.md"
            rows = []
            for i in range(f, min(n, f + 50)):
                text = " ".join(words(int(labels[i]), rng, 60))
                text_bytes += len(text.encode("utf-8"))
                units = []
                for j in range(units_per):
                    u = vecs[i] + 0.8 * rng.normal(size=DIMS).astype(np.float32) / np.sqrt(DIMS)
                    units.append(UnitRow(start_line=j + 1, end_line=j + 1, hash=f"{i}u{j}",
                                         embedding=(u / np.linalg.norm(u)).astype(np.float32).tobytes()))
                rows.append(ChunkRow(id=f"{i:09d}", path=rel, source="memory", start_line=i - f + 1,
                                     end_line=i - f + 1, hash=f"{i}", text=text, embedding=vecs[i].tobytes(),
                                     units=tuple(units)))
            yield FileRow(path=rel, source="memory", hash=rel, mtime=0.0, size=0, lines=len(rows)), rows

    # The store is new, so incremental batches of 200 files (10k chunks) fill it while keeping the
    # WAL small; one transaction at 1M grew it past 4.7 GB.
    batch: list[Any] = []
    meta = {"identity": json.dumps(IDENTITY, sort_keys=True), "units": "lines"}
    for item in files():
        batch.append(item)
        if len(batch) == 200:
            store.replace_files(batch, meta=meta)
            batch = []
    if batch:
        store.replace_files(batch, meta=meta)
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    return {"seconds": time.perf_counter() - started, "raw_bytes": text_bytes + n * DIMS * 4}


def make_queries(n: int, count: int) -> list[dict[str, Any]]:
    centres, labels, _ = make_data(n)
    rng = np.random.default_rng(3)
    out = []
    for qi in range(count):
        c = int(labels[rng.integers(0, n)])
        v = centres[c] + 0.6 * rng.normal(size=DIMS).astype(np.float32)
        v /= np.linalg.norm(v)
        out.append({"text": " ".join(words(c, rng, 4)[:2]) + f" q{qi}", "vector": v.tolist()})
    return out


# --------------------------------------------------------------------- child


class FixedProvider:
    """Hands back the precomputed vector of each benchmark query (no embedding cost)."""

    id, model, fingerprint, max_input_bytes = "bench", "fixed", "fixed", 8192

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def embed_query(self, text: str) -> list[float]:
        return self.table[text]

    def query_at_once(self, text: str) -> list[float] | None:
        """From the table, as embed_query (``EmbedsQueriesAtOnce``: asked on the searching thread)."""
        return self.table.get(text)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("the benchmark never embeds documents")

    def close(self) -> None:
        pass


def bench_plugin(table: dict[str, list[float]]) -> Any:
    """A plugin registering the ``bench`` provider: :class:`FixedProvider` over ``table`` (query text -> vector)."""
    from symi_memory import hookimpl
    from symi_memory.specs import ProviderSpec

    class Plugin:
        @hookimpl
        def symi_memory_register_embedding_providers(self, register: Any) -> None:
            register(ProviderSpec(name="bench", factory=lambda ctx: FixedProvider(table)))

    return Plugin()


def open_sqlite_memory(db: Path, table: dict[str, list[float]]) -> tuple[Any, Path]:
    """A manager searching the builtin-sqlite store at ``db`` with the ``bench`` provider over ``table``, its
    vector side ready, and the scratch workspace it uses (the caller closes the one and removes the other)."""
    from symi_memory import load_config
    from symi_memory.manager import open_memory

    ws = Path(tempfile.mkdtemp(prefix="bench-ws-"))
    cfg = load_config(None, state_dir=ws, overrides={
        "plugins": {"slots": {"memory": "builtin-sqlite"}},
        "agents": {"defaults": {"memorySearch": {"provider": "bench", "store": {"path": str(db)}}}}})
    mem = open_memory(cfg, workspace=ws, start=False, plugins=[("bench", bench_plugin(table))])
    while not mem.backend.vectors.ready():
        time.sleep(0.05)
    return mem, ws


def side_stores(n: int, baseline_python: str | None, work: Path, env: dict[str, str], *, quiet: bool = False,
                ) -> dict[str, tuple[str, Path]]:
    """``{label: (interpreter, store)}`` for this checkout and, when given, the baseline: each side's synthetic
    store of ``n`` chunks in ``work``, built by its own code (``search_steps.py --build``)."""
    sides = {"this checkout": sys.executable}
    if baseline_python:
        sides["baseline"] = baseline_python
    steps = Path(__file__).resolve().parent / "search_steps.py"
    out = {}
    for label, python in sides.items():
        db = work / f"{label.replace(' ', '-')}.sqlite"
        subprocess.run([python, str(steps), "--build", str(db), "--n", str(n)], check=True, env=env,
                       stdout=subprocess.DEVNULL if quiet else None)
        out[label] = (python, db)
    return out


def peak_rss_mb() -> float:
    """VmHWM: unlike ru_maxrss it is reset by exec, so it is this engine's own peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs), p)) * 1000.0


def child(engine: str, db: Path, queries_file: Path) -> dict[str, Any]:
    queries = json.loads(queries_file.read_text())
    out: dict[str, Any] = {"engine": engine}
    if engine == "numpy":
        started = time.perf_counter()
        matrix = np.load(db.with_suffix(".npy"))
        ids = np.load(db.with_suffix(".ids.npy"))
        out["build_s"] = time.perf_counter() - started
        times, tops = [], []
        for q in queries:
            qv = np.asarray(q["vector"], dtype=np.float32)
            t = time.perf_counter()
            s = matrix @ qv
            top = np.argpartition(-s, K)[:K]
            top = top[np.argsort(-s[top])]
            times.append(time.perf_counter() - t)
            tops.append(ids[top].tolist())
        out.update(vector_p50_ms=pct(times, 50), vector_p95_ms=pct(times, 95), tops=tops,
                   disk_bytes=db.with_suffix(".npy").stat().st_size, load=os.getloadavg()[0])
    else:
        out.update(run_backend(engine, db, queries))
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def run_backend(engine: str, db: Path, queries: list[dict[str, Any]]) -> dict[str, Any]:
    from symi_memory import load_config
    from symi_memory.manager import open_memory

    table = {q["text"]: q["vector"] for q in queries}

    kind = engine.split("-", 1)[1] if engine.startswith("faiss") else None
    backend = "faiss" if kind else "builtin-sqlite"
    ws = Path(tempfile.mkdtemp(prefix="bench-ws-"))
    cfg = load_config(None, state_dir=ws, overrides={
        "plugins": {"slots": {"memory": backend}},
        "agents": {"defaults": {"memorySearch": {"provider": "bench", "store": {"path": str(db), "faiss": {
            "index": kind or "flat", "threads": 1}}}}}})
    if kind == "hnsw":
        import faiss

        faiss.omp_set_num_threads(os.cpu_count() or 1)  # build on every core; queries below on one thread
    started = time.perf_counter()
    mem = open_memory(cfg, workspace=ws, start=False, plugins=[("bench", bench_plugin(table))])
    vectors = mem.backend.vectors
    # Wait for the vector side to be ready (builtin loads its matrix, faiss builds its index).
    while not vectors.ready():
        time.sleep(0.05)
    build = time.perf_counter() - started
    if kind:
        import faiss

        faiss.omp_set_num_threads(1)
    vt, ht, tops = [], [], []
    for q in queries:
        t = time.perf_counter()
        hits = vectors.search(q["vector"], K)
        vt.append(time.perf_counter() - t)
        tops.append([r for r, _ in hits])
    cpu, proc = [], []
    for q in queries:
        t, c, p = time.perf_counter(), time.thread_time(), time.process_time()
        mem.search(q["text"], max_results=10, min_score=0)
        ht.append(time.perf_counter() - t)
        cpu.append(time.thread_time() - c)
        proc.append(time.process_time() - p)
    scan = mem.status()["vector"].get("exactScan")
    mem.close()
    disk = sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if not p.name.endswith((".npy", ".faiss")))
    faiss_file = db.with_name(db.name + ".faiss")
    if kind and faiss_file.exists():
        disk = faiss_file.stat().st_size
        faiss_file.unlink()
    shutil.rmtree(ws, ignore_errors=True)
    return {"build_s": build, "vector_p50_ms": pct(vt, 50), "vector_p95_ms": pct(vt, 95), "hybrid_p50_ms": pct(ht, 50),
            "hybrid_p95_ms": pct(ht, 95), "tops": tops, "disk_bytes": disk, "scan": scan,
            # The searching thread's own CPU time: a wall-clock tail without a CPU tail is waiting
            # (host load, I/O, a lock), not work done by the search.
            "hybrid_cpu_p50_ms": pct(cpu, 50), "hybrid_cpu_p95_ms": pct(cpu, 95),
            # The whole process's CPU time (its worker threads' too: a search's vector scan may run on one).
            "hybrid_proc_cpu_p50_ms": pct(proc, 50), "hybrid_proc_cpu_mean_ms": float(np.mean(proc)) * 1000.0,
            "load": os.getloadavg()[0]}


# -------------------------------------------------------------------- parent


def run_size(n: int, count: int, work: Path, engines: list[str], baseline: str | None = None) -> list[dict[str, Any]]:
    db = work / f"scale-{n}.sqlite"
    print(f"[N={n}] writing the SQLite store ...", flush=True)
    built = build_store(db, n)
    store_t, raw_bytes = built["seconds"], built["raw_bytes"]
    base_db, base_store_t = db, store_t
    if baseline:
        # The baseline's code writes its own store (its schema may differ: it would rebuild ours empty).
        base_db = work / f"scale-{n}-baseline.sqlite"
        print(f"[N={n}] writing the baseline's SQLite store ...", flush=True)
        proc = subprocess.run([baseline, __file__, "--build-store", str(base_db), "--n", str(n)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"baseline store build failed: {proc.stderr[-2000:]}")
        base_store_t = json.loads(proc.stdout.strip().splitlines()[-1])["seconds"]
    _, _, vecs = make_data(n)
    np.save(db.with_suffix(".npy"), vecs)
    np.save(db.with_suffix(".ids.npy"), np.arange(1, n + 1, dtype=np.int64))
    del vecs
    qfile = work / f"queries-{n}.json"
    qfile.write_text(json.dumps(make_queries(n, count)))
    rows = []
    # With a baseline interpreter, each backend also runs on the baseline checkout's code, over the same store.
    runs = [(e, sys.executable, e) for e in engines]
    if baseline:
        runs = [r for e in engines for r in [(e, sys.executable, e)]
                + ([(e, baseline, f"{e} (baseline)")] if e != "numpy" else [])]
    for engine, python, label in runs:
        print(f"[N={n}] {label} ...", flush=True)
        is_base = python != sys.executable
        run_db, run_store_t = (base_db, base_store_t) if is_base else (db, store_t)
        # One BLAS/OpenMP thread everywhere: the table compares single-query latency.
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        proc = subprocess.run([python, __file__, "--child", engine, "--db", str(run_db), "--queries-file", str(qfile)],
                              capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            rows.append({"engine": label, "n": n, "error": proc.stderr.strip().splitlines()[-1:]})
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        r["engine"] = label
        r["n"] = n
        r["raw_bytes"] = raw_bytes
        if engine == "builtin-sqlite":
            r["build_s"] += run_store_t  # the SQLite store (FTS5 + vectors) is its index
            r["store_write_s"] = run_store_t
        rows.append(r)
        print(f"   {summary(r)}", flush=True)
    ref = next((r["tops"] for r in rows if r["engine"] == "numpy" and "tops" in r), None)
    for r in rows:
        if ref and "tops" in r:
            r["recall@10"] = float(np.mean([len(set(a) & set(b)) / K for a, b in zip(r["tops"], ref, strict=True)]))
    for r in rows:
        r.pop("tops", None)
    for p in work.glob(f"scale-{n}.*"):
        p.unlink()
    for p in work.glob(f"scale-{n}-*"):
        p.unlink()
    qfile.unlink()
    return rows


def summary(r: dict[str, Any]) -> str:
    keys = ["build_s", "hybrid_p50_ms", "hybrid_p95_ms", "hybrid_cpu_p50_ms", "hybrid_proc_cpu_p50_ms", "vector_p50_ms",
            "peak_rss_mb", "disk_bytes", "load"]
    return ", ".join(f"{k}={r[k]:.2f}" if isinstance(r.get(k), float) else f"{k}={r.get(k)}" for k in keys)


def fmt(v: Any, nd: int = 2) -> str:
    return "-" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))


def markdown(rows: list[dict[str, Any]], queries: int) -> str:
    lines = [f"Queries per size: {queries}; d = {DIMS}; k = {K}; one query thread; "
             f"machine: {os.cpu_count()} cores. Hybrid = the full `MemoryManager.search` "
             "(keyword + vector + fusion + pipeline) with precomputed query vectors.", "",
             "| N | engine | build (s) | hybrid p50 (ms) | hybrid p95 (ms) | hybrid CPU p50/p95 (ms) | "
             "hybrid process CPU p50/mean (ms) | vector p50 (ms) | recall@10 | peak RSS (MB) | disk (MB) | scan | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['n']:,} | {r['engine']} | failed: {r['error']} | | | | | | | | | | |")
            continue
        lines.append(f"| {r['n']:,} | {r['engine']} | {fmt(r.get('build_s'), 1)} | {fmt(r.get('hybrid_p50_ms'))} | "
                     f"{fmt(r.get('hybrid_p95_ms'))} | {fmt(r.get('hybrid_cpu_p50_ms'))}/{fmt(r.get('hybrid_cpu_p95_ms'))} | "
                     f"{fmt(r.get('hybrid_proc_cpu_p50_ms'))}/{fmt(r.get('hybrid_proc_cpu_mean_ms'))} | "
                     f"{fmt(r.get('vector_p50_ms'))} | {fmt(r.get('recall@10'), 3)} | "
                     f"{fmt(r.get('peak_rss_mb'), 0)} | {fmt(r.get('disk_bytes', 0) / 1e6, 0)} | {r.get('scan') or '-'} | "
                     f"{fmt(r.get('load'), 1)} |")
    return "\n".join(lines)


def targets(rows: list[dict[str, Any]]) -> str:
    """Issue 13's targets, checked against whatever sizes were run (baseline beside, when run)."""
    def get(engine: str, n: int, key: str) -> Any:
        return next((r.get(key) for r in rows if r["engine"] == engine and r["n"] == n), None)

    def both(engine: str, n: int, key: str, unit: str, scale: float = 1.0) -> str:
        now, base = get(engine, n, key), get(f"{engine} (baseline)", n, key)
        if now is None:
            return "not run"
        text = f"{now * scale:.2f} {unit}"
        return text + (f" (baseline {base * scale:.2f} {unit}, {now / base:.2f}x)" if base else "")

    out = []
    d, raw = get("builtin-sqlite", 100_000, "disk_bytes"), get("builtin-sqlite", 100_000, "raw_bytes")
    out.append("- disk at 100k <= 1.4x (raw float32 vectors + chunk text): "
               + ("not run" if d is None else f"{both('builtin-sqlite', 100_000, 'disk_bytes', 'MB', 1e-6)}; "
                  f"raw {raw / 1e6:.0f} MB -> {d / raw:.2f}x {'met' if d <= 1.4 * raw else 'MISSED'}"))
    rss = get("builtin-sqlite", 100_000, "peak_rss_mb")
    out.append("- peak RSS at 100k <= 300 MB: " + ("not run" if rss is None else
               f"{both('builtin-sqlite', 100_000, 'peak_rss_mb', 'MB')} -> {'met' if rss <= 300 else 'MISSED'}"))
    for n in (100_000, 1_000_000):
        h, ref = get("builtin-sqlite", n, "hybrid_p50_ms"), get("numpy", n, "vector_p50_ms")
        rc = get("builtin-sqlite", n, "recall@10")
        out.append(f"- builtin-sqlite hybrid p50 at {n:,} <= 1.0x numpy float32 exact scan, recall@10 >= 0.999: "
                   + ("not run" if h is None or ref is None else
                      f"{both('builtin-sqlite', n, 'hybrid_p50_ms', 'ms')} vs numpy {ref:.2f} ms -> {h / ref:.2f}x, "
                      f"recall {rc:.3f} -> {'met' if h <= ref and rc >= 0.999 else 'MISSED'}"))
    h = get("builtin-sqlite", 10_000, "hybrid_p50_ms")
    out.append("- builtin-sqlite hybrid p50 at 10k <= 3 ms: "
               + ("not run" if h is None else f"{both('builtin-sqlite', 10_000, 'hybrid_p50_ms', 'ms')} -> "
                  f"{'met' if h <= 3 else 'MISSED'}"))
    p50, p95 = get("faiss-hnsw", 1_000_000, "hybrid_p50_ms"), get("faiss-hnsw", 1_000_000, "hybrid_p95_ms")
    out.append("- faiss HNSW 1M hybrid p95 <= 3x its p50: "
               + ("not run" if p50 is None else f"p50 {p50:.2f}, p95 {p95:.2f} ms -> {p95 / p50:.2f}x "
                  f"{'met' if p95 <= 3 * p50 else 'MISSED'}"))
    return "\n".join(out)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for engine in ENGINES:
        pts = sorted((r["n"], r["vector_p50_ms"]) for r in rows if r["engine"] == engine and "vector_p50_ms" in r)
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=f"{engine} (vector)")
        pts = sorted((r["n"], r["hybrid_p50_ms"]) for r in rows if r["engine"] == engine and "hybrid_p50_ms" in r)
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="s", linestyle="--", label=f"{engine} (hybrid)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("chunks (N)")
    ax.set_ylabel("p50 latency (ms)")
    ax.set_title(f"Query latency vs index size (d={DIMS}, k={K})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def write_section(doc: Path, title: str, body: str) -> None:
    """Replace (or append) the ``## title`` section of a Markdown file."""
    text = doc.read_text(encoding="utf-8") if doc.exists() else "# Benchmarks\n"
    head = f"## {title}\n"
    if head in text:
        before, rest = text.split(head, 1)
        nxt = rest.find("\n## ")
        after = rest[nxt + 1:] if nxt >= 0 else ""
        text = before + head + "\n" + body.strip() + "\n\n" + after
    else:
        text = text.rstrip() + "\n\n" + head + "\n" + body.strip() + "\n"
    doc.write_text(text, encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", default="docs", help="folder of benchmarks.md and the plot")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--skip", default="", help="engine@N pairs to skip, e.g. builtin-sqlite@1000000")
    ap.add_argument("--workdir", default=None, help="scratch folder (default: a temp folder, removed after)")
    ap.add_argument("--json-out", default=None, help="also write the raw rows here")
    ap.add_argument("--from-json", default=None, help="only render the table and plot from saved rows")
    ap.add_argument("--note", default="", help="free text added under the table (e.g. machine load)")
    ap.add_argument("--baseline-python", default=None, help="also run each backend with this interpreter (a baseline checkout)")
    ap.add_argument("--build-store", default=None, help="only write the SQLite store of --n chunks here (baseline runs)")
    ap.add_argument("--n", type=int, default=0)
    ap.add_argument("--child")
    ap.add_argument("--db")
    ap.add_argument("--queries-file")
    args = ap.parse_args()
    if args.build_store:
        print(json.dumps(build_store(Path(args.build_store), args.n)))
        return 0
    if args.child:
        print(json.dumps(child(args.child, Path(args.db), Path(args.queries_file))))
        return 0
    if args.from_json:
        return report(json.loads(Path(args.from_json).read_text()), args)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="symi-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    skip = set(filter(None, args.skip.split(",")))
    rows: list[dict[str, Any]] = []
    try:
        for n in [int(s) for s in args.sizes.split(",")]:
            engines = [e for e in args.engines.split(",") if f"{e}@{n}" not in skip]
            rows += run_size(n, args.queries, work, engines, args.baseline_python)
            if args.json_out:
                Path(args.json_out).write_text(json.dumps(rows, indent=2))
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return report(rows, args)


def report(rows: list[dict[str, Any]], args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = markdown(rows, args.queries)
    print(table)
    write_section(out / "benchmarks.md", "Scale: latency, recall, memory and disk vs index size", table +
                  "\n\nTargets:\n\n" + targets(rows) + "\n\n" + args.note + "\n\n![latency vs N](scale_latency.png)\n")
    try:
        plot(rows, out / "scale_latency.png")
    except ImportError:
        print("matplotlib is not installed: the plot was not redrawn", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
