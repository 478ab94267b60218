"""builtin-sqlite across processes: SIGKILL mid-reindex, readers during a big write (issue 3, items 4 and 9)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
from support.slow_provider import slow_plugins
from support.sqlite_memory import add_filler, settings, wait_for, write

from symi_memory import load_config
from symi_memory.manager import open_memory

SCRIPT = Path(__file__).parent / "support" / "slow_provider.py"
QUERIES = ("pelican migration", "QZ-4471", "budget review meeting")


def make_workspace(ws: Path, files: int) -> None:
    add_filler(ws, files)
    write(ws, "MEMORY.md", "# Memory\n\n- Pelican migration count was 212 this spring.\n- Ticket QZ-4471 tracks the leak.\n")


def open_slow(state: Path, ws: Path, **ms: object):  # type: ignore[no-untyped-def]
    cfg = load_config(None, state_dir=state, overrides=settings({"provider": "slow", **ms}))
    return open_memory(cfg, workspace=ws, start=False, plugins=slow_plugins())


def snapshot(mem) -> list:  # type: ignore[no-untyped-def]
    return [[(h.path, h.start_line, h.end_line, h.score) for h in mem.search(q).results] for q in QUERIES]


def integrity(db: str) -> list:
    import sqlite_vec

    con = apsw.Connection(db)
    con.enable_load_extension(True)
    con.load_extension(sqlite_vec.loadable_path())
    try:
        return con.execute("PRAGMA integrity_check").fetchall()
    finally:
        con.close()


def child(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parent))
    return subprocess.Popen([sys.executable, str(SCRIPT), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def test_sigkill_during_forced_reindex_keeps_the_old_index(tmp_path: Path) -> None:
    ws, state = tmp_path / "ws", tmp_path / "state"
    make_workspace(ws, 400)  # ~400 chunks: several embedding batches
    with open_slow(state, ws) as mem:
        mem.sync()
        before = snapshot(mem)
        counts = (mem.status()["files"], mem.status()["chunks"])
        db = mem.status()["dbPath"]
    assert all(before), "every probe query must have results before the crash"
    calls = tmp_path / "calls.txt"
    proc = child("reindex", str(state), str(ws), "0.4", str(calls))
    try:
        # Past the first flushed batch of rows (4 embedding calls), so the open transaction holds writes.
        wait_for(lambda: calls.exists() and len(calls.read_text().split()) >= 6, timeout=30)
        assert proc.poll() is None, proc.communicate()
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    assert "finished" not in (proc.stdout.read() if proc.stdout else "")
    assert integrity(db) == [("ok",)]
    with open_slow(state, ws) as mem:
        assert (mem.status()["files"], mem.status()["chunks"]) == counts
        assert mem.status()["dirty"] is False
        assert snapshot(mem) == before
        # And the index still takes writes.
        write(ws, "MEMORY.md", "# Memory\n\n- Pelican migration count was 250 this spring.\n")
        assert mem.sync().files_indexed == 1
    assert integrity(db) == [("ok",)]


def test_reader_process_never_sees_locked_during_a_big_sync(tmp_path: Path) -> None:
    ws, state = tmp_path / "ws", tmp_path / "state"
    make_workspace(ws, 300)
    calls = tmp_path / "calls.txt"
    # Chunk vectors only: line vectors would multiply the slow provider's calls, and the loop below needs
    # several full rewrites within its 3 s (this test is about the write lock, not what is embedded).
    cfg = load_config(None, state_dir=state, overrides=settings({"provider": "slow", "cache": {"enabled": False},
                                                                 "chunking": {"units": "off"}}))
    with open_memory(cfg, workspace=ws, start=False, plugins=slow_plugins(0.05, str(calls))) as mem:
        mem.sync()
        proc = child("search", str(state), str(ws), "4", "pelican migration")
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
            t0 = time.monotonic()
            syncs = 0
            while time.monotonic() - t0 < 3.0:
                # Full rewrites (one long write transaction each) while the child searches.
                mem.sync(force=True)
                syncs += 1
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    result = json.loads(out.strip().splitlines()[-1])
    assert result["errors"] == [], err
    assert syncs >= 2
    # Enough searches to overlap several write transactions; a count, not a speed (a loaded 2-core host is slow).
    assert result["searches"] >= 5
    assert result["empty"] == 0, "a reader must always see a complete index"


def test_opening_a_second_manager_does_not_wait_for_a_running_sync(tmp_path: Path) -> None:
    ws, state = tmp_path / "ws", tmp_path / "state"
    make_workspace(ws, 400)
    with open_slow(state, ws) as mem:
        mem.sync()
    calls = tmp_path / "calls.txt"
    # A slow writer (3 s per embedding call, killed below) outlives a reader started on a loaded machine.
    proc = child("reindex", str(state), str(ws), "3.0", str(calls))
    try:
        wait_for(lambda: calls.exists() and len(calls.read_text().split()) >= 5, timeout=30)
        assert proc.poll() is None
        # The writer holds its transaction for seconds; a new reader opens and searches at once.
        reader = child("search", str(state), str(ws), "0.5", "pelican migration")
        out, err = reader.communicate(timeout=30)
        assert proc.poll() is None, "the writer should still be mid-sync"
    finally:
        proc.kill()
        proc.wait()
    assert out.strip(), err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["errors"] == [], err
    assert result["empty"] == 0
    # Waiting for the writer would take minutes; a loaded machine may still take a few seconds to open.
    assert result["opened_seconds"] < 10, f"opening waited {result['opened_seconds']:.1f}s for the writer"
