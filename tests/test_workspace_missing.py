"""A workspace path that does not exist (a typo), or one that goes away for a while (renamed, removed, unmounted,
replaced by a file): syncs and status say so instead of silently indexing nothing, and what the index holds from
it stays searchable until it is back."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest
from support.sqlite_memory import open_mem, write

from symi_memory.aio import AsyncMemoryManager


def test_a_missing_workspace_is_reported_by_sync_status_and_the_log_once(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    typo = tmp_path / "wrokspace"
    mem = open_mem(tmp_path, typo)
    with caplog.at_level(logging.WARNING, logger="symi_memory"):
        first = mem.sync()
        second = mem.sync()
    assert first.files_scanned == 0 and first.errors == ()
    assert len(first.warnings) == 1 and f"workspace {typo} does not exist" in first.warnings[0], first
    assert first.to_dict()["warnings"] == list(first.warnings)
    assert second.warnings == first.warnings
    assert [r.getMessage() for r in caplog.records if "does not exist" in r.getMessage()] == [first.warnings[0]]
    assert mem.status()["warnings"] == [first.warnings[0]]
    # Created (a new workspace, empty, memory/ not there yet): nothing to warn about.
    typo.mkdir()
    assert mem.sync().warnings == () and mem.status()["warnings"] == []
    write(typo, "MEMORY.md", "- prefers tea\n")
    assert mem.sync().files_indexed == 1
    mem.close()


def test_a_workspace_that_is_a_file_is_reported(tmp_path: Path) -> None:
    afile = tmp_path / "notes.md"
    afile.write_text("- not a folder\n", encoding="utf-8")
    mem = open_mem(tmp_path, afile)
    report = mem.sync()
    assert report.warnings and "is a file, not a folder" in report.warnings[0]
    assert mem.status()["warnings"] == list(report.warnings)
    mem.close()


def test_the_cli_status_shows_the_warning(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    code, out, _err = cli("--workspace", str(tmp_path / "nope"), "status")
    assert code == 0
    assert "warning" in out and f"workspace {tmp_path / 'nope'} does not exist" in out, out


def test_the_async_facade_passes_the_warning_on(tmp_path: Path) -> None:
    import asyncio

    async def scenario() -> None:
        async with AsyncMemoryManager(open_mem(tmp_path, tmp_path / "nope")) as amm:
            report = await amm.sync()
            assert report.warnings and "does not exist" in report.warnings[0]

    asyncio.run(scenario())


def test_the_cli_index_and_search_warn_once_each(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    nope = tmp_path / "nope"
    for args in (("index",), ("search", "tea")):
        code, _out, err = cli("--workspace", str(nope), *args)
        assert code == 0, err
        assert err.count(f"workspace {nope} does not exist") == 1, err


def _paths(mem, query: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The files whose hits hold the word searched for."""
    return sorted(h.path for h in mem.search(query, min_score=0).results if query in h.snippet)


@pytest.mark.parametrize("away", ["renamed", "removed", "a file"])
def test_a_workspace_gone_for_a_while_keeps_its_index_and_catches_up_when_back(tmp_path: Path, away: str) -> None:
    # A sync while the workspace was away (a folder renamed, removed and restored, an unmounted disk) took every
    # file in it for deleted: the index came back empty and searches found nothing until it was back and synced.
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- prefers tea\n")
    write(ws, "memory/a.md", "- fed the axolotl\n")
    write(ws, "memory/b.md", "- the boiler code is 4471\n")
    mem = open_mem(tmp_path, ws)
    assert mem.sync().files_indexed == 3
    shutil.copytree(ws, tmp_path / "saved")
    if away == "renamed":
        os.rename(ws, tmp_path / "elsewhere")
    else:
        shutil.rmtree(ws)
        if away == "a file":
            ws.write_text("not a folder\n", encoding="utf-8")
    report = mem.sync()
    why = "is a file, not a folder" if away == "a file" else "does not exist"
    assert report.files_removed == 0 and report.errors == (), report
    assert len(report.warnings) == 1 and report.warnings[0].startswith(f"workspace {ws} {why}"), report.warnings
    assert "stays searchable until it is back" in report.warnings[0]
    assert _paths(mem, "axolotl") == ["memory/a.md"] and _paths(mem, "4471") == ["memory/b.md"]
    st = mem.status()
    assert st["files"] == 3 and st["warnings"] == list(report.warnings) and st["dirty"] is False
    # Back (as another folder when it was removed): a file deleted meanwhile goes, one written meanwhile comes.
    if away == "renamed":
        os.rename(tmp_path / "elsewhere", ws)
    else:
        if away == "a file":
            ws.unlink()
        shutil.copytree(tmp_path / "saved", ws)
    (ws / "memory" / "b.md").unlink()
    write(ws, "memory/c.md", "- the heron came back\n")
    report = mem.sync()
    assert (report.files_removed, report.files_indexed, report.warnings) == (1, 1, ()), report
    assert _paths(mem, "4471") == [] and _paths(mem, "heron") == ["memory/c.md"] and _paths(mem, "axolotl")
    assert mem.status()["warnings"] == []
    mem.close()


