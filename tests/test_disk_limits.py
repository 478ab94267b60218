"""A disk that fills up: appends and syncs that cannot write.

Simulated without root with ``RLIMIT_FSIZE`` in a subprocess (SIGXFSZ ignored, so a write past the limit fails
with EFBIG, as a full disk fails with ENOSPC): the file limit applies to every file the process writes.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.child_process import FILE_LIMIT, run_child
from support.sqlite_memory import open_mem, write

from symi_memory import tools

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")

PRELUDE = FILE_LIMIT + "tmp, ws = Path(sys.argv[1]), Path(sys.argv[2])\n"


def _run(tmp_path: Path, ws: Path, body: str) -> dict:
    return run_child(PRELUDE, body, str(tmp_path), str(ws))


def test_an_append_the_disk_cannot_hold_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    """The agent is told the append failed: no half of its note may stay behind (a retry would write it twice)."""
    ws = tmp_path / "ws"
    before = "# Memory\n\n- Prefers tea.\n"
    write(ws, "MEMORY.md", before)
    daily = "- an earlier note today\n"
    write(ws, "memory/2026-05-04.md", daily)
    note = "The quick brown fox jumps over the lazy dog, and this note is longer than the room left."
    got = _run(tmp_path, ws, f"""
        mem = open_mem(tmp, ws)
        mem.sync()
        limit(Path(ws / "MEMORY.md").stat().st_size + 10)
        out = {{"long": tools.memory_append(mem, {{"text": {note!r}, "target": "long-term"}})}}
        from datetime import datetime, timezone
        from symi_memory.writing import append_memory
        try:
            append_memory(ws, {note!r}, now=datetime(2026, 5, 4, 12, tzinfo=timezone.utc), tz="UTC")
        except SymiMemoryError as exc:
            out["daily"] = str(exc)
        unlimit()
        mem.close()
        print(json.dumps(out))
    """)
    assert got["long"]["bytesWritten"] == 0 and "File too large" in got["long"]["error"], got
    assert "File too large" in got["daily"], got
    assert (ws / "MEMORY.md").read_text(encoding="utf-8") == before
    assert (ws / "memory" / "2026-05-04.md").read_text(encoding="utf-8") == daily
    # With room again the same append is written once, whole.
    mem = open_mem(tmp_path, ws)
    again = tools.memory_append(mem, {"text": note, "target": "long-term"})
    mem.close()
    assert again["appended"] is True, again
    assert (ws / "MEMORY.md").read_text(encoding="utf-8") == before + note + "\n"


def test_a_sync_the_disk_cannot_hold_says_so_keeps_answering_and_the_next_sync_repairs(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    words = "alpha beta gamma delta kestrel zebra budget coffee garden server backup report".split()
    for i in range(1200):
        line = " ".join(words[(i + k) % len(words)] for k in range(12))
        write(ws, f"memory/n{i:04d}.md", f"# Note {i}\n" + f"{line} n{i}x\n" * 6)
    got = _run(tmp_path, ws, """
        import os
        names = sorted((ws / "memory").iterdir())
        later = {p: p.read_bytes() for p in names[200:]}
        for p in later:
            p.unlink()
        mem = open_mem(tmp, ws)
        mem.sync()
        mem.close()  # checkpoints the WAL: the index file holds the first 200 notes
        mem = open_mem(tmp, ws)
        for p, data in later.items():
            p.write_bytes(data)
        db = Path(mem.status()["dbPath"])
        limit(db.stat().st_size + 300_000)
        out = {}
        try:
            mem.sync()
            out["error"] = None
        except Exception as exc:
            out["error"] = str(exc)
            out["ours"] = isinstance(exc, SymiMemoryError)
        st = mem.status()
        out["lastError"] = st["lastError"]
        out["files"] = st["files"]
        out["dirty"] = st["dirty"]
        out["hits"] = [h.path for h in mem.search("n7x", min_score=0).results]
        unlimit()
        report = mem.sync()
        out["after"] = mem.status()["files"]
        out["afterError"] = mem.status()["lastError"]
        out["hitsAfter"] = [h.path for h in mem.search("n1100x", min_score=0).results]
        out["intact"] = mem.check_integrity()
        mem.close()
        print(json.dumps(out))
    """)
    assert got["error"] is not None and got["ours"], got
    assert "File too large" in got["error"] and str(tmp_path / "state") in got["error"], got
    assert got["lastError"] and "File too large" in got["lastError"], got
    assert got["files"] == 200 and got["dirty"] is True
    assert got["hits"][:1] == ["memory/n0007.md"], got
    assert got["after"] == 1200 and got["afterError"] is None, got
    assert got["hitsAfter"][:1] == ["memory/n1100.md"], got
    assert got["intact"] is None



def test_a_disk_error_leaves_status_once_a_sync_writes_though_files_still_wait_for_vectors(tmp_path: Path) -> None:
    """Files waiting for their vectors (the provider refuses their text) and then a sync the disk could not hold:
    once the disk had room and a background sync wrote the new notes (their vectors too), status still said
    "could not write the index: File too large", and recorded it for new processes, until a sync retried the
    waiting files (after a backoff, or the provider's return). Now lastError goes back to why files wait."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\n- Prefers tea.\n")
    words = "alpha beta gamma delta kestrel zebra budget coffee garden server backup report".split()
    for i in range(900):
        line = " ".join(words[(i + k) % len(words)] for k in range(12))
        write(ws, f"memory/n{i:04d}.md", f"# Note {i}{' refused' if i < 100 else ''}\n" + f"{line} n{i}x\n" * 6)
    got = _run(tmp_path, ws, """
        from support.loopback_http import LoopbackServer, Reply

        def embeddings(req):  # the first 100 notes' text is refused, the others get vectors
            texts = req.json()["input"]
            if any("refused" in t for t in texts):
                return Reply(status=400, body="model not found")
            return Reply(json={"data": [{"index": i, "embedding": [0.1 * (i % 7 + 1), 0.2, 0.3]}
                                        for i in range(len(texts))]})

        with LoopbackServer() as server:
            server.add("POST", "/v1/embeddings", embeddings)
            remote = {"provider": "openai", "remote": {"baseUrl": server.url + "/v1", "apiKey": "sk-test-0123456789"}}
            names = sorted((ws / "memory").iterdir())
            later = {p: p.read_bytes() for p in names[100:]}
            for p in later:
                p.unlink()
            mem = open_mem(tmp, ws, remote)
            mem.sync()
            mem.close()  # checkpoints the WAL
            mem = open_mem(tmp, ws, remote)
            mem.sync()  # the provider refused again: its backoff runs from here
            out = {"waiting": mem.status()["lastError"]}
            for p, data in later.items():
                p.write_bytes(data)
            limit(Path(mem.status()["dbPath"]).stat().st_size + 200_000)
            try:
                mem.sync(reason="watch")
            except SymiMemoryError as exc:
                out["error"] = str(exc)
            out["full"] = mem.status()["lastError"]
            unlimit()
            mem.sync(reason="watch")  # room again; the waiting files are not retried before the backoff
            st = mem.status()
            out.update(after=st["lastError"], files=st["files"], pending=st["pendingFiles"], reason=st["pendingReason"])
            out["hits"] = [h.path for h in mem.search("n800x", min_score=0).results][:1]
            mem.close()
            fresh = open_mem(tmp, ws, remote)
            out["fresh"] = fresh.status()["lastError"]
            fresh.close()
        print(json.dumps(out))
    """)
    assert "model not found" in got["waiting"], got
    assert "File too large" in got["error"] and "File too large" in got["full"], got
    assert got["files"] == 901 and got["pending"] == 101, got
    assert got["hits"] == ["memory/n0800.md"], got
    assert "File too large" not in got["after"] and "model not found" in got["after"], got
    assert "model not found" in got["reason"], got
    assert "File too large" not in got["fresh"] and "model not found" in got["fresh"], got


EDITOR = textwrap.dedent("""
    import sys, time
    path, stop = sys.argv[1], time.monotonic() + float(sys.argv[2])
    n = 0
    with open(path, "ab", buffering=0) as f:  # another program appending, without our lock (a shell's >>)
        while time.monotonic() < stop:
            f.write(f"editor {n}\\n".encode())
            n += 1
    print(n)
""")


def test_a_failed_append_never_takes_back_bytes_another_program_wrote(tmp_path: Path) -> None:
    """Taking back a failed append must cut only this note's own bytes: another program (no lock) appending to the
    same file between our write and the take-back keeps every line it wrote."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\n- Prefers tea.\n")
    editor = subprocess.Popen([sys.executable, "-c", EDITOR, str(ws / "MEMORY.md"), "4"], stdout=subprocess.PIPE,
                              text=True)
    got = _run(tmp_path, ws, """
        import time
        from symi_memory.writing import append_memory
        time.sleep(0.3)  # the editor is writing
        limit(Path(ws / "MEMORY.md").stat().st_size)  # every append of ours now fails (past the file size limit)
        failed = 0
        stop = time.monotonic() + 3
        while time.monotonic() < stop:
            try:
                append_memory(ws, "- a note of ours", target="long-term")
            except SymiMemoryError:
                failed += 1
        print(json.dumps({"failed": failed}))
    """)
    written = int(editor.communicate(timeout=60)[0])
    assert got["failed"] > 100 and written > 100, (got, written)
    lines = (ws / "MEMORY.md").read_text(encoding="utf-8").splitlines()
    assert lines[:3] == ["# Memory", "", "- Prefers tea."]
    assert lines[3:] == [f"editor {n}" for n in range(written)], [ln for ln in lines[3:] if "editor" not in ln][:5]


def test_a_sync_that_left_the_failed_files_for_later_does_not_clear_the_disk_error(tmp_path: Path) -> None:
    """Files waiting for their vectors; the provider is back and an explicit sync fetches them, but the disk cannot
    hold them. The next background sync left those files for later (their backoff had not run out) and wrote
    nothing, yet it cleared the disk error: status said the provider refused their text (no longer true) and
    nothing of the disk that still could not take them. A sync clears the disk error only once it wrote something
    or left nothing for later."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\n- Prefers tea.\n")
    for i in range(200):
        write(ws, f"memory/n{i:04d}.md", f"# Note {i} refused\n" + f"kestrel zebra budget n{i}x\n" * 4)
    got = _run(tmp_path, ws, """
        from support.loopback_http import LoopbackServer, Reply
        refusing = [True]

        def embeddings(req):  # the notes' text is refused until the provider is back
            texts = req.json()["input"]
            if refusing[0] and any("refused" in t for t in texts):
                return Reply(status=400, body="model not found")
            return Reply(json={"data": [{"index": i, "embedding": [0.1 * (i % 7 + 1)] + [0.2] * 767}
                                        for i in range(len(texts))]})

        with LoopbackServer() as server:
            server.add("POST", "/v1/embeddings", embeddings)
            remote = {"provider": "openai", "remote": {"baseUrl": server.url + "/v1", "apiKey": "sk-test-0123456789"}}
            mem = open_mem(tmp, ws, remote)
            mem.sync()
            mem.close()  # checkpoints the WAL
            mem = open_mem(tmp, ws, remote)
            mem.sync()  # the provider refused again: its backoff runs from here
            out = {"waiting": mem.status()["lastError"], "pendingBefore": mem.status()["pendingFiles"]}
            refusing[0] = False
            limit(Path(mem.status()["dbPath"]).stat().st_size + 20_000)
            try:
                mem.sync()  # an explicit sync retries them now: their vectors do not fit
            except SymiMemoryError as exc:
                out["error"] = str(exc)
            mem.sync(reason="watch")  # before the backoff: the waiting files are left for later
            st = mem.status()
            out.update(after=st["lastError"], pending=st["pendingFiles"])
            unlimit()
            mem.sync()
            st = mem.status()
            out.update(repaired=st["lastError"], pendingRepaired=st["pendingFiles"])
            mem.close()
        print(json.dumps(out))
    """)
    assert "model not found" in got["waiting"] and got["pendingBefore"] == 201, got
    assert "File too large" in got["error"], got
    assert got["pending"] == 201, got
    assert got["after"] and "File too large" in got["after"], got
    assert got["repaired"] is None and got["pendingRepaired"] == 0, got
