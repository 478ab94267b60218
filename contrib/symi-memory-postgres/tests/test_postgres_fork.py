"""A process forked from one holding a postgres-backed memory open: the child gets a pool of its own.

The pooled connections are sockets: a child that used the parent's would send its queries down the parent's
sessions while the parent uses them too, and each would read the other's answers. Real server, real fork.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from test_postgres_backend import make_workspace, open_pg, paths

pytestmark = [pytest.mark.postgres, pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")]


def test_a_forked_child_searches_and_syncs_on_its_own_connections_while_the_parent_searches(
        tmp_path: Path, pg_server, pg_schema: str) -> None:  # type: ignore[no-untyped-def]
    files = {f"memory/n{i}.md": f"# Note {i}\n\n- the kestrel{i} nests by the weir\n" for i in range(6)}
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "- prefers tea\n", **files})
    mem = open_pg(tmp_path, pg_server, pg_schema, ws, poolSize=2)
    try:
        mem.sync()
        want = {i: paths(mem, f"kestrel{i} weir")[:1] for i in range(6)}
        assert want == {i: [f"memory/n{i}.md"] for i in range(6)}
        stop = threading.Event()
        wrong: list[object] = []

        def parent_searches() -> None:  # the parent keeps using its pool while the child runs
            while not stop.is_set():
                for i in range(6):
                    try:
                        got = paths(mem, f"kestrel{i} weir")[:1]
                    except Exception as exc:
                        wrong.append(repr(exc))
                        continue
                    if got != want[i]:
                        wrong.append((i, got))

        searching = threading.Thread(target=parent_searches)
        searching.start()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through the pipe
            code = 0
            try:
                os.close(r)
                out: dict[str, object] = {"bad": []}
                deadline = time.monotonic() + 1.5
                while time.monotonic() < deadline:
                    for i in range(6):
                        got = paths(mem, f"kestrel{i} weir")[:1]
                        if got != want[i]:
                            out["bad"].append([i, got])  # type: ignore[attr-defined]
                (ws / "memory" / "child.md").write_text("- the child saw an albatross\n", encoding="utf-8")
                out["synced"] = mem.sync().files_indexed
                out["found"] = paths(mem, "albatross")[:1]
                mem.close()
            except BaseException as exc:
                out = {"error": repr(exc)}
                code = 1
            os.write(w, json.dumps(out).encode())
            os._exit(code)
        os.close(w)
        with os.fdopen(r) as fh:
            child = json.loads(fh.read() or "{}")
        _, status = os.waitpid(pid, 0)
        stop.set()
        searching.join(30)
        assert os.waitstatus_to_exitcode(status) == 0, child
        assert child == {"bad": [], "synced": 1, "found": ["memory/child.md"]}, child
        assert wrong == [], wrong[:5]
        assert paths(mem, "albatross")[:1] == ["memory/child.md"]  # one index, written by the child
    finally:
        mem.close()
