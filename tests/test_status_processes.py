"""``status`` tells the truth in every process: what a sync in another process learnt (a provider that refused, a
disk that could not take the index) is what this process's status says, whether it opened before that sync (a
long-lived ``serve``) or after it (a fresh ``symi-memory status``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.child_process import FILE_LIMIT, run_child
from support.loopback_http import LoopbackServer, Reply
from support.sqlite_memory import open_mem, write

TESTS = Path(__file__).resolve().parent

PRELUDE = FILE_LIMIT + textwrap.dedent("""
    def sync_on_a_full_disk(mem):
        \"\"\"Sync ``mem`` with room for 300 kB more than its index holds (the index is open in another process:
        its WAL may hold more than the file); the error the sync raised, or None.\"\"\"
        db = Path(mem.status()["dbPath"])
        wal = Path(f"{db}-wal")
        limit(max(db.stat().st_size, wal.stat().st_size if wal.exists() else 0) + 300_000)
        try:
            mem.sync()
        except SymiMemoryError as exc:
            return str(exc)
        finally:
            unlimit()
        return None

    tmp, ws, ms = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
""")


def _other_process(tmp_path: Path, ws: Path, body: str, ms: dict | None = None) -> dict:
    """Run ``body`` in another Python process on the same state dir and workspace; its last line is JSON."""
    return run_child(PRELUDE, body, str(tmp_path), str(ws), json.dumps(ms or {}))


def test_a_provider_error_another_process_cleared_or_hit_is_what_a_long_lived_process_says(tmp_path: Path) -> None:
    """A process that synced while the provider refused kept saying so (lastError) after another process's sync got
    every vector: status in a ``serve`` opened before named an outage that was over, beside pendingFiles 0. And
    one that had synced fine said nothing while another process's sync was refused and files waited."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\n- Prefers tea.\n")
    for i in range(3):
        write(ws, f"memory/n{i}.md", f"- note {i} refused\n")
    refusing = [True]

    def embeddings(req):  # the notes' text is refused until the provider is back
        texts = req.json()["input"]
        if refusing[0] and any("refused" in t for t in texts):
            return Reply(status=400, body="model not found")
        return Reply(json={"data": [{"index": i, "embedding": [0.1 * (i % 7 + 1), 0.2, 0.3]}
                                    for i in range(len(texts))]})

    sync_elsewhere = """
        mem = open_mem(tmp, ws, ms)
        mem.sync()
        st = mem.status()
        mem.close()
        print(json.dumps({"lastError": st["lastError"], "pending": st["pendingFiles"]}))
    """
    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", embeddings)
        remote = {"provider": "openai", "remote": {"baseUrl": server.url + "/v1", "apiKey": "sk-test-0123456789"}}
        with open_mem(tmp_path, ws, remote) as long_lived:
            long_lived.sync()
            assert "model not found" in long_lived.status()["lastError"]
            refusing[0] = False
            assert _other_process(tmp_path, ws, sync_elsewhere, remote) == {"lastError": None, "pending": 0}
            st = long_lived.status()
            assert (st["pendingFiles"], st["lastError"], st["pendingReason"]) == (0, None, None), st
            # The other way round: this process's sync went well, another's was refused.
            refusing[0] = True
            write(ws, "memory/n9.md", "- note 9 refused\n")
            got = _other_process(tmp_path, ws, sync_elsewhere, remote)
            assert "model not found" in got["lastError"] and got["pending"] == 1, got
            st = long_lived.status()
            assert st["pendingFiles"] == 1 and st["lastError"] and "model not found" in st["lastError"], st


