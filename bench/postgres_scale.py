"""The postgres backend (contrib/symi-memory-postgres) side by side with builtin-sqlite, in one run.

1. devmem: the same queries through both backends with the same provider
   (``hash``): MRR@10 and how often the top result is the same.
2. Scale: N chunks of 384-d (the clustered synthetic data of bench/scale.py)
   written through each backend's store (the write phase of a sync); hybrid
   search p50/p95 and throughput with 1, 4 and 16 concurrent clients;
   recall@10 of the HNSW vector side against exact search on the server;
   build time; disk.
3. Fleet: 8 agents syncing into one server while 8 clients search; errors,
   then rows against the files (a lost or duplicated chunk shows as a
   mismatch with builtin-sqlite's count for the same workspace).

Starts its own throwaway server with .ci/start-postgres.sh unless --dsn is given.

    python bench/postgres_scale.py --n 100000 --queries 200

Needs the plugin installed (pip install ./contrib/symi-memory-postgres).
"""

from __future__ import annotations

import os

os.environ.setdefault("SYMI_MEMORY_TESTING", "1")  # the deterministic `hash` provider

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from scale import IDENTITY, bench_plugin, build_store, make_data, make_queries, pct, words  # noqa: E402

SCRIPT = REPO / ".ci" / "start-postgres.sh"
CONTRIB = REPO / "contrib" / "symi-memory-postgres"
K = 10


def ensure_plugin(work: Path) -> None:
    """Use the installed plugin, else pip-install this checkout's into ``work`` (offline) for this run."""
    import importlib
    import importlib.metadata

    try:
        importlib.metadata.distribution("symi-memory-postgres")
        return
    except importlib.metadata.PackageNotFoundError:
        pass
    target = work / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation",
                    "--disable-pip-version-check", "--target", str(target), str(CONTRIB)], check=True,
                   env={**os.environ, "TMPDIR": str(work)})
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()


# ------------------------------------------------------------------ server


class Server:
    def __init__(self, dsn: str | None) -> None:
        self.dir: Path | None = None
        if dsn:
            self.dsn = dsn
            return
        self.dir = Path(tempfile.mkdtemp(prefix="symi-pg-bench-"))
        port = subprocess.run(["bash", str(SCRIPT), "start", str(self.dir)], check=True, capture_output=True,
                              text=True).stdout.split()[-1]
        self.dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"

    def stop(self) -> None:
        if self.dir:
            subprocess.run(["bash", str(SCRIPT), "stop", str(self.dir)], capture_output=True)


