from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from symi_memory.session_store import SessionStore, SessionStoreCorrupt


def test_path_layout_and_missing_file(tmp_path: Path) -> None:
    store = SessionStore.for_agent(tmp_path, "ops")
    assert store.path == tmp_path / "agents" / "ops" / "sessions" / "sessions.json"
    assert store.get("anything") is None
    assert store.load() == {}


def test_update_merges_and_keeps_other_keys(tmp_path: Path) -> None:
    store = SessionStore.for_agent(tmp_path)
    store.update("a", {"totalTokens": 10, "compactionCount": 0})
    store.update("b", {"totalTokens": 5})
    store.update("a", {"totalTokensFresh": True})
    on_disk = json.loads(store.path.read_text())
    assert on_disk == {
        "a": {"totalTokens": 10, "compactionCount": 0, "totalTokensFresh": True},
        "b": {"totalTokens": 5},
    }


def test_update_with_function(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s.json")
    store.update("k", {"compactionCount": 2})

    def bump(entry: dict) -> None:
        entry["compactionCount"] += 1

    assert store.update("k", bump) == {"compactionCount": 3}
    assert store.update("k", lambda e: {"replaced": True}) == {"replaced": True}
    assert store.get("k") == {"replaced": True}


def test_record_flush_uses_entry_cycle(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions.json")
    store.update("k", {"compactionCount": 4, "totalTokens": 1})
    entry = store.record_flush("k", now_ms=1_771_254_000_000)
    assert entry["memoryFlushAt"] == 1_771_254_000_000
    assert entry["memoryFlushCompactionCount"] == 4
    assert store.record_flush("new", compaction_count=7)["memoryFlushCompactionCount"] == 7
    assert store.get("new")["memoryFlushAt"] > 1_700_000_000_000  # real clock, in ms


def test_write_is_atomic_no_temp_files_left(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions.json")
    for i in range(5):
        store.update(f"k{i}", {"totalTokens": i})
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["sessions.json", "sessions.json.lock"]


def test_corrupt_file_is_reported_and_preserved(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    garbage = '{"a": {"totalTokens": 3}, oops'
    path.write_text(garbage)
    store = SessionStore(path)
    with pytest.raises(SessionStoreCorrupt, match=r"sessions\.json is corrupt .*invalid JSON.*repair\(\)"):
        store.get("a")
    with pytest.raises(SessionStoreCorrupt):
        store.update("a", {"totalTokens": 4})
    assert path.read_text() == garbage  # never silently replaced

    aside = store.repair()
    assert aside is not None and aside.read_text() == garbage
    assert not path.exists()
    store.update("a", {"totalTokens": 4})
    assert store.get("a") == {"totalTokens": 4}
    assert store.repair() is None  # a valid store is left alone


def test_non_object_top_level_and_entry(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    path.write_text("[1, 2]")
    with pytest.raises(SessionStoreCorrupt, match="top level is list"):
        SessionStore(path).load()
    path.write_text('{"k": 5}')
    with pytest.raises(SessionStoreCorrupt, match="entry 'k' is int"):
        SessionStore(path).update("k", {"totalTokens": 1})


def _writer(path: str, worker: int, count: int, ready, go) -> None:
    store = SessionStore(path)
    ready.release()
    go.wait(30)  # both processes start writing at the same moment
    for i in range(count):
        store.update(f"w{worker}-{i}", {"totalTokens": i})
        # Also contend on one shared key: every increment must survive.
        store.update("shared", lambda e: {**e, "compactionCount": e.get("compactionCount", 0) + 1})


def test_two_processes_lose_no_entries(tmp_path: Path) -> None:
    path = tmp_path / "agents" / "main" / "sessions" / "sessions.json"
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters: no shared state but the file
    count = 60
    ready, go = ctx.Semaphore(0), ctx.Event()
    procs = [ctx.Process(target=_writer, args=(str(path), w, count, ready, go)) for w in range(2)]
    for p in procs:
        p.start()
    for _ in procs:
        assert ready.acquire(timeout=60)
    go.set()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    data = SessionStore(path).load()
    assert len(data) == 2 * count + 1
    assert data["shared"]["compactionCount"] == 2 * count
    assert all(data[f"w{w}-{i}"] == {"totalTokens": i} for w in range(2) for i in range(count))


def test_existing_mode_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    path.write_text("{}")
    os.chmod(path, 0o640)
    SessionStore(path).update("k", {"totalTokens": 1})
    assert path.stat().st_mode & 0o777 == 0o640