def _notes(ws: Path, first: int, last: int) -> None:
    words = "alpha beta gamma delta kestrel zebra budget coffee garden server backup report".split()
    for i in range(first, last):
        line = " ".join(words[(i + k) % len(words)] for k in range(12))
        write(ws, f"memory/n{i:04d}.md", f"# Note {i}\n" + f"{line} n{i}x\n" * 6)


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_disk_error_is_said_by_every_process_until_a_sync_in_any_process_writes(tmp_path: Path) -> None:
    """A sync the disk could not hold: only the process that ran it said so. A fresh `symi-memory status` and a
    serve opened before said lastError None (beside dirty true and the notes missing from search); and a serve
    whose own sync hit the full disk kept saying "could not write the index" after `symi-memory index` had written
    every note. The error is recorded in the index for other processes and cleared by whichever sync writes."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\n- Prefers tea.\n")
    _notes(ws, 0, 200)
    status = """
        mem = open_mem(tmp, ws)
        st = mem.status()
        mem.close()
        print(json.dumps({"lastError": st["lastError"], "files": st["files"], "dirty": st["dirty"]}))
    """
    full_then_room = """
        mem = open_mem(tmp, ws)
        failed = sync_on_a_full_disk(mem)
        mem.close()
        print(json.dumps({"failed": failed}))
    """
    with open_mem(tmp_path, ws) as serve:  # a long-lived process, opened before
        serve.sync()
        _notes(ws, 200, 1200)
        failed = _other_process(tmp_path, ws, full_then_room)["failed"]
        assert "File too large" in failed
        fresh = _other_process(tmp_path, ws, status)
        assert fresh["dirty"] is True and fresh["lastError"] == failed, fresh
        assert serve.status()["lastError"] == failed
        _other_process(tmp_path, ws, "mem = open_mem(tmp, ws); mem.sync(); mem.close(); print('{}')")
        assert _other_process(tmp_path, ws, status) == {"lastError": None, "files": 1201, "dirty": False}
        assert serve.status()["lastError"] is None
    # A long-lived process's own sync hits the full disk; another process's sync with room writes the notes.
    _notes(ws, 1200, 2200)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    serve = subprocess.Popen([sys.executable, "-c", PRELUDE + textwrap.dedent("""
        mem = open_mem(tmp, ws)
        if (failed := sync_on_a_full_disk(mem)) is not None:
            print(json.dumps({"failed": failed}), flush=True)
        sys.stdin.readline()  # another process syncs meanwhile
        print(json.dumps({"lastError": mem.status()["lastError"]}), flush=True)
        mem.close()
    """), str(tmp_path), str(ws), "{}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert serve.stdin is not None and serve.stdout is not None
    try:
        assert "File too large" in json.loads(serve.stdout.readline())["failed"]
        _other_process(tmp_path, ws, "mem = open_mem(tmp, ws); mem.sync(); mem.close(); print('{}')")
        assert _other_process(tmp_path, ws, status) == {"lastError": None, "files": 2201, "dirty": False}
        serve.stdin.write("\n")
        serve.stdin.flush()
        assert json.loads(serve.stdout.readline()) == {"lastError": None}
    finally:
        serve.stdin.close()
        serve.wait(timeout=60)


def test_a_host_opened_on_a_current_index_says_it_is_clean(tmp_path: Path) -> None:
    """A long-lived host (serve, an agent runtime: the watcher running) opened on an index another process had
    brought up to date said dirty: true until its first search or a file change, while `symi-memory status` in any
    other process said false: its watcher's "not synced yet" stood in for the files."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\n- Prefers tea.\n")
    _notes(ws, 0, 20)
    status = """
        mem = open_mem(tmp, ws)
        mem.sync()
        st = mem.status()
        mem.close()
        print(json.dumps({"files": st["files"], "dirty": st["dirty"]}))
    """
    assert _other_process(tmp_path, ws, status) == {"files": 21, "dirty": False}
    with open_mem(tmp_path, ws, {"sync": {"watch": False}}, start=True) as host:
        assert host.status()["dirty"] is False
        write(ws, "memory/later.md", "- a later note\n")
        assert host.status()["dirty"] is True  # the files are what it compares, not a flag


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE and seteuid are POSIX")
def test_a_process_that_may_only_read_the_index_syncs_a_current_index_after_another_recorded_a_disk_error() -> None:
    """Another process's sync hit a full disk and recorded it; the notes it could not write were then removed, so
    the index is current again. A process that may only read the index (another user's, a read-only mount) found
    nothing to write and its sync used to succeed: it then failed with "the index is read-only", trying to clear
    the recorded error it cannot clear (`symi-memory index` exiting with an error, a serve logging every sync)."""
    import shutil
    import tempfile

    from support.unprivileged import Unprivileged

    from symi_memory.errors import BackendError

    root = Path(tempfile.mkdtemp(prefix="symi-readonly-"))  # another user may read it (pytest's tmp is private)
    try:
        root.chmod(0o755)
        ws = root / "ws"
        write(ws, "MEMORY.md", "# Memory\n\n- Prefers tea.\n")
        _notes(ws, 0, 200)
        with open_mem(root, ws) as mem:
            mem.sync()
            db = Path(mem.status()["dbPath"])
        _notes(ws, 200, 1200)
        full = """
            mem = open_mem(tmp, ws)
            failed = sync_on_a_full_disk(mem)
            mem.close()
            print(json.dumps({"failed": failed}))
        """
        assert "File too large" in _other_process(root, ws, full)["failed"]
        for i in range(200, 1200):
            (ws / f"memory/n{i:04d}.md").unlink()
        for p in [root, *root.rglob("*")]:
            if os.geteuid() == 0:
                os.chown(p, 65534, 65534)
            p.chmod(p.stat().st_mode | 0o555)
        db.chmod(0o444)
        with Unprivileged(), open_mem(root, ws) as mem:
            st = mem.status()
            assert st["dirty"] is False and "is read-only for this process" in st["lastError"]
            report = mem.sync()  # nothing to write: no error
            assert (report.files_indexed, report.errors) == (0, ())
            with pytest.raises(BackendError, match="read-only"):  # what it cannot do still says why
                write(ws, "memory/later.md", "- a later note\n")
                mem.sync()
    finally:
        for p in [root, *root.rglob("*")]:
            if p.is_dir() and not p.is_symlink():
                p.chmod(p.stat().st_mode | 0o700)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("backend", ["builtin-sqlite", "faiss"])
