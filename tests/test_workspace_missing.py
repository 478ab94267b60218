"""A workspace path that does not exist (a typo): syncs and status say so instead of silently indexing nothing."""

from __future__ import annotations

import logging
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
