"""A full rebuild on postgres stopped mid-way keeps the vectors it was sent back (committed apart from the build's
transaction, which the stop rolls back): the next run asks the provider only for the rest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_support import PgServer

pytestmark = [pytest.mark.postgres, pytest.mark.skipif(sys.platform == "win32", reason="signals")]

FILES, LINES = 20, 20  # 20 chunks and 400 lines: 420 texts, 7 provider requests of 64


class Embeddings:
    """An OpenAI-style embeddings endpoint on loopback recording each request's texts; once ``open_for`` requests
    were answered, the next ones wait until :attr:`released` is set."""

    def __init__(self, open_for: int) -> None:
        self.open_for = open_for
        self.released = threading.Event()
        self.requests: list[list[str]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["input"]
                with outer.lock:
                    outer.requests.append(texts)
                    held = len(outer.requests) > outer.open_for
                if held:
                    outer.released.wait(60)
                elif not outer.released.is_set():
                    time.sleep(0.6)  # a slow provider: each batch is committed to the cache (CACHE_COMMIT_SECONDS)
                body = json.dumps({"data": [{"index": i, "embedding": [0.1 * (i + 1), 0.2, 0.3 + 0.01 * len(t)]}
                                            for i, t in enumerate(texts)]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()



def _sigint_default() -> None:
    """In the child before it runs: SIGINT back to its default. A run started in the background by a shell (CI's
    `nohup ... &`) ignores SIGINT, and the child would inherit that and keep running (Python installs its
    KeyboardInterrupt only over a default SIGINT), which is right for the command and wrong for this test."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

def _cli(tmp_path: Path, ws: Path, url: str, schema: str, dsn: str, *args: str) -> list[str]:
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[plugins.slots]\nmemory = "postgres"\n'
                   '[agents.defaults.memorySearch]\nprovider = "openai"\nmodel = "m1"\n'
                   f'[agents.defaults.memorySearch.remote]\nbaseUrl = "{url}"\napiKey = "sk-test-resume-pg-0123"\n'
                   f'[agents.defaults.memorySearch.store.postgres]\ndsn = "{dsn}"\nschema = "{schema}"\n',
                   encoding="utf-8")
    return [sys.executable, "-m", "symi_memory.cli", "--config", str(cfg), "--workspace", str(ws),
            "--state-dir", str(tmp_path / "state"), *args]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_an_interrupted_rebuild_keeps_its_vectors_on_postgres(tmp_path: Path, pg_server: PgServer, pg_schema: str,
                                                              sig: signal.Signals) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(FILES):
        (ws / "memory" / f"n{i}.md").write_text(
            "\n".join(f"- note {i} line {j}: the marmot burrow {i * 100 + j}" for j in range(LINES)) + "\n",
            encoding="utf-8")
    endpoint = Embeddings(open_for=3)
    try:
        cmd = _cli(tmp_path, ws, endpoint.url, pg_schema, pg_server.dsn, "index", "--force", "--json")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                preexec_fn=_sigint_default)
        try:
            deadline = time.monotonic() + 60
            while len(endpoint.requests) <= 3 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert proc.poll() is None and len(endpoint.requests) > 3, proc.communicate()
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == (130 if sig == signal.SIGINT else -signal.SIGKILL), err
        answered = [t for r in endpoint.requests[:3] for t in r]
        endpoint.released.set()
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            # The build's rows went with its transaction; the vectors it was sent are in the cache.
            assert conn.execute(f"SELECT count(*) FROM {pg_schema}.chunks").fetchone() == (0,)
            kept = conn.execute(f"SELECT count(*) FROM {pg_schema}.embedding_cache").fetchone()
        assert kept == (len(answered),)
        first = len(endpoint.requests)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        again = [t for r in endpoint.requests[first:] for t in r]
        assert not set(again) & set(answered)
        assert len(again) + len(answered) == FILES + FILES * LINES
        assert (report["embeddingsComputed"], report["embeddingsCached"]) == (len(again), len(answered))
        found = subprocess.run(_cli(tmp_path, ws, endpoint.url, pg_schema, pg_server.dsn, "search",
                                    "marmot burrow 1207", "--json"), capture_output=True, text=True, timeout=120)
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout)["results"][0]["path"] == "memory/n12.md"
    finally:
        endpoint.close()


HOLD = 4.5  # seconds another transaction holds the cache rows of the first batch's texts


