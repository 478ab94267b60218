"""What the run after an interrupted full rebuild asks of the provider, and how long it takes.

For each interpreter (this tree's, and with ``--baseline-python`` another tree's), in a fresh state dir:
``index --force`` against an OpenAI-style endpoint on loopback that takes ``--delay`` seconds a request (a slow
provider), SIGKILLed once ``--kill-at`` of its requests were answered; then ``index --force`` again, timed, counting
the requests and texts it sends. An uninterrupted build is timed too, for scale.

    python bench/resume_rebuild.py --baseline-python /tmp/py-baseb96
    python bench/resume_rebuild.py --pg-dsn postgresql://postgres@127.0.0.1:PORT/postgres  # the postgres backend
    python bench/resume_rebuild.py --wal --baseline-python /tmp/py-base21 --files 200 --dims 384

``--wal`` (builtin-sqlite): instead, one uninterrupted ``index --force`` per side on a fresh state dir, sampling the
size of the index's ``-wal`` file every 20 ms: its largest while the provider was still being asked (the 0.5 s
commits of vectors), its largest overall (the swap's one transaction writes the whole index) and at the end. With
``--reader`` another process holds a read transaction on the index for the whole run (a search that never ends:
no checkpoint can go past its snapshot), the worst case for the commits' WAL. With ``--pg-dsn`` too: the server's
WAL written (``pg_current_wal_lsn`` before and after, MB) while embedding and over the whole run, and the embedding
cache table's size at the end (the commits are separate transactions on a spare connection: each writes its rows and
its own WAL records; the server checkpoints on its own).

With ``--pg-dsn`` each run gets a schema of its own (dropped after); the plugin is put on PYTHONPATH from each
tree's ``contrib/symi-memory-postgres`` (the baseline's tree from its interpreter's PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent


class Endpoint:
    def __init__(self, delay: float, dims: int = 8) -> None:
        self.delay = delay
        self.last_answer = 0.0  # time.monotonic() of the latest answer
        self.requests: list[int] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["input"]
                time.sleep(outer.delay)
                body = json.dumps({"data": [{"index": i, "embedding": [((hash(t) >> (k % 48)) % 97 + k) / 97.0
                                                                      for k in range(dims)]}
                                            for i, t in enumerate(texts)]}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the client was killed meanwhile: not answered
                    return
                with outer.lock:
                    outer.requests.append(len(texts))
                    outer.last_answer = time.monotonic()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def workspace(root: Path, files: int, lines: int) -> None:
    for i in range(files):
        p = root / "memory" / f"note-{i:04d}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# Note {i}\n\n" + "\n".join(
            f"- on day {j} of project {i} the team decided item {i * 1000 + j} about topic {j % 13}"
            for j in range(lines)) + "\n", encoding="utf-8")


def run(python: list[str], env: dict[str, str], state: Path, ws: Path, url: str, dsn: str | None,
        kill_after: int | None, endpoint: Endpoint) -> tuple[int, int, float]:
    """One ``index --force``: (requests, texts, seconds); SIGKILLed after ``kill_after`` answered requests."""
    cfg = state / "cfg.toml"
    text = (f'[agents.defaults.memorySearch]\nprovider = "openai"\nmodel = "bench"\n'
            f'[agents.defaults.memorySearch.remote]\nbaseUrl = "{url}"\napiKey = "sk-bench-0123456789"\n')
    if dsn:
        text = ('[plugins.slots]\nmemory = "postgres"\n' + text +
                f'[agents.defaults.memorySearch.store.postgres]\ndsn = "{dsn}"\nschema = "{env["BENCH_SCHEMA"]}"\n')
    state.mkdir(parents=True, exist_ok=True)
    cfg.write_text(text, encoding="utf-8")
    cmd = [*python, "-m", "symi_memory.cli", "--config", str(cfg), "--workspace", str(ws), "--state-dir", str(state),
           "index", "--force", "--json"]
    before = len(endpoint.requests)
    texts_before = sum(endpoint.requests)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if kill_after is not None:
        while len(endpoint.requests) - before < kill_after and proc.poll() is None:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate()
    seconds = time.perf_counter() - t0
    if kill_after is None and proc.returncode != 0:
        raise SystemExit(f"index failed ({proc.returncode}): {err[-2000:]}")
    return len(endpoint.requests) - before, sum(endpoint.requests) - texts_before, seconds


READER = """
import sys, apsw
conn = apsw.Connection(sys.argv[1])
conn.set_busy_timeout(10_000)
conn.execute("BEGIN")
conn.execute("SELECT count(*) FROM meta").fetchall()  # the snapshot is taken here, and kept until the end
print("reading", flush=True)
sys.stdin.read()
"""


def pg_wal_run(python: list[str], env: dict[str, str], state: Path, ws: Path, endpoint: Endpoint,
               dsn: str) -> dict[str, float]:
    """One ``index --force`` on postgres: the server's WAL written (MB) while embedding and in all, the cache's size."""
    import psycopg

    cfg = state / "cfg.toml"
    state.mkdir(parents=True, exist_ok=True)
    schema = env["BENCH_SCHEMA"]
    cfg.write_text('[plugins.slots]\nmemory = "postgres"\n'
                   f'[agents.defaults.memorySearch]\nprovider = "openai"\nmodel = "bench"\n'
                   f'[agents.defaults.memorySearch.remote]\nbaseUrl = "{endpoint.url}"\n'
                   'apiKey = "sk-bench-0123456789"\n'
                   f'[agents.defaults.memorySearch.store.postgres]\ndsn = "{dsn}"\nschema = "{schema}"\n',
                   encoding="utf-8")
    with psycopg.connect(dsn, autocommit=True) as conn:
        lsn = lambda: conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]  # noqa: E731
        diff = lambda a, b: float(conn.execute("SELECT pg_wal_lsn_diff(%s, %s)", (a, b)).fetchone()[0])  # noqa: E731
        start = lsn()
        asked = len(endpoint.requests)
        samples: list[tuple[float, str]] = []
        proc = subprocess.Popen([*python, "-m", "symi_memory.cli", "--config", str(cfg), "--workspace", str(ws),
                                 "--state-dir", str(state), "index", "--force", "--json"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
        while proc.poll() is None:
            samples.append((time.monotonic(), lsn()))
            time.sleep(0.05)
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"index failed ({proc.returncode}): {err[-2000:]}")
        embedded = endpoint.last_answer if len(endpoint.requests) > asked else 0.0
        during = [at for t, at in samples if t <= embedded]
        mb = 1e6
        return {"embedding": (diff(during[-1], start) if during else 0.0) / mb,
                "peak": diff(lsn(), start) / mb,
                "end": float(conn.execute("SELECT pg_total_relation_size(%s)",
                                          (f"{schema}.embedding_cache",)).fetchone()[0]) / mb,
                "texts": float(json.loads(out)["embeddingsComputed"])}


def wal_run(python: list[str], env: dict[str, str], state: Path, ws: Path, endpoint: Endpoint,
            reader: bool) -> dict[str, float]:
    """One ``index --force`` on a fresh state dir, sampling its WAL's size (MB): while embedding, peak, at the end."""
    cfg = state / "cfg.toml"
    state.mkdir(parents=True, exist_ok=True)
    cfg.write_text(f'[agents.defaults.memorySearch]\nprovider = "openai"\nmodel = "bench"\n'
                   f'[agents.defaults.memorySearch.remote]\nbaseUrl = "{endpoint.url}"\n'
                   'apiKey = "sk-bench-0123456789"\n', encoding="utf-8")
    base = [*python, "-m", "symi_memory.cli", "--config", str(cfg), "--workspace", str(ws), "--state-dir", str(state)]
    holder = None
    samples: list[tuple[float, int]] = []
    asked = len(endpoint.requests)
    proc = subprocess.Popen([*base, "index", "--force", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    wal: Path | None = None
    while proc.poll() is None:
        if wal is None:
            found = [p for p in (state / "memory").glob("*.sqlite")] if (state / "memory").is_dir() else []
            wal = Path(f"{found[0]}-wal") if found else None
        if wal is not None and reader and holder is None and len(endpoint.requests) > asked:
            # Once the provider is first asked (the index exists), the other process starts reading.
            holder = subprocess.Popen([sys.executable, "-c", READER, str(wal)[:-4]], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, env=env)
            assert holder.stdout is not None and holder.stdout.readline().strip() == "reading"
        try:
            samples.append((time.monotonic(), wal.stat().st_size if wal else 0))
        except FileNotFoundError:
            samples.append((time.monotonic(), 0))
        time.sleep(0.02)
    out, err = proc.communicate()
    if holder is not None:
        holder.communicate("")
    if proc.returncode != 0:
        raise SystemExit(f"index failed ({proc.returncode}): {err[-2000:]}")
    embedded = endpoint.last_answer if len(endpoint.requests) > asked else 0.0
    mb = 1e6
    return {"embedding": max((n for t, n in samples if t <= embedded), default=0) / mb,
            "peak": max((n for _, n in samples), default=0) / mb,
            "end": (wal.stat().st_size if wal and wal.exists() else 0) / mb,
            "texts": float(json.loads(out)["embeddingsComputed"])}


def wal_main(args: argparse.Namespace, endpoint: Endpoint, ws: Path) -> None:
    sides = [("this tree", [sys.executable])]
    if args.baseline_python:
        sides.insert(0, ("baseline", [args.baseline_python]))
    rows = []
    for name, python in sides:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SYMI_")}
        if python == [sys.executable]:
            env["PYTHONPATH"] = f"{HERE / 'core'}:{HERE / 'plugins'}"
        with tempfile.TemporaryDirectory(prefix=f"wal-{name.replace(' ', '-')}-") as tmp:
            if not args.pg_dsn:
                rows.append((name, wal_run(python, env, Path(tmp), ws, endpoint, args.reader)))
                continue
            import psycopg

            tree = tree_of(python) if python != [sys.executable] else HERE
            env["BENCH_SCHEMA"] = "bench_" + uuid.uuid4().hex[:10]
            env["PYTHONPATH"] = ":".join(str(p) for p in (tree / "contrib" / "symi-memory-postgres", tree / "core",
                                                           tree / "plugins"))
            env["SYMI_MEMORY_PLUGINS"] = "symi_memory_postgres.hooks"
            try:
                rows.append((name, pg_wal_run([sys.executable], env, Path(tmp), ws, endpoint, args.pg_dsn)))
            finally:
                with psycopg.connect(args.pg_dsn, autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA IF EXISTS {env['BENCH_SCHEMA']} CASCADE")
    what = "postgres: server WAL written" if args.pg_dsn else "builtin-sqlite WAL"
    print(f"{what} over `index --force`: {args.files} files x {args.lines} lines "
          f"({int(rows[0][1]['texts'])} texts embedded), {args.dims}-d vectors, endpoint {args.delay * 1000:.0f} ms "
          f"a request{', another process reading throughout' if args.reader else ''}")
    labels = ((("embedding", "WAL MB written while embedding"), ("peak", "WAL MB written in all"),
               ("end", "embedding_cache MB at the end")) if args.pg_dsn else
              (("embedding", "-wal MB, largest while embedding"), ("peak", "-wal MB, largest (the swap)"),
               ("end", "-wal MB at the end")))
    print("| | " + " | ".join(n for n, _ in rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for key, label in labels:
        print(f"| {label} | " + " | ".join(f"{r[key]:.1f}" for _, r in rows) + " |")


def tree_of(python: list[str]) -> Path:
    """The source tree an interpreter runs (its PYTHONPATH's ``core``), for the postgres plugin beside it."""
    out = subprocess.run([*python, "-c", "import symi_memory, pathlib; print(pathlib.Path(symi_memory.__file__).parent)"],
                         capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": os.environ.get(
                             "PYTHONPATH", "")}).stdout.strip()
    return Path(out).parent.parent


def side(name: str, python: list[str], args: argparse.Namespace, ws: Path, endpoint: Endpoint) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYMI_")}
    if python == [sys.executable]:
        env["PYTHONPATH"] = f"{HERE / 'core'}:{HERE / 'plugins'}"
    tree = tree_of(python) if python != [sys.executable] else HERE
    result: dict[str, Any] = {"side": name}
    for kill in (None, args.kill_at):
        state = Path(tempfile.mkdtemp(prefix=f"resume-{name}-"))
        schema = "bench_" + uuid.uuid4().hex[:10]
        if args.pg_dsn:
            # This interpreter on the tree's own paths (a wrapper script may set PYTHONPATH over ours).
            python = [sys.executable]
            env["BENCH_SCHEMA"] = schema
            env["PYTHONPATH"] = ":".join(str(p) for p in (tree / "contrib" / "symi-memory-postgres", tree / "core",
                                                           tree / "plugins"))
            env["SYMI_MEMORY_PLUGINS"] = "symi_memory_postgres.hooks"
        try:
            first = run(python, env, state, ws, endpoint.url, args.pg_dsn, kill, endpoint)
            if kill is None:
                result["full build"] = first
                continue
            result["killed run"] = first
            result["rerun"] = run(python, env, state, ws, endpoint.url, args.pg_dsn, None, endpoint)
        finally:
            shutil.rmtree(state, ignore_errors=True)
            if args.pg_dsn:
                import psycopg

                with psycopg.connect(args.pg_dsn, autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--lines", type=int, default=20)
    ap.add_argument("--delay", type=float, default=0.05, help="seconds the endpoint takes per request (64 texts)")
    ap.add_argument("--kill-at", type=int, default=40, help="SIGKILL after this many answered requests")
    ap.add_argument("--baseline-python", help="an interpreter (or wrapper script) running the baseline tree")
    ap.add_argument("--pg-dsn", help="measure the contrib postgres backend on this server")
    ap.add_argument("--dims", type=int, default=8, help="the endpoint's vector dimensions")
    ap.add_argument("--wal", action="store_true", help="measure the index's -wal file over a full build (see above)")
    ap.add_argument("--reader", action="store_true", help="with --wal: another process reading throughout")
    args = ap.parse_args()
    endpoint = Endpoint(args.delay, args.dims)
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        workspace(ws, args.files, args.lines)
        if args.wal:
            wal_main(args, endpoint, ws)
            return
        sides = [("this tree", [sys.executable])]
        if args.baseline_python:
            sides.insert(0, ("baseline", [args.baseline_python]))
        rows = [side(name, py, args, ws, endpoint) for name, py in sides]
    backend = "postgres" if args.pg_dsn else "builtin-sqlite"
    print(f"{backend}: {args.files} files x {args.lines} lines, endpoint {args.delay * 1000:.0f} ms a request, "
          f"SIGKILL after {args.kill_at} answered requests")
    print("| | " + " | ".join(r["side"] for r in rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for key in ("full build", "killed run", "rerun"):
        print(f"| {key}: requests / texts / s | " + " | ".join(
            f"{r[key][0]} / {r[key][1]} / {r[key][2]:.1f}" for r in rows) + " |")


if __name__ == "__main__":
    main()
