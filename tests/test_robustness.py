"""Edge cases found in review: duplicate pieces, concurrent rebuilds, closing under load, late workspaces."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.loopback_http import Reply
from support.sqlite_memory import open_mem, wait_for, write

from symi_memory.errors import SymiMemoryError
from symi_memory.index.indexer import SyncCancelled


def test_a_long_repetitive_line_makes_no_duplicate_rows(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "memory/loop.md", "abc " * 5000 + "\n")
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        write(ws, "memory/loop.md", "abc " * 5000 + "\nmore\n")
        mem.sync()  # re-indexing the file must not trip over stale FTS/vector rows
        write(ws, "memory/other.md", "xyz\n")
        mem.sync()
        store = mem.backend.store
        chunks = store._read("SELECT COUNT(*) FROM chunks").fetchone()[0]
        vecs = store.vector_count()
        listed = store._read("SELECT SUM(chunks) FROM files").fetchone()[0]
        assert chunks == vecs == listed


def test_two_concurrent_full_rebuilds_leave_a_complete_index(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for i in range(40):
        write(ws, f"memory/n{i}.md", "\n".join(f"note {i} line {j} marmot" for j in range(80)) + "\n")
    a, b = open_mem(tmp_path, ws), open_mem(tmp_path, ws)
    errors: list[BaseException] = []

    def rebuild(mem) -> None:
        try:
            mem.sync(force=True)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=rebuild, args=(m,)) for m in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert a.status()["files"] == 40 and not a.status()["dirty"]
    assert not list((tmp_path / "state" / "memory").glob("*.build*"))
    a.close()
    b.close()


def test_close_while_other_threads_search(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "memory/a.md", "- kestrel sighting\n")
    mem = open_mem(tmp_path, ws)
    mem.sync()
    stop = threading.Event()
    answered: list[int] = []
    unexpected: list[BaseException] = []

    def searcher() -> None:
        while not stop.is_set():
            try:
                hits = mem.search("kestrel", min_score=0).results
            except Exception as exc:
                # After close a search may be refused with our own error; anything else is a bug.
                if not (isinstance(exc, SymiMemoryError) or "closed" in str(exc).lower()):
                    unexpected.append(exc)
                return
            if not hits or hits[0].path != "memory/a.md":
                unexpected.append(AssertionError(f"wrong answer while closing: {hits!r}"))
                return
            answered.append(1)

    threads = [threading.Thread(target=searcher) for _ in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(answered) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)  # the searchers are busy before close
    mem.close()  # must not raise, even with reader connections busy in other threads
    stop.set()
    for t in threads:
        t.join()
    assert len(answered) >= 4
    assert unexpected == []


def test_a_sync_queued_behind_close_is_cancelled(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "memory/a.md", "- one\n")
    mem = open_mem(tmp_path, ws)
    mem.backend._closing = True
    with pytest.raises(SyncCancelled):
        mem.sync()
    mem.backend._closing = False
    mem.close()


def test_a_workspace_created_after_start_is_watched(tmp_path: Path) -> None:
    ws = tmp_path / "later"
    watcher = open_mem(tmp_path, ws, {"provider": "none", "sync": {"watchDebounceMs": 50}}, start=True)
    reader = open_mem(tmp_path, ws, {"provider": "none"})
    try:
        write(ws, "MEMORY.md", "- the capybara is called Ernesto\n")
        assert wait_for(lambda: any(h.path == "MEMORY.md" for h in reader.search("capybara", min_score=0).results))
    finally:
        reader.close()
        watcher.close()


def test_provider_outage_backoff_keeps_the_error_visible(tmp_path: Path, server) -> None:
    ws = tmp_path / "ws"
    write(ws, "memory/a.md", "- heron\n")
    server.add("POST", "/v1/embeddings", Reply(status=400, body="bad request"))
    with open_mem(tmp_path, ws, {"provider": "openai", "remote": {"baseUrl": server.url + "/v1", "apiKey": "k"}}) as mem:
        mem.sync()
        calls = len(server.requests)
        assert calls >= 1 and mem.status()["lastError"]
        mem.backend.sync(reason="search")  # a background sync inside the backoff does not call the API
        assert len(server.requests) == calls
        assert mem.status()["lastError"], "the outage is still reported while files lack vectors"
        assert mem.status()["dirty"] is True


def test_a_closed_pipe_is_not_an_error(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for i in range(220):  # ~150 KB of JSON: more than a pipe buffer holds, so the write really fails
        write(ws, f"memory/n{i}.md", f"- pelican note {i} " + "with a long tail of words " * 30 + "\n")
    # The hash provider: the pipe, not the meaning, is under test (the local model would embed 220 files first).
    write(tmp_path / "st", "symi.toml", '[agents.defaults.memorySearch]\nprovider = "hash"\n')
    proc = subprocess.Popen([sys.executable, "-m", "symi_memory.cli", "--workspace", str(ws), "--state-dir",
                             str(tmp_path / "st"), "search", "pelican", "-n", "200", "--min-score", "0", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.read(10)
    proc.stdout.close()  # like `| head -c 10`
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert proc.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "error" not in err
