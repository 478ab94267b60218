"""A full rebuild stopped mid-way (SIGINT, SIGKILL, a model change's rebuild) keeps the vectors it was sent back: the
next run asks the provider only for the rest, and its progress counts the ones it reused."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.loopback_http import LoopbackServer, Recorded, Reply
from support.sqlite_memory import wait_for, write

from symi_memory.index.indexer import CACHE_COMMIT_SECONDS

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="signals and a pty")

FILES, LINES = 30, 20  # 30 chunks and 600 lines: 630 texts, 10 provider requests of 64


class Gate:
    """Answers the first ``open_for`` embedding requests, each after ``delay`` seconds (a slow provider: its vectors
    are committed to the cache batch by batch, ``CACHE_COMMIT_SECONDS``); later ones wait until :meth:`release`,
    then are answered at once."""

    def __init__(self, open_for: int, delay: float = CACHE_COMMIT_SECONDS + 0.1) -> None:
        self.open_for = open_for
        self.delay = delay
        self.released = threading.Event()
        self.lock = threading.Lock()
        self.seen = 0

    def __call__(self, req: Recorded) -> Reply:
        with self.lock:
            self.seen += 1
            held = self.seen > self.open_for
        if held:
            self.released.wait(60)
        elif not self.released.is_set():
            time.sleep(self.delay)
        inputs = req.json()["input"]
        data = [{"index": i, "embedding": [0.1 * (i + 1), 0.2, 0.3 + 0.01 * len(t)]} for i, t in enumerate(inputs)]
        return Reply(json={"data": data})

    def release(self) -> None:
        self.released.set()



def _sigint_default() -> None:
    """In the child before it runs: SIGINT back to its default. A run started in the background by a shell (CI's
    `nohup ... &`) ignores SIGINT, and the child would inherit that and keep running (Python installs its
    KeyboardInterrupt only over a default SIGINT), which is right for the command and wrong for this test."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    for i in range(FILES):
        write(ws, f"memory/n{i}.md", "\n".join(f"- note {i} line {j}: the marmot burrow {i * 100 + j}"
                                               for j in range(LINES)) + "\n")
    return ws


def _cli(tmp_path: Path, ws: Path, url: str, model: str, *args: str) -> list[str]:
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'[agents.defaults.memorySearch]\nprovider = "openai"\nmodel = "{model}"\n'
                   f'[agents.defaults.memorySearch.remote]\nbaseUrl = "{url}/v1"\n'
                   'apiKey = "sk-test-resume-0123456789"\n', encoding="utf-8")
    return [sys.executable, "-m", "symi_memory.cli", "--config", str(cfg), "--workspace", str(ws),
            "--state-dir", str(tmp_path / "state"), *args]


def _texts(requests: list[Recorded]) -> list[str]:
    return [t for r in requests if r.path == "/v1/embeddings" for t in r.json()["input"]]


def _interrupt(server: LoopbackServer, gate: Gate, cmd: list[str], sig: signal.Signals) -> tuple[int, str]:
    """Run ``cmd`` until it waits on the request after the gate's open ones, then send it ``sig``."""
    start = len(server.requests)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_sigint_default)
    try:
        wait_for(lambda: len(server.requests) - start > gate.open_for or proc.poll() is not None, timeout=60)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    gate.release()
    return proc.returncode, err


