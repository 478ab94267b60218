"""The file watcher: root files, a memory/ folder created later, workspaces under 'ignored' names."""

from __future__ import annotations

from pathlib import Path

from support.sqlite_memory import open_mem, wait_for, write


def _found(mem, query: str, path: str) -> bool:
    """Whether a hit from ``path`` holds the word searched for (min_score 0 lists every indexed file)."""
    return any(h.path == path and query in h.snippet for h in mem.search(query, min_score=0).results)


def _pair(tmp_path: Path, ws: Path, debounce: int):
    """A started manager (the watcher) and an unstarted one that only reads, so only the watcher can sync."""
    settings = {"provider": "none", "sync": {"watchDebounceMs": debounce}}
    watcher = open_mem(tmp_path, ws, settings, start=True)
    watcher.sync()
    return watcher, open_mem(tmp_path, ws, settings, start=False)


def test_watcher_sees_root_files_and_a_memory_folder_created_later(tmp_path: Path) -> None:
    # A workspace below a folder named like an ignored one ("venv") must still be watched.
    ws = tmp_path / "venv" / "agent"
    write(ws, "MEMORY.md", "# Memory\n- nothing yet\n")
    watcher, mem = _pair(tmp_path, ws, 100)
    try:
        write(ws, "MEMORY.md", "# Memory\n- the wifi password lives in the blue notebook\n")
        assert wait_for(lambda: _found(mem, "notebook", "MEMORY.md"))
        write(ws, "memory/2026-02-01.md", "- fed the axolotl\n")
        assert wait_for(lambda: _found(mem, "axolotl", "memory/2026-02-01.md"))
        write(ws, "memory/deeper/topic.md", "- quinoa salad recipe\n")
        assert wait_for(lambda: _found(mem, "quinoa", "memory/deeper/topic.md"))
    finally:
        mem.close()
        watcher.close()


def test_changes_in_ignored_subfolders_do_not_trigger_syncs(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "memory/a.md", "- alpha\n")
    watcher, mem = _pair(tmp_path, ws, 50)
    try:
        write(ws, "memory/node_modules/x.md", "- zeta\n")
        write(ws, "memory/b.md", "- beta\n")
        assert wait_for(lambda: _found(mem, "beta", "memory/b.md"))
        assert not _found(mem, "zeta", "memory/node_modules/x.md")
    finally:
        mem.close()
        watcher.close()


def test_a_workspace_removed_under_the_watcher_stays_searchable_and_is_watched_again_when_back(
        tmp_path: Path) -> None:
    # A running service's watcher saw every file of a workspace removed for a while (a folder moved away and back,
    # an unmounted disk) as deleted and emptied the index; made again, the workspace was another folder, which
    # no watch followed, so edits to it waited for the 30 s recheck.
    import logging
    import shutil

    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- prefers tea\n")
    write(ws, "memory/a.md", "- fed the axolotl\n")
    watcher, mem = _pair(tmp_path, ws, 50)
    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("symi_memory").addHandler(handler)
    try:
        shutil.copytree(ws, tmp_path / "saved")
        shutil.rmtree(ws)
        # The watcher's sync has seen it gone (it warns), or (before) emptied the index.
        assert wait_for(lambda: any(f"workspace {ws} does not exist" in m for m in said)
                        or mem.status()["files"] < 2)
        assert _found(mem, "axolotl", "memory/a.md") and _found(mem, "tea", "MEMORY.md")
        assert mem.status()["files"] == 2
        assert f"workspace {ws} does not exist" in watcher.status()["warnings"][0]
        shutil.copytree(tmp_path / "saved", ws)
        write(ws, "MEMORY.md", "- prefers coffee now\n")
        assert wait_for(lambda: _found(mem, "coffee", "MEMORY.md"), timeout=10)
        (ws / "memory" / "a.md").unlink()
        assert wait_for(lambda: not _found(mem, "axolotl", "memory/a.md"), timeout=10)
        assert watcher.status()["warnings"] == []
    finally:
        logging.getLogger("symi_memory").removeHandler(handler)
        mem.close()
        watcher.close()