class RowsHeld:
    """An embeddings endpoint taking 0.3 s a request. Before it answers the first, another transaction (another
    agent's build writing the same vectors to the fleet's shared cache) inserts those texts' cache rows and keeps
    them uncommitted for HOLD seconds: the rebuild's commits of them wait on its row locks."""

    def __init__(self, dsn: str, schema: str) -> None:
        self.dsn, self.schema = dsn, schema
        self.key: tuple[str, str, str] | None = None  # the provider's cache key; nothing is held before it is set
        self.answered: list[str] = []
        self.lock = threading.Lock()
        self.released = threading.Event()
        self.at_release: int | None = None
        self.holder: threading.Thread | None = None
        self.inner = Embeddings(open_for=10_000)
        self.inner.released.set()
        outer = self
        handler = self.inner.server.RequestHandlerClass

        class Held(handler):  # type: ignore[misc, valid-type]
            def do_POST(self) -> None:
                texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["input"]
                outer.hold(texts)
                time.sleep(0.3)
                with outer.lock:
                    outer.answered += texts
                body = json.dumps({"data": [{"index": i, "embedding": [0.1 * (i + 1), 0.2, 0.3 + 0.01 * len(t)]}
                                            for i, t in enumerate(texts)]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.inner.server.RequestHandlerClass = Held
        self.url = self.inner.url

    def hold(self, texts: list[str]) -> None:
        import hashlib

        with self.lock:
            if self.holder is not None or self.key is None:
                return
            held = threading.Event()

            def run() -> None:
                with psycopg.connect(self.dsn) as conn:
                    conn.execute(f"SET search_path = {self.schema}")
                    with conn.cursor() as cur:
                        cur.executemany("INSERT INTO embedding_cache (provider, model, fingerprint, hash, embedding, "
                                        "used_at) VALUES (%s, %s, %s, %s, %s, 0)",
                                        [(*self.key, hashlib.sha256(t.encode()).hexdigest(), b"\0" * 12)
                                         for t in texts])
                    held.set()
                    time.sleep(HOLD)
                    conn.rollback()
                with self.lock:
                    self.at_release = len(self.answered)
                self.released.set()

            self.holder = threading.Thread(target=run, daemon=True)
            self.holder.start()
        assert held.wait(30)


@pytest.mark.parametrize("pool", [4, 1], ids=["spare connection", "no spare (poolSize 1)"])
def test_a_rebuild_goes_on_while_another_transaction_holds_the_cache_rows_it_commits(
        tmp_path: Path, pg_server: PgServer, pg_schema: str, pool: int) -> None:
    """A full rebuild's commits of vectors (on a spare connection, apart from its transaction) that find the rows
    locked are skipped and taken by the next: before, one waited 2 s on the spare, then again in the build's
    transaction, and failed the rebuild there at the sync's lock_timeout (syncTimeout). With no connection to
    spare they are written in the build's transaction (a savepoint), skipped the same way."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(FILES * 2):
        (ws / "memory" / f"n{i}.md").write_text(
            "\n".join(f"- note {i} line {j}: the marmot burrow {i * 100 + j}" for j in range(LINES)) + "\n",
            encoding="utf-8")
    first = tmp_path / "first"
    (first / "memory").mkdir(parents=True)
    (first / "memory" / "a.md").write_text("- the provider's keys in the cache\n", encoding="utf-8")
    endpoint = RowsHeld(pg_server.dsn, pg_schema)
    built = subprocess.run(_cli(tmp_path, first, endpoint.url, pg_schema, pg_server.dsn, "index"),
                           capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        endpoint.key = conn.execute(f"SELECT provider, model, fingerprint FROM {pg_schema}.embedding_cache LIMIT 1"
                                    ).fetchone()
        before = conn.execute(f"SELECT count(*) FROM {pg_schema}.embedding_cache").fetchone()[0]
    endpoint.answered.clear()
    cmd = _cli(tmp_path, ws, endpoint.url, pg_schema, pg_server.dsn, "-v", "index", "--force", "--json")
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(cfg.read_text(encoding="utf-8") + f"syncTimeout = 1.0\npoolSize = {pool}\n", encoding="utf-8")

    def cached() -> int:
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            return int(conn.execute(f"SELECT count(*) FROM {pg_schema}.embedding_cache").fetchone()[0]) - before

    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert endpoint.released.wait(60)
            assert endpoint.at_release
            if pool > 1:
                # The skipped commits' vectors go with the next one, while the rebuild runs (its transaction open).
                deadline = time.monotonic() + 30
                while proc.poll() is None and cached() < endpoint.at_release and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert proc.poll() is None and cached() >= endpoint.at_release, proc.communicate()
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, err
        assert "not committed to the embedding cache yet (the index is busy" in err
        report = json.loads(out)
        sent = endpoint.answered
        assert report["full"] and report["embeddingsComputed"] == len(sent) == len(set(sent))
        assert cached() == len(sent)  # every vector the provider sent back is in the cache
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            assert conn.execute(f"SELECT count(*), count(embedding) FROM {pg_schema}.chunks "
                                "WHERE path LIKE 'memory/n%'").fetchone() == (
                FILES * 2, FILES * 2)
    finally:
        endpoint.inner.close()


class RowsHeldPastTheBuild(RowsHeld):
    """:class:`RowsHeld`, the rows held until the rebuild's transaction committed (its chunks are visible) and a
    moment more: every commit of vectors during the run finds them locked, the last one included."""

    def __init__(self, dsn: str, schema: str, chunks: int) -> None:
        super().__init__(dsn, schema)
        self.chunks = chunks

    def hold(self, texts: list[str]) -> None:
        import hashlib

        with self.lock:
            if self.holder is not None or self.key is None:
                return
            held = threading.Event()

            def run() -> None:
                with psycopg.connect(self.dsn) as conn, psycopg.connect(self.dsn, autocommit=True) as look:
                    conn.execute(f"SET search_path = {self.schema}")
                    with conn.cursor() as cur:
                        cur.executemany("INSERT INTO embedding_cache (provider, model, fingerprint, hash, embedding, "
                                        "used_at) VALUES (%s, %s, %s, %s, %s, 0)",
                                        [(*self.key, hashlib.sha256(t.encode()).hexdigest(), b"\0" * 12)
                                         for t in texts])
                    held.set()
                    deadline = time.monotonic() + 60
                    while time.monotonic() < deadline and look.execute(
                            f"SELECT count(*) FROM {self.schema}.chunks WHERE path LIKE 'memory/n%%'"
                            ).fetchone()[0] < self.chunks:
                        time.sleep(0.05)
                    time.sleep(0.5)
                    conn.rollback()
                self.released.set()

            self.holder = threading.Thread(target=run, daemon=True)
            self.holder.start()
        assert held.wait(30)


def test_a_rebuild_keeps_every_vector_when_a_cache_row_stays_locked_until_it_lands(
        tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    """Another transaction keeps the first batch's cache rows locked from the rebuild's first request until after
    its transaction committed: every commit of vectors in the run is skipped, so all of them are still pending when
    the build lands. The swap of a postgres build stores no vector in the cache (its chunks hold them), and the last
    try was skipped like the others (200 ms): every vector the provider sent back was dropped from the cache, and the
    next `index --force` paid for all of them again. Now the last commit waits for the lock as cache_put does."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(FILES):
        (ws / "memory" / f"n{i}.md").write_text(
            "\n".join(f"- note {i} line {j}: the marmot burrow {i * 100 + j}" for j in range(LINES)) + "\n",
            encoding="utf-8")
    first = tmp_path / "first"
    (first / "memory").mkdir(parents=True)
    (first / "memory" / "a.md").write_text("- the provider's keys in the cache\n", encoding="utf-8")
    endpoint = RowsHeldPastTheBuild(pg_server.dsn, pg_schema, FILES)
    try:
        built = subprocess.run(_cli(tmp_path, first, endpoint.url, pg_schema, pg_server.dsn, "index"),
                               capture_output=True, text=True, timeout=120)
        assert built.returncode == 0, built.stderr
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            endpoint.key = conn.execute(f"SELECT provider, model, fingerprint FROM {pg_schema}.embedding_cache "
                                        "LIMIT 1").fetchone()
            before = conn.execute(f"SELECT count(*) FROM {pg_schema}.embedding_cache").fetchone()[0]
        endpoint.answered.clear()
        cmd = _cli(tmp_path, ws, endpoint.url, pg_schema, pg_server.dsn, "index", "--force", "--json")
        cfg = tmp_path / "cfg.toml"
        cfg.write_text(cfg.read_text(encoding="utf-8") + "syncTimeout = 30.0\n", encoding="utf-8")
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert endpoint.released.wait(30)
        sent = endpoint.answered
        assert json.loads(done.stdout)["embeddingsComputed"] == len(sent) == FILES + FILES * LINES
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            cached = conn.execute(f"SELECT count(*) FROM {pg_schema}.embedding_cache").fetchone()[0] - before
        assert cached == len(sent)  # every vector the provider sent back is in the cache
        again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["embeddingsComputed"] == 0
    finally:
        endpoint.inner.close()