def _run_on_a_terminal(cmd: list[str]) -> tuple[int, str, str]:
    """Run ``cmd`` with its stderr on a pty (the progress bar is drawn only on a terminal): (code, stdout, stderr)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=follower, text=True,
                            env={**os.environ, "COLUMNS": "200"})  # the bar is cut to the terminal's width
    os.close(follower)
    seen = bytearray()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    os.close(leader)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out, seen.decode("utf-8", "replace")


def test_an_interrupted_reindex_keeps_its_vectors_and_the_next_run_asks_only_for_the_rest(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    # Answered at once: the four batches come back within CACHE_COMMIT_SECONDS, so SIGINT finds them not yet
    # committed (KeyboardInterrupt commits them on the way out).
    gate = Gate(open_for=4, delay=0)
    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", gate)
        code, err = _interrupt(server, gate, _cli(tmp_path, ws, server.url, "m1", "index", "--force"), signal.SIGINT)
        assert code == 130, err
        answered = _texts(server.requests[:4])  # the fifth was held when the signal came
        assert len(answered) == 4 * 64
        first = len(server.requests)
        code, out, bar = _run_on_a_terminal(_cli(tmp_path, ws, server.url, "m1", "index", "--force"))
        assert code == 0, bar
        again = _texts(server.requests[first:])
        # Only the rest is asked for: none of the texts the interrupted run was sent vectors for, each other one once.
        assert not set(again) & set(answered)
        assert len(again) == len(set(again)) == FILES + FILES * LINES - len(answered)
        summary = re.search(r"(\d+) embedded \((\d+) cached\)", out)
        assert summary and (int(summary[1]), int(summary[2])) == (len(again), len(answered)), out
        # The bar said so while it ran: first the reused vectors, then the computed ones growing batch by batch.
        told = [(int(a), int(b)) for a, b in re.findall(r"embed \[[#.]+\] \d+/\d+ files, (\d+) embedded, (\d+) reused",
                                                         bar)]
        assert told[0] == (0, len(answered)), bar
        assert told[-1] == (len(again), len(answered)), bar
        assert len({c for c, _ in told}) >= 4, bar  # one step per provider request, not one jump at the end
        found = subprocess.run(_cli(tmp_path, ws, server.url, "m1", "search", "marmot burrow 1207", "--json"),
                               capture_output=True, text=True, timeout=120)
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout)["results"][0]["path"] == "memory/n12.md"


def test_a_model_changes_rebuild_killed_mid_way_resumes_and_the_old_index_answers_meanwhile(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    gate = Gate(open_for=10_000)
    gate.release()  # the first build: answered at once
    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", gate)
        built = subprocess.run(_cli(tmp_path, ws, server.url, "m1", "index", "--json"), capture_output=True,
                               text=True, timeout=120)
        assert built.returncode == 0, built.stderr
        first = len(server.requests)
        # Another model: the next `index` rebuilds everything; it is SIGKILLed after 3 answered requests.
        gate.open_for, gate.seen = 3, 0
        gate.released.clear()
        code, err = _interrupt(server, gate, _cli(tmp_path, ws, server.url, "m2", "index"), signal.SIGKILL)
        assert code == -signal.SIGKILL, err
        answered = _texts(server.requests[first:first + 3])
        st = subprocess.run(_cli(tmp_path, ws, server.url, "m1", "status", "--json"), capture_output=True, text=True,
                            timeout=120)
        assert st.returncode == 0, st.stderr
        assert (json.loads(st.stdout)["files"], json.loads(st.stdout)["chunks"]) == (FILES, FILES)  # the old index
        second = len(server.requests)
        done = subprocess.run(_cli(tmp_path, ws, server.url, "m2", "index", "--json"), capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        again = _texts(server.requests[second:])
        assert report["full"] and not set(again) & set(answered)
        assert (report["embeddingsComputed"], report["embeddingsCached"]) == (len(again), len(answered))
        assert len(answered) + len(again) == FILES + FILES * LINES


def test_a_provider_failing_mid_rebuild_keeps_its_vectors_when_the_fallback_takes_over(tmp_path: Path) -> None:
    """The batches the primary answered before it failed are cached when the sync switches to the fallback (as when
    it goes on by keyword): the next build by the primary asks only for the rest. Before, only what a 0.5 s commit
    had taken was kept: the primary's first batch, not the two answered within the half second after it."""
    import sqlite3

    from symi_memory import load_config
    from symi_memory.manager import open_memory

    ws = tmp_path / "ws"
    for i in range(10):
        write(ws, f"memory/n{i}.md", "\n".join(f"- note {i} line {j}: the marmot burrow {i * 100 + j}"
                                               for j in range(20)) + "\n")

    def answer(req: Recorded) -> Reply:
        inputs = req.json()["input"]
        return Reply(json={"data": [{"index": i, "embedding": [0.1 * (i + 1), 0.2, 0.3]} for i in range(len(inputs))]})

    with LoopbackServer() as server:
        # 210 texts: three requests of 64 answered at once, then the model is gone (not retried).
        server.add("POST", "/v1/embeddings", answer, answer, answer, Reply(status=400, body="model not found"))
        cfg = load_config(None, state_dir=tmp_path / "state", overrides={"agents": {"defaults": {"memorySearch": {
            "provider": "openai", "model": "m1", "fallback": "hash",
            "remote": {"baseUrl": server.url + "/v1", "apiKey": "sk-test-resume-fallback-0123"}}}}})
        with open_memory(cfg, workspace=ws, start=False) as mem:
            mem.sync(force=True)
            assert mem.status()["provider"] == "hash"  # the fallback built the index
        answered = _texts(server.requests[:3])
        assert len(answered) == 3 * 64
    with sqlite3.connect(tmp_path / "state" / "memory" / "main.sqlite") as db:
        kept = db.execute("SELECT count(*) FROM embedding_cache c JOIN embedders e ON e.id = c.embedder "
                          "WHERE e.provider = 'openai' AND e.model = 'm1'").fetchone()[0]
    assert kept == len(answered)