def sql(dsn: str, query: str, params: Any = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def pg_overrides(dsn: str, schema: str, **extra: Any) -> dict[str, Any]:
    return {"plugins": {"slots": {"memory": "postgres"}},
            "agents": {"defaults": {"memorySearch": {"store": {"postgres": {"dsn": dsn, "schema": schema,
                                                                            "poolSize": 16, **extra}}}}}}


# ------------------------------------------------------------------ devmem


def devmem(dsn: str) -> dict[str, Any]:
    from symi_memory import load_config
    from symi_memory.evaluation import run_eval

    dataset = REPO / "bench" / "datasets" / "devmem"
    out: dict[str, Any] = {}
    tops: dict[str, dict[str, Any]] = {}
    for name, overrides in (("builtin-sqlite", {}), ("postgres", pg_overrides(dsn, "bench_devmem"))):
        with tempfile.TemporaryDirectory() as tmp:
            base = {"agents": {"defaults": {"memorySearch": {"provider": "hash"}}}}
            from symi_memory.config.fields import deep_merge

            cfg = load_config(None, state_dir=tmp, overrides=deep_merge(base, overrides))
            results = Path(tmp) / "results.json"
            started = time.perf_counter()
            res = run_eval(dataset, config=cfg, results_out=results)
            secs = time.perf_counter() - started
            run = {d["id"]: d["hits"] for d in map(json.loads, results.read_text().splitlines())}
        tops[name] = {q: [(h["path"], h["start_line"]) for h in hits[:5]] for q, hits in run.items()}
        out[name] = {"mrr@10": res["overall"]["mrr@10"], "hit@1": res["overall"]["hit@1"],
                     "hit@5": res["overall"]["hit@5"], "seconds": secs}
    qs = sorted(tops["builtin-sqlite"])
    same1 = sum(1 for q in qs if tops["builtin-sqlite"][q][:1] == tops["postgres"].get(q, [])[:1])
    overlap5 = np.mean([len(set(tops["builtin-sqlite"][q]) & set(tops["postgres"].get(q, []))) / max(
        1, len(tops["builtin-sqlite"][q])) for q in qs])
    out["same_top1"] = same1 / len(qs)
    out["top5_overlap"] = float(overlap5)
    out["queries"] = len(qs)
    sql(dsn, "DROP SCHEMA IF EXISTS bench_devmem CASCADE")
    return out


# ------------------------------------------------------------------- scale


def rows_for(n: int):
    from symi_memory.indexing import ChunkRow, FileRow

    _, labels, vecs = make_data(n)
    rng = np.random.default_rng(2)  # the same texts as scale.build_store
    for f in range(0, n, 50):
        rel = f"memory/gen/{f // 50:06d}.md"
        rows = []
        for i in range(f, min(n, f + 50)):
            text = " ".join(words(int(labels[i]), rng, 60))
            rows.append(ChunkRow(id=f"{i:09d}", path=rel, source="memory", start_line=i - f + 1, end_line=i - f + 1,
                                 hash=f"{i}", text=text, embedding=vecs[i].tobytes()))
        yield FileRow(path=rel, source="memory", hash=rel, mtime=0.0, size=0, lines=len(rows)), rows


def load_pg(dsn: str, schema: str, n: int) -> float:
    import psycopg

    from symi_memory_postgres.store import PgStore, ensure_schema

    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        ensure_schema(conn, schema)
        store = PgStore(conn=conn, schema=schema, owner="bench")
        # As a first (full) sync writes an agent: one transaction, then the HNSW index is built.
        store.build_full(rows_for(n), skipped={}, meta={"identity": json.dumps(IDENTITY, sort_keys=True)})
        conn.execute(f"ANALYZE {schema}.chunks")
    return time.perf_counter() - started


def open_backend(kind: str, dsn: str, schema: str, db: Path, queries: list[dict[str, Any]]) -> Any:
    from symi_memory import load_config
    from symi_memory.config.fields import deep_merge
    from symi_memory.manager import open_memory

    table = {q["text"]: q["vector"] for q in queries}

    ws = Path(tempfile.mkdtemp(prefix="bench-ws-"))
    base = {"agents": {"defaults": {"memorySearch": {"provider": "bench", "store": {"path": str(db)}}}}}
    over = deep_merge(base, pg_overrides(dsn, schema, agentId="bench")) if kind == "postgres" else base
    mem = open_memory(load_config(None, state_dir=ws, overrides=over), workspace=ws, start=False,
                      plugins=[("bench", bench_plugin(table))])
    if kind == "builtin-sqlite":
        while not mem.backend.vectors.ready():
            time.sleep(0.05)
    return mem


def latency(mem: Any, queries: list[dict[str, Any]], clients: int) -> dict[str, float]:
    times: list[float] = []
    errors = [0]
    lock = threading.Lock()
    work = list(queries)

    def client(part: list[dict[str, Any]]) -> None:
        for q in part:
            t = time.perf_counter()
            try:
                resp = mem.search(q["text"], max_results=10, min_score=0)
                ok = bool(resp.results) and resp.mode == "hybrid"
            except Exception:
                ok = False
            dt = time.perf_counter() - t
            with lock:
                times.append(dt)
                errors[0] += 0 if ok else 1

    per = [work[i::clients] for i in range(clients)]
    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(p,)) for p in per]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    return {"p50_ms": pct(times, 50), "p95_ms": pct(times, 95), "qps": len(times) / wall, "errors": errors[0]}


