"""One full build of an index at a time: a process that finds another's build running does not start its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from support.loopback_http import LoopbackServer, Recorded, Reply
from support.sqlite_memory import open_mem, write

from symi_memory.index.rebuild import build_running

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="telling a live build needs flock")

QUERY = "marmot burrow"


def _reply(req: Recorded) -> Reply:
    inputs = req.json()["input"]
    data = [{"index": i, "embedding": [0.1 * (i + 1), 0.2, 0.3 + 0.01 * len(t)]} for i, t in enumerate(inputs)]
    # Slow enough that the first build takes several seconds (one request per 64 texts).
    return Reply(json={"data": data}, delay=0.3 if len(inputs) > 1 else 0)


def _cli(tmp_path: Path, ws: Path, url: str, *args: str) -> list[str]:
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[agents.defaults.memorySearch]\nprovider = "openai"\n'
                   f'[agents.defaults.memorySearch.remote]\nbaseUrl = "{url}/v1"\n'
                   'apiKey = "sk-test-build-once-0123456789"\n', encoding="utf-8")
    return [sys.executable, "-m", "symi_memory.cli", "--config", str(cfg), "--workspace", str(ws),
            "--state-dir", str(tmp_path / "state"), *args]


def _index_file(tmp_path: Path) -> Path | None:
    found = [p for p in (tmp_path / "state").rglob("*.sqlite")]
    return found[0] if found else None


def test_a_search_during_another_processs_first_build_answers_at_once_and_builds_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for i in range(60):
        write(ws, f"memory/n{i}.md", "\n".join(f"- note {i} line {j}: the marmot burrow {j * i}" for j in range(30)) + "\n")
    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", _reply)
        builder = subprocess.Popen(_cli(tmp_path, ws, server.url, "index", "--json"),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            index = None
            while time.monotonic() < deadline and builder.poll() is None:
                index = _index_file(tmp_path)
                if index is not None and build_running(index):
                    break
                time.sleep(0.05)
            assert index is not None and build_running(index), "the first build never started"
            # A one-shot search while the first build runs: answered from the index as it is (empty), at once.
            started = time.monotonic()
            search = subprocess.run(_cli(tmp_path, ws, server.url, "search", QUERY, "--json"),
                                    capture_output=True, text=True, timeout=120)
            took = time.monotonic() - started
            assert search.returncode == 0, search.stderr
            assert builder.poll() is None, f"the search took {took:.1f} s: it waited for or redid the build"
            out = json.loads(search.stdout)
            assert out["results"] == []
            assert "being built" in (out.get("fallback") or {}).get("reason", ""), out
            # `index` while the build runs waits for it and then finds nothing left to do.
            follower = subprocess.run(_cli(tmp_path, ws, server.url, "index", "--json"),
                                      capture_output=True, text=True, timeout=180)
            assert follower.returncode == 0, follower.stderr
            assert builder.poll() is not None, "`index` returned before the build it should wait for landed"
            assert "waiting for that build to land" in follower.stderr, follower.stderr
            report = json.loads(follower.stdout)
            assert (report["full"], report["filesIndexed"], report["embeddingsComputed"]) == (False, 0, 0), report
        finally:
            if builder.poll() is None:
                builder.kill()
            out_b, err_b = builder.communicate(timeout=60)
        assert builder.returncode == 0, err_b
        first = json.loads(out_b)
        assert first["full"] and first["filesIndexed"] == 60
        # Every text was sent to the provider once: nobody built the index a second time beside the first.
        sent = Counter(t for r in server.requests if r.path == "/v1/embeddings" for t in r.json()["input"])
        twice = [t for t, n in sent.items() if n > 1 and t != QUERY]
        assert twice == [], f"{len(twice)} texts embedded twice, e.g. {twice[:2]}"
        # A later search answers from the finished index.
        after = subprocess.run(_cli(tmp_path, ws, server.url, "search", QUERY, "--json"),
                               capture_output=True, text=True, timeout=120)
        assert after.returncode == 0, after.stderr
        assert json.loads(after.stdout)["results"]


def test_a_build_file_nobody_holds_does_not_stop_a_build(tmp_path: Path) -> None:
    # A killed builder's leftover: a search's sync still builds the index (the file is not taken for a live build).
    ws = tmp_path / "ws"
    write(ws, "memory/a.md", "- the capybara is called Ernesto\n")
    with open_mem(tmp_path, ws) as mem:
        index = Path(mem.status()["dbPath"])
        leftover = index.with_name(index.name + ".build-killed")
        leftover.write_bytes(b"half a build")
        assert not build_running(index)
        report = mem.backend.sync(reason="search")
        assert report.full and report.files_indexed == 1
        assert mem.search("capybara", min_score=0).results


def test_a_search_sync_beside_a_live_build_in_another_process_writes_nothing(tmp_path: Path) -> None:
    # A live build (its file locked by another process): the background sync of a search defers, the scheduler's
    # dirty flag stays, and once the build file is let go the next sync builds.
    ws = tmp_path / "ws"
    write(ws, "memory/a.md", "- the capybara is called Ernesto\n")
    with open_mem(tmp_path, ws) as mem:
        index = Path(mem.status()["dbPath"])
        holder = subprocess.Popen([sys.executable, "-c", (
            "import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n"), str(index.with_name(index.name + ".build-live"))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            assert build_running(index)
            report = mem.backend.sync(reason="search")
            assert not report.full and report.files_indexed == 0 and mem.status()["files"] == 0
            assert mem.backend.indexer.deferred
            resp = mem.search("capybara", min_score=0)
            assert resp.results == () and resp.fallback is not None and "being built" in resp.fallback.reason
        finally:
            holder.communicate("", timeout=30)
        os.unlink(index.with_name(index.name + ".build-live"))
        assert mem.backend.sync(reason="search").full
        assert mem.backend.indexer.deferred is None
        assert mem.search("capybara", min_score=0).results