def test_status_read_while_another_process_commits_a_sync_never_says_clean_with_the_counts_from_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    """A long-lived process's `status` read its counts, then compared the files on disk with the index in further
    statements: another process's sync committing in between made it say `files: 21, dirty: false` with 31 notes
    on disk and 31 indexed (seen on faiss from a process polling status while `symi-memory index` ran). Every read
    of one status now sees one snapshot of the index."""
    import symi_memory.index.backend as index_backend

    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\n- Prefers tea.\n")
    _notes(ws, 0, 20)
    with open_mem(tmp_path, ws, {"sync": {"watch": False}}, backend=backend) as host:
        host.sync()
        assert (host.status()["files"], host.status()["dirty"]) == (21, False)
        _notes(ws, 20, 30)
        listing = index_backend.scan_sources
        synced: list[dict] = []

        def another_process_syncs_first(*args: object, **kwargs: object) -> object:
            # After status read its counts, before it lists the files: another process indexes the new notes.
            if not synced:
                synced.append(_other_process(tmp_path, ws, f"""
                    mem = open_mem(tmp, ws, backend={backend!r})
                    report = mem.sync()
                    mem.close()
                    print(json.dumps({{"indexed": report.files_indexed}}))
                """))
            return listing(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(index_backend, "scan_sources", another_process_syncs_first)
        st = host.status()
        assert synced == [{"indexed": 10}]
        # One snapshot: from before the other sync (21 indexed, 31 on disk: dirty) or after it; never a mix.
        assert (st["files"], st["dirty"]) in ((21, True), (31, False)), st
        assert st["chunks"] == st["files"], st  # one chunk a note: the counts of one snapshot too
        monkeypatch.undo()
        st = host.status()
        assert (st["files"], st["chunks"], st["dirty"]) == (31, 31, False)