def recall(dsn: str, schema: str, n: int, queries: list[dict[str, Any]], ef_search: int) -> dict[str, Any]:
    """recall@10 of the server's HNSW scan against the exact top 10 (numpy over the same vectors)."""
    import psycopg

    _, _, vecs = make_data(n)
    q_sql = (f"SELECT cid FROM {schema}.chunks c WHERE c.dims = 384 AND c.owner = ANY(%s) "
             f"ORDER BY (c.embedding::vector(384)) <=> %s::vector(384) LIMIT {K}")
    got, times, plan = [], [], ""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"SET hnsw.ef_search = {ef_search}")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        probe = "[" + ",".join(repr(x) for x in queries[0]["vector"]) + "]"
        plan = " ".join(r[0] for r in conn.execute("EXPLAIN " + q_sql, (["bench"], probe)).fetchall())
        for q in queries:
            v = "[" + ",".join(repr(x) for x in q["vector"]) + "]"
            t = time.perf_counter()
            got.append({int(r[0]) for r in conn.execute(q_sql, (["bench"], v)).fetchall()})
            times.append(time.perf_counter() - t)
    exact = []
    for q in queries:
        s = vecs @ np.asarray(q["vector"], dtype=np.float32)
        exact.append({int(i) for i in np.argpartition(-s, K)[:K]})
    return {"recall@10": float(np.mean([len(a & b) / K for a, b in zip(got, exact, strict=True)])),
            "hnsw_in_plan": "chunks_hnsw_384" in plan, "vector_hnsw_p50_ms": pct(times, 50)}


