"""One agent id, two workspaces: each gets its own index, so neither sync nor search crosses over."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.sqlite_memory import open_mem, write


def two_workspaces(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "ws-a", tmp_path / "ws-b"
    write(a, "MEMORY.md", "# Memory\n\n- The pelican count was 212 this spring.\n")
    write(b, "MEMORY.md", "# Memory\n\n- The heron count was 57 this autumn.\n")
    return a, b


def paths(mem) -> set[str]:  # type: ignore[no-untyped-def]
    return {f["path"] for f in mem.backend.store.file_rows()}


def test_two_workspaces_of_one_agent_keep_separate_indexes(tmp_path: Path) -> None:
    a, b = two_workspaces(tmp_path)
    with open_mem(tmp_path, a) as mem_a, open_mem(tmp_path, b) as mem_b:
        mem_a.sync()
        mem_b.sync()
        # Before: both opened state/memory/main.sqlite, and b's sync deleted a's MEMORY.md row and wrote b's.
        assert mem_a.status()["dbPath"] != mem_b.status()["dbPath"]
        assert [h.snippet for h in mem_a.search("pelican count").results if "pelican" in h.snippet]
        assert not [h for h in mem_a.search("heron count").results if "heron" in h.snippet]
        assert not [h for h in mem_b.search("pelican count").results if "pelican" in h.snippet]
        generation = mem_a.backend.store.generation()
        mem_b.sync(force=True)
        assert mem_a.backend.store.generation() == generation  # b's reindex leaves a's index alone
    # The first workspace keeps the agent's configured file; reopening finds it there, already indexed.
    with open_mem(tmp_path, a) as again:
        assert again.status()["dbPath"] == str(tmp_path / "state" / "memory" / "main.sqlite")
        assert again.status()["files"] == 1 and not again.status()["dirty"]
    with open_mem(tmp_path, b) as again_b:
        assert Path(again_b.status()["dbPath"]).name.startswith("main-ws-")
        assert again_b.status()["files"] == 1 and not again_b.status()["dirty"]


def test_a_moved_workspace_takes_over_the_agents_index(tmp_path: Path) -> None:
    a, _ = two_workspaces(tmp_path)
    with open_mem(tmp_path, a) as mem:
        mem.sync()
    moved = tmp_path / "renamed"
    shutil.move(str(a), moved)
    with open_mem(tmp_path, moved) as mem:
        # The recorded workspace is gone: the agent's file (and its embedding cache) is reused.
        assert mem.status()["dbPath"] == str(tmp_path / "state" / "memory" / "main.sqlite")
        mem.sync()
        assert paths(mem) == {"MEMORY.md"}
        assert [h for h in mem.search("pelican count").results if "pelican" in h.snippet]
