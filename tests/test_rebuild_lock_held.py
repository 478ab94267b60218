"""A full rebuild whose 0.5 s commits of vectors find another process holding the index's write lock goes on: the
commit is skipped, its vectors go with the next one (or the swap), and the rebuild lands with every vector."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.loopback_http import LoopbackServer, Recorded, Reply
from support.sqlite_memory import wait_for, write

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the lock holder is a second process")

FILES, LINES = 40, 20  # 840 texts: 14 provider requests of 64
DELAY = 0.2  # seconds a request takes: the run embeds for about 3 s
HOLD = 1.0  # seconds the other process holds the write lock, from the first request on

# The other process: takes the index's write lock, says so, keeps it HOLD seconds.
HOLDER = f"""
import sys, time, apsw
conn = apsw.Connection(sys.argv[1])
conn.set_busy_timeout(10_000)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep({HOLD})
conn.execute("ROLLBACK")
"""

# The rebuild, with SQLite's lock waits cut short (by default a write waits out a 10 s busy timeout and four retries,
# about a minute, before it fails: the holder would have to hold the lock that long to fail a commit).
REBUILD = """
import sys
import symi_memory.index.db as db, symi_memory.index.store as store
db.BUSY_TIMEOUT_MS, store.LOCK_RETRIES = 300, 0
from symi_memory.cli import main
sys.exit(main(sys.argv[1:]))
"""


class HeldOnFirst:
    """An embeddings endpoint taking DELAY a request; the first request starts the holder and is answered once it
    holds the lock. Records when the holder let go and how many texts had been answered by then."""

    def __init__(self, index: Path) -> None:
        self.index = index
        self.lock = threading.Lock()
        self.answered: list[str] = []
        self.holder: subprocess.Popen[str] | None = None
        self.at_release: int | None = None

    def __call__(self, req: Recorded) -> Reply:
        inputs = req.json()["input"]
        with self.lock:
            if self.holder is None:
                self.holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(self.index)], stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, text=True)
                assert self.holder.stdout is not None
                assert self.holder.stdout.readline().strip() == "held", self.holder.communicate()
                threading.Thread(target=self._released, daemon=True).start()
        time.sleep(DELAY)
        with self.lock:
            self.answered += inputs
        data = [{"index": i, "embedding": [0.1 * (i + 1), 0.2, 0.3 + 0.01 * len(t)]} for i, t in enumerate(inputs)]
        return Reply(json={"data": data})

    def _released(self) -> None:
        assert self.holder is not None
        self.holder.wait()
        with self.lock:
            self.at_release = len(self.answered)


def _cached(index: Path) -> int:
    with sqlite3.connect(f"file:{index}?mode=ro", uri=True, timeout=10) as db:
        return int(db.execute("SELECT count(*) FROM embedding_cache").fetchone()[0])


def test_a_rebuild_goes_on_while_another_process_holds_the_write_lock_and_keeps_every_vector(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for i in range(FILES):
        write(ws, f"memory/n{i}.md", "\n".join(f"- note {i} line {j}: the marmot burrow {i * 100 + j}"
                                               for j in range(LINES)) + "\n")
    index = tmp_path / "state" / "memory" / "main.sqlite"
    endpoint = HeldOnFirst(index)
    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", endpoint)
        cfg = tmp_path / "cfg.toml"
        cfg.write_text(f'[agents.defaults.memorySearch]\nprovider = "openai"\nmodel = "m1"\n'
                       f'[agents.defaults.memorySearch.remote]\nbaseUrl = "{server.url}/v1"\n'
                       'apiKey = "sk-test-locked-0123456789"\n', encoding="utf-8")
        args = ["--config", str(cfg), "--workspace", str(ws), "--state-dir", str(tmp_path / "state"), "-v"]
        proc = subprocess.Popen([sys.executable, "-c", REBUILD, *args, "index", "--force", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: endpoint.at_release is not None or proc.poll() is not None, timeout=60)
            assert endpoint.at_release is not None, proc.communicate()
            # The commits skipped while the lock was held: the next one after it was let go takes their vectors,
            # while the rebuild still runs (a kill now would keep them).
            wait_for(lambda: proc.poll() is not None or _cached(index) >= endpoint.at_release, timeout=60)
            assert proc.poll() is None and _cached(index) >= endpoint.at_release > 0
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, err
        assert "not committed to the embedding cache yet (the index is busy: another process is writing it)" in err
        report = json.loads(out)
        sent = endpoint.answered
        assert report["full"] and report["embeddingsComputed"] == len(sent) == len(set(sent)) == FILES + FILES * LINES
        assert _cached(index) == len(sent)  # every vector the provider sent back is in the cache
        first = len(server.requests)
        again = subprocess.run([sys.executable, "-m", "symi_memory.cli", *args, "index", "--force", "--json"],
                               capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == first  # nothing asked again
        assert json.loads(again.stdout)["embeddingsCached"] == len(sent)


def test_a_rebuild_whose_commits_of_vectors_were_skipped_a_thousand_times_goes_on(tmp_path: Path) -> None:
    """Each skipped commit doubles the wait for the next try (capped at 8 s), and a full rebuild's end-of-group
    commits are tried whatever the wait: a large rebuild while another writer holds the lock (or, on postgres,
    another agent's build holds one cache row) for long skips more than 1,024 in a row. The doubling was computed
    as ``0.5 * 2 ** skips`` before the cap, which overflows a float there: the rebuild died with "int too large to
    convert to float" instead of going on."""
    from support.sqlite_memory import open_mem

    ws = tmp_path / "ws"
    write(ws, "memory/a.md", "- the otter's holt\n")
    with open_mem(tmp_path, ws, {"provider": "hash"}) as mem:
        mem.sync()
        indexer = mem.backend.indexer
        indexer._cache_skips = 1100  # as after 1,100 skips in a row
        stats = {"indexed": 0, "chunks": 0, "computed": 0, "cached": 0}
        vectors, ok = indexer._embed([f"a new line {i}" for i in range(3)], stats)
        assert ok and all(v is not None for v in vectors) and stats["computed"] == 3
        assert indexer._cache_skips == 0  # the commit went through: the vectors are in the cache
        again = {"indexed": 0, "chunks": 0, "computed": 0, "cached": 0}
        indexer._embed([f"a new line {i}" for i in range(3)], again)
        assert (again["computed"], again["cached"]) == (0, 3)
