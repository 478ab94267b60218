"""Another process holding the index's write lock past the busy timeout delays a sync; it does not fail it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import apsw
from support.sqlite_memory import open_mem, write

from symi_memory.index.db import BUSY_TIMEOUT_MS


def test_a_sync_waits_out_a_writer_holding_the_lock_longer_than_the_busy_timeout(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "memory/a.md", "- the first heron\n")
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        write(ws, "memory/b.md", "- the second heron, by the sluice\n")
        other = apsw.Connection(str(mem.backend.store.path))  # as another process would
        other.execute("BEGIN IMMEDIATE")
        release = threading.Timer(BUSY_TIMEOUT_MS / 1000 + 1.5, lambda: other.execute("ROLLBACK"))
        release.start()
        try:
            started = time.monotonic()
            report = mem.sync(reason="watch")
            waited = time.monotonic() - started
        finally:
            release.join()
            other.close()
        assert report.files_indexed == 1 and waited >= BUSY_TIMEOUT_MS / 1000
        assert [h.path for h in mem.search("sluice").results] == ["memory/b.md"]