def test_an_extra_folder_gone_for_a_while_keeps_its_files_indexed(tmp_path: Path) -> None:
    ws, notes = tmp_path / "ws", tmp_path / "mnt" / "notes"
    write(ws, "MEMORY.md", "- prefers tea\n")
    write(notes, "trip.md", "- the ferry leaves at 0710\n")
    mem = open_mem(tmp_path, ws, {"extraPaths": [str(notes)]})
    mem.sync()
    assert _paths(mem, "ferry") == ["../mnt/notes/trip.md"]
    os.rename(tmp_path / "mnt", tmp_path / "unmounted")
    (ws / "MEMORY.md").unlink()  # a file deleted in the workspace, which is there, still goes
    report = mem.sync()
    assert report.files_removed == 1, report
    assert report.warnings == (f"extra path {notes} (memorySearch.extraPaths) does not exist: nothing new is indexed "
                               "from it; what the index already holds from it stays searchable until it is back or "
                               "leaves extraPaths",)
    assert _paths(mem, "ferry") == ["../mnt/notes/trip.md"] and _paths(mem, "tea") == []
    assert mem.status()["warnings"] == list(report.warnings)
    os.rename(tmp_path / "unmounted", tmp_path / "mnt")
    (notes / "trip.md").unlink()
    assert mem.sync().files_removed == 1 and _paths(mem, "ferry") == []
    mem.close()


def test_a_full_rebuild_waits_for_a_workspace_that_is_away(tmp_path: Path) -> None:
    # `index --force` (or a model change) while the workspace is unmounted would build an index of nothing.
    ws = tmp_path / "ws"
    write(ws, "memory/a.md", "- fed the axolotl\n")
    mem = open_mem(tmp_path, ws)
    mem.sync()
    os.rename(ws, tmp_path / "away")
    report = mem.sync(force=True)
    assert report.files_removed == 0 and not report.full
    # Asked for and not done: an error (`index --force` exits 1), not only a warning.
    assert len(report.errors) == 1 and "the full rebuild of the index waits until the workspace" in report.errors[0]
    assert "drop the 1 files" in report.errors[0]
    assert _paths(mem, "axolotl") == ["memory/a.md"]
    os.rename(tmp_path / "away", ws)
    report = mem.sync(force=True)
    assert report.full and report.files_indexed == 1 and report.warnings == ()
    mem.close()


