"""A reindex killed mid-build leaves no build file past the next open; a live build is never touched (issue 14)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from support.loopback_http import LoopbackServer, Recorded, Reply
from support.sqlite_memory import open_mem, wait_for, write

BUILDER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    from pathlib import Path
    from symi_memory.config import load_config
    from symi_memory.manager import open_memory
    tmp, ws, url = Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
    cfg = load_config(None, state_dir=tmp / "state", overrides={"agents": {"defaults": {"memorySearch": {
        "provider": "openai", "remote": {"baseUrl": url + "/v1", "apiKey": "sk-test-builder"}}}}})
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync(force=True)
""")


def test_a_killed_reindex_leaves_no_build_file_after_the_next_open(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for i in range(30):
        write(ws, f"memory/n{i}.md", "\n".join(f"note {i} line {j} heron" for j in range(60)) + "\n")
    index_dir = tmp_path / "state" / "memory"
    builds = lambda: sorted(index_dir.glob("main.sqlite.build-*"))  # noqa: E731

    def slow(req: Recorded) -> Reply:  # every embedding request hangs: the build stays in progress
        n = len(req.json()["input"])
        return Reply(json={"data": [{"index": i, "embedding": [0.1, 0.2, 0.3]} for i in range(n)]}, delay=30)

    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", slow)
        child = subprocess.Popen([sys.executable, "-c", BUILDER, str(Path(__file__).parent), str(tmp_path), str(ws),
                                  server.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wait_for(lambda: builds() and server.requests, timeout=60)
            leftover = builds()
            with open_mem(tmp_path, ws) as mem:  # a live builder's file is not touched
                assert builds() == leftover
                mem.status()
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert builds() == leftover, "the kill left the build file behind"
    with open_mem(tmp_path, ws) as mem:
        assert builds() == []
        mem.sync()
        assert mem.status()["files"] == 30
    assert json.dumps([str(p) for p in index_dir.iterdir()]).count(".build") == 0