def scale(dsn: str, n: int, count: int, work: Path) -> dict[str, Any]:
    schema = f"bench_scale_{n}"
    sql(dsn, f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    db = work / f"scale-{n}.sqlite"
    print(f"[N={n}] builtin-sqlite store ...", file=sys.stderr, flush=True)
    sqlite_build = build_store(db, n)["seconds"]
    print(f"[N={n}] postgres rows (one full-sync transaction, then the HNSW build) ...", file=sys.stderr, flush=True)
    pg_build = load_pg(dsn, schema, n)
    queries = make_queries(n, count)
    out: dict[str, Any] = {"n": n, "queries": count, "build_s": {"builtin-sqlite": sqlite_build, "postgres": pg_build}}
    out["disk_bytes"] = {
        "builtin-sqlite": sum(p.stat().st_size for p in db.parent.glob(db.name + "*")),
        "postgres": int(sql(dsn, "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n "
                                 "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'", (schema,))[0][0]),
    }
    out["latency"] = {}
    for kind in ("builtin-sqlite", "postgres"):
        mem = open_backend(kind, dsn, schema, db, queries)
        latency(mem, queries[:20], 1)  # warm-up (caches, pool)
        out["latency"][kind] = {}
        for clients in (1, 4, 16):
            print(f"[N={n}] {kind} hybrid with {clients} clients ...", file=sys.stderr, flush=True)
            out["latency"][kind][clients] = latency(mem, queries, clients)
        if kind == "postgres":
            out["status_vector"] = mem.status()["vector"]
        mem.close()
    out["recall"] = recall(dsn, schema, n, queries, 100)
    sql(dsn, f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    for p in db.parent.glob(db.name + "*"):
        p.unlink()
    return out


# ------------------------------------------------------------------- fleet


def fleet(dsn: str, work: Path, agents: int = 8, searchers: int = 8, files: int = 150) -> dict[str, Any]:
    from symi_memory import load_config
    from symi_memory.config.fields import deep_merge
    from symi_memory.manager import open_memory

    schema = "bench_fleet"
    sql(dsn, f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    rng = random.Random(5)
    spaces = []
    for a in range(agents):
        ws = work / f"agent{a}"
        for i in range(files):
            p = ws / "memory" / f"{i:04d}.md"
            p.parent.mkdir(parents=True, exist_ok=True)
            body = "\n\n".join(" ".join(rng.choice(["alpha", "beta", "gamma", "delta", f"a{a}tok{i}", "note",
                                                    "deploy", "ledger", "harbour"]) for _ in range(40))
                               for _ in range(rng.randint(1, 6)))
            p.write_text(f"# agent {a} file {i}\n\n{body}\n", encoding="utf-8")
        spaces.append(ws)

    def manager(i: int, kind: str) -> Any:
        base = {"agents": {"defaults": {"memorySearch": {"provider": "hash", "sync": {"watch": False}}}}}
        over = deep_merge(base, pg_overrides(dsn, schema)) if kind == "postgres" else base
        return open_memory(load_config(None, state_dir=work / f"state-{kind}-{i}", overrides=over),
                           workspace=spaces[i], agent_id=f"agent{i}", start=False)

    mems = [manager(i, "postgres") for i in range(agents)]
    errors: list[str] = []
    searches = [0]
    done = threading.Event()

    def syncer(i: int) -> None:
        try:
            mems[i].sync()
        except Exception as exc:
            errors.append(f"sync agent{i}: {exc}")

    def searcher(j: int) -> None:
        r = random.Random(j)
        while not done.is_set():
            i = r.randrange(agents)
            try:
                resp = mems[i].search(f"a{i}tok{r.randrange(files)} deploy", min_score=0)
                if resp.mode == "unavailable":
                    errors.append(f"search: {resp.fallback}")
                searches[0] += 1
            except Exception as exc:
                errors.append(f"search agent{i}: {exc}")

    rounds = []
    for rnd in range(2):
        if rnd == 1:  # edits and deletions in every workspace, synced concurrently again
            for a, ws in enumerate(spaces):
                for i in range(0, files, 10):
                    (ws / "memory" / f"{i:04d}.md").write_text(f"# edited {a} {i}\n\nnew text a{a}edit{i}\n",
                                                               encoding="utf-8")
                for i in range(5, files, 25):
                    (ws / "memory" / f"{i:04d}.md").unlink()
        done.clear()
        started = time.perf_counter()
        s_threads = [threading.Thread(target=searcher, args=(j,)) for j in range(searchers)]
        y_threads = [threading.Thread(target=syncer, args=(i,)) for i in range(agents)]
        for t in s_threads + y_threads:
            t.start()
        for t in y_threads:
            t.join()
        secs = time.perf_counter() - started
        done.set()
        for t in s_threads:
            t.join()
        rounds.append({"seconds": secs, "searches": searches[0]})
    # Rows against the files: builtin-sqlite indexes the same workspaces with the same chunker.
    mismatches = []
    total_pg = total_ref = 0
    for i in range(agents):
        ref = manager(i, "builtin-sqlite")
        ref.sync()
        want_files, want_chunks = ref.status()["files"], ref.status()["chunks"]
        ref.close()
        got = sql(dsn, f"SELECT (SELECT count(*) FROM {schema}.files WHERE owner = %s), count(*), "
                       f"count(DISTINCT (path, start_line, end_line, hash)) FROM {schema}.chunks WHERE owner = %s",
                  (f"agent{i}", f"agent{i}"))[0]
        on_disk = len(list((spaces[i] / "memory").glob("*.md")))
        total_pg += got[1]
        total_ref += want_chunks
        if not (got[0] == want_files == on_disk and got[1] == got[2] == want_chunks):
            mismatches.append({"agent": i, "pg": got, "sqlite": (want_files, want_chunks), "files": on_disk})
    for m in mems:
        m.close()
    sql(dsn, f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return {"agents": agents, "searchers": searchers, "rounds": rounds, "errors": errors[:5], "error_count": len(errors),
            "chunks_postgres": total_pg, "chunks_builtin": total_ref, "mismatches": mismatches}


# -------------------------------------------------------------------- main


def report(res: dict[str, Any]) -> str:
    lines = []
    if "devmem" in res:
        d = res["devmem"]
        lines += ["### devmem, hash provider, hybrid (weighted)", "",
                  "| backend | hit@1 | hit@5 | MRR@10 | seconds (index + queries) |", "|---|---|---|---|---|"]
        for k in ("builtin-sqlite", "postgres"):
            lines.append(f"| {k} | {d[k]['hit@1']:.3f} | {d[k]['hit@5']:.3f} | {d[k]['mrr@10']:.3f} | {d[k]['seconds']:.1f} |")
        lines += ["", f"Same top result on {d['same_top1']:.1%} of {d['queries']} queries; top-5 overlap "
                      f"{d['top5_overlap']:.1%}.", ""]
    for s in res.get("scale", []):
        lines += [f"### {s['n']:,} chunks of 384-d, {s['queries']} queries", "",
                  "| backend | clients | hybrid p50 ms | hybrid p95 ms | searches/s |", "|---|---|---|---|---|"]
        for k in ("builtin-sqlite", "postgres"):
            for c, r in s["latency"][k].items():
                lines.append(f"| {k} | {c} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['qps']:.1f} |")
        rc = s["recall"]
        lines += ["", f"Build (rows written through each store, indexes included): builtin-sqlite "
                      f"{s['build_s']['builtin-sqlite']:.1f} s, postgres {s['build_s']['postgres']:.1f} s. "
                      f"Disk: builtin-sqlite {s['disk_bytes']['builtin-sqlite'] / 1e6:.0f} MB, postgres "
                      f"{s['disk_bytes']['postgres'] / 1e6:.0f} MB (tables + indexes).",
                  f"HNSW (m 16, efConstruction 64, efSearch 100) recall@10 against the exact top 10 (numpy, same "
                  f"vectors): {rc['recall@10']:.3f}; vector-only query p50 {rc['vector_hnsw_p50_ms']:.1f} ms; "
                  f"HNSW in the plan: {rc['hnsw_in_plan']}; "
                  f"status hnswUsed: {s['status_vector'].get('hnswUsed')}.", ""]
    if "fleet" in res:
        f = res["fleet"]
        lines += [f"### Fleet: {f['agents']} agents syncing while {f['searchers']} clients search", "",
                  "Two rounds (initial sync; then edits and deletions): "
                  + ", ".join(f"{r['seconds']:.1f} s" for r in f["rounds"])
                  + f"; {f['rounds'][-1]['searches']} searches; errors: {f['error_count']}; chunks on the server "
                  f"{f['chunks_postgres']} vs {f['chunks_builtin']} from builtin-sqlite over the same files; "
                  f"agents with lost or duplicated rows: {len(f['mismatches'])}.", ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=None, help="use this server (default: start a throwaway one)")
    ap.add_argument("--n", default="100000", help="comma-separated chunk counts")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--parts", default="devmem,scale,fleet")
    ap.add_argument("--json", default=None, help="also write the raw results here")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    server = Server(args.dsn)
    work = Path(tempfile.mkdtemp(prefix="symi-pg-bench-work-"))
    res: dict[str, Any] = {}
    try:
        ensure_plugin(work)
        version = sql(server.dsn, "SHOW server_version")[0][0]
        print(f"server {version}", file=sys.stderr)
        if "devmem" in parts:
            res["devmem"] = devmem(server.dsn)
            print(report({"devmem": res["devmem"]}), flush=True)
        if "fleet" in parts:
            res["fleet"] = fleet(server.dsn, work)
            print(report({"fleet": res["fleet"]}), flush=True)
        if "scale" in parts:
            res["scale"] = []
            for n in (int(x) for x in args.n.split(",")):
                res["scale"].append(scale(server.dsn, n, args.queries, work))
                print(report({"scale": [res["scale"][-1]]}), flush=True)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
        if args.json:
            Path(args.json).write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