def test_the_cli_index_force_while_the_workspace_is_away_fails_saying_why(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    # It printed "sync: 1 files scanned, 0 indexed, 0 removed, ..." and exited 0: a script rebuilding every agent's
    # index (operators.md, after an upgrade) took an index that was not rebuilt for rebuilt.
    ws = tmp_path / "ws"
    write(ws, "memory/a.md", "- fed the axolotl\n")
    code, _out, err = cli("--workspace", str(ws), "index")
    assert code == 0, err
    os.rename(ws, tmp_path / "away")
    code, _out, err = cli("--workspace", str(ws), "index", "--force")
    assert code == 1, err
    assert f"the full rebuild of the index waits until the workspace {ws} is back" in err, err


def test_an_extra_path_deleted_for_good_does_not_hold_up_a_full_rebuild(tmp_path: Path) -> None:
    # A full rebuild (here a chunking change) waited for the deleted extra folder to come back, that is for ever:
    # nothing written in the workspace after it was indexed, and searches stayed keyword-only on the old index.
    ws, notes = tmp_path / "ws", tmp_path / "notes"
    write(ws, "MEMORY.md", "- prefers tea\n")
    write(notes, "trip.md", "- the ferry leaves at 0710\n")
    mem = open_mem(tmp_path, ws, {"extraPaths": [str(notes)]})
    mem.sync()
    mem.close()
    shutil.rmtree(notes)  # on purpose: the user no longer wants it, but extraPaths still names it
    write(ws, "memory/boat.md", "- owns a yacht named Pelican\n")
    mem = open_mem(tmp_path, ws, {"extraPaths": [str(notes)], "chunking": {"tokens": 300}})
    report = mem.sync()
    assert report.full and report.errors == (), report
    assert _paths(mem, "Pelican") == ["memory/boat.md"] and _paths(mem, "tea") == ["MEMORY.md"]
    assert _paths(mem, "ferry") == []  # gone with the rebuild, and the report says so
    assert any("left out the 1 files indexed from " + str(notes) in w for w in report.warnings), report.warnings
    write(notes, "trip.md", "- the ferry leaves at 0710\n")  # back: indexed again
    assert mem.sync().files_indexed == 1 and _paths(mem, "ferry") == ["../notes/trip.md"]
    mem.close()


def _replaced_by_a_file(ws: Path) -> None:
    shutil.rmtree(ws)
    ws.write_text("- not a folder any more\n", encoding="utf-8")


def test_memory_get_on_a_workspace_replaced_by_a_file_says_so(tmp_path: Path) -> None:
    # It answered "path required" for every path, as if the agent had asked for something outside its memory.
    from symi_memory import tools

    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- prefers tea\n")
    write(ws, "memory/a.md", "- fed the axolotl\n")
    mem = open_mem(tmp_path, ws)
    mem.sync()
    _replaced_by_a_file(ws)
    for path in ("MEMORY.md", "memory/a.md", "memory/never-written.md", str(ws / "memory" / "a.md")):
        out = tools.memory_get(mem, {"path": path})
        assert out["text"] == "" and out["error"] == (
            f"cannot read {path}: the workspace {ws} is a file, not a folder; set the workspace to the folder "
            "that holds MEMORY.md and memory/"), out
    assert tools.memory_get(mem, {"path": "../elsewhere.md"})["error"] == "path required"  # refused as before
    # Search answers from what was indexed before (true as of then), and status says why nothing is newer.
    found = tools.memory_search(mem, {"query": "axolotl"})
    assert [r["path"] for r in found["results"]] == ["memory/a.md"]
    assert f"workspace {ws} is a file, not a folder" in mem.status()["warnings"][0]
    mem.close()


def test_the_cli_on_a_workspace_replaced_by_a_file(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    write(ws, "memory/a.md", "- fed the axolotl\n")
    cfg = tmp_path / "c.toml"
    # From the config (--workspace naming a file is refused before anything runs).
    cfg.write_text(f'[agents.defaults]\nworkspace = "{ws}"\n[agents.defaults.memorySearch]\nprovider = "none"\n',
                   encoding="utf-8")
    base = ("--config", str(cfg))
    assert cli(*base, "index")[0] == 0
    _replaced_by_a_file(ws)
    code, _out, err = cli(*base, "get", "memory/a.md")
    assert code == 1 and err.strip() == (
        f"symi-memory: error: memory/a.md: cannot read memory/a.md: the workspace {ws} is a file, not a folder; "
        "set the workspace to the folder that holds MEMORY.md and memory/"), err
    code, out, err = cli(*base, "search", "axolotl", "--json", json_out=True)
    assert code == 0 and [r["path"] for r in out["results"]] == ["memory/a.md"], err
    assert err.count(f"workspace {ws} is a file, not a folder") == 1, err
    code, out, _err = cli(*base, "status")
    assert code == 0 and f"workspace {ws} is a file, not a folder" in out and "stays searchable" in out, out


def test_an_extra_path_that_is_a_file_other_than_markdown_says_only_md_files_are_indexed(tmp_path: Path) -> None:
    # "is a file, not a folder" told the user to name a folder, and "stays searchable until it is back" that it would
    # come back; a .txt file never is indexed (behaviour §2: a file must end in .md).
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- prefers tea\n")
    write(tmp_path, "team/notes.txt", "- the ferry leaves at 0710\n")
    with open_mem(tmp_path, ws, {"extraPaths": ["../team/notes.txt"]}) as mem:
        report = mem.sync()
        note = tmp_path / "team" / "notes.txt"
        assert report.warnings == (
            f"extra path {note} (memorySearch.extraPaths) is not a Markdown file: only .md files and folders are "
            "indexed; name a .md file or a folder, or take it out of extraPaths",), report.warnings
        assert mem.status()["warnings"] == list(report.warnings)
