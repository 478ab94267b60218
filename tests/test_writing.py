from __future__ import annotations

import os
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from symi_memory.writing import MemoryWriteError, append_memory, daily_log_path, session_start_context

NOW = datetime(2026, 2, 16, 15, 0, tzinfo=UTC)  # 10:00 in New York


def test_daily_append_creates_memory_dir_in_user_zone(tmp_path: Path) -> None:
    r = append_memory(tmp_path, "Picked Postgres for JSONB.", now=NOW, tz="America/New_York")
    assert r.path == "memory/2026-02-16.md"
    assert (tmp_path / r.path).read_text() == "Picked Postgres for JSONB.\n"
    assert r.to_dict() == {
        "path": "memory/2026-02-16.md",
        "bytesWritten": len(b"Picked Postgres for JSONB.\n"),
    }
    late = datetime(2026, 2, 17, 3, 0, tzinfo=UTC)
    assert append_memory(tmp_path, "late", now=late, tz="America/New_York").path == "memory/2026-02-16.md"
    assert append_memory(tmp_path, "late", now=late, tz="Asia/Tokyo").path == "memory/2026-02-17.md"


def test_append_never_rewrites_and_adds_missing_newline(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("# Long-term\n- likes tea")  # no trailing newline
    before = (tmp_path / "MEMORY.md").stat().st_ino
    r = append_memory(tmp_path, "- prefers dark mode", target="long-term")
    assert r.path == "MEMORY.md" and r.bytes_written == len("\n- prefers dark mode\n")
    assert (tmp_path / "MEMORY.md").read_text() == "# Long-term\n- likes tea\n- prefers dark mode\n"
    assert (tmp_path / "MEMORY.md").stat().st_ino == before  # appended in place, not replaced
    append_memory(tmp_path, "- third\n", target="long-term")
    assert (tmp_path / "MEMORY.md").read_text().endswith("- prefers dark mode\n- third\n")


def test_long_term_uses_existing_lowercase_file(tmp_path: Path) -> None:
    (tmp_path / "memory.md").write_text("old\n")
    assert append_memory(tmp_path, "new", target="long-term").path == "memory.md"
    assert (tmp_path / "memory.md").read_text() == "old\nnew\n"


def test_refuses_symlinks(tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("secret\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "MEMORY.md").symlink_to(outside)
    with pytest.raises(MemoryWriteError, match="symlink"):
        append_memory(ws, "x", target="long-term")
    ws2 = tmp_path / "ws2"
    ws2.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (ws2 / "memory").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(MemoryWriteError, match="symlink"):
        append_memory(ws2, "x", now=NOW, tz="UTC")
    assert outside.read_text() == "secret\n"
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_refuses_bad_input_and_sandbox_access(tmp_path: Path) -> None:
    with pytest.raises(MemoryWriteError, match="empty"):
        append_memory(tmp_path, "   \n")
    with pytest.raises(MemoryWriteError, match="does not exist"):
        append_memory(tmp_path / "nope", "x")
    (tmp_path / "afile").write_text("keep\n")
    with pytest.raises(MemoryWriteError, match="afile is a file, not a folder"):
        append_memory(tmp_path / "afile", "x")
    assert (tmp_path / "afile").read_text() == "keep\n"
    (tmp_path / "afile").unlink()
    with pytest.raises(MemoryWriteError, match="not writable.*workspaceAccess=ro"):
        append_memory(tmp_path, "x", access="ro")
    with pytest.raises(MemoryWriteError, match="'weekly'"):
        append_memory(tmp_path, "x", target="weekly")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_refuses_read_only_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "MEMORY.md").write_text("keep\n")
    if os.geteuid() == 0:
        # Root ignores mode bits; an immutable directory binds root too.
        if (
            shutil.which("chattr") is None
            or subprocess.run(["chattr", "+i", str(ws)], capture_output=True).returncode
        ):
            pytest.skip("running as root and cannot make an immutable directory (chattr +i)")
        undo = ["chattr", "-i", str(ws)]
    else:
        ws.chmod(0o555)
        undo = ["chmod", "755", str(ws)]
    try:
        with pytest.raises(MemoryWriteError, match="not writable"):
            append_memory(ws, "x", now=NOW, tz="UTC")
    finally:
        subprocess.run(undo, check=True)
    assert (ws / "MEMORY.md").read_text() == "keep\n"
    assert not (ws / "memory").exists()


def test_concurrent_appends_keep_every_line(tmp_path: Path) -> None:
    import threading

    def worker(n: int) -> None:
        for i in range(25):
            append_memory(tmp_path, f"w{n}-{i}", target="long-term")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = (tmp_path / "MEMORY.md").read_text().splitlines()
    assert sorted(lines) == sorted(f"w{n}-{i}" for n in range(4) for i in range(25))


def _workspace(tmp_path: Path) -> Path:
    (tmp_path / "memory").mkdir()
    (tmp_path / "MEMORY.md").write_text("# Private\nUser's name is Ana.\n")
    (tmp_path / "memory" / "2026-02-16.md").write_text("today's note\n")
    (tmp_path / "memory" / "2026-02-15.md").write_text("yesterday's note\n")
    (tmp_path / "memory" / "2026-02-14.md").write_text("older note\n")
    return tmp_path


def test_session_start_context_direct(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    ctx = session_start_context(ws, session_key="agent:main:discord:dm:1", now=NOW, tz="America/New_York")
    assert [f.path for f in ctx.files] == ["MEMORY.md", "memory/2026-02-15.md", "memory/2026-02-16.md"]
    d = ctx.to_dict()
    assert d["chatType"] == "direct" and d["date"] == "2026-02-16" and d["longTerm"] is True
    assert d["files"][0] == {"path": "MEMORY.md", "text": "# Private\nUser's name is Ana.\n"}
    assert "older note" not in ctx.render() and "## memory/2026-02-16.md" in ctx.render()
    assert [f.path for f in session_start_context(ws, now=NOW, tz="UTC").files][0] == "MEMORY.md"


@pytest.mark.parametrize("key", ["discord:group:42", "agent:main:slack:channel:C1"])
def test_session_start_context_never_leaks_long_term_to_groups(tmp_path: Path, key: str) -> None:
    ctx = session_start_context(_workspace(tmp_path), session_key=key, now=NOW, tz="UTC")
    assert ctx.long_term is False
    assert [f.path for f in ctx.files] == ["memory/2026-02-15.md", "memory/2026-02-16.md"]
    assert "Ana" not in ctx.render()


def test_session_start_context_lowercase_and_missing(tmp_path: Path) -> None:
    (tmp_path / "memory.md").write_text("lower\n")
    ctx = session_start_context(tmp_path, now=NOW, tz="UTC")
    assert [(f.path, f.text) for f in ctx.files] == [("memory.md", "lower\n")]
    assert session_start_context(tmp_path / "empty", now=NOW, tz="UTC").files == ()


def test_daily_log_path_days_ago() -> None:
    assert daily_log_path(NOW, "UTC", days_ago=1) == "memory/2026-02-15.md"
    assert daily_log_path(datetime(2026, 3, 1, 12, tzinfo=UTC), "UTC", days_ago=1) == "memory/2026-02-28.md"


def test_memory_append_tool(tmp_path: Path) -> None:
    from symi_memory.append_tool import MEMORY_APPEND_DEFINITION, memory_append

    assert MEMORY_APPEND_DEFINITION["parameters"]["required"] == ["text"]
    out = memory_append(tmp_path, {"text": "ship on Friday"}, now=NOW, tz="UTC")
    assert out == {"path": "memory/2026-02-16.md", "bytesWritten": 15}
    out = memory_append(tmp_path, {"text": "likes tea", "target": "long-term"})
    assert out["path"] == "MEMORY.md" and (tmp_path / "MEMORY.md").read_text() == "likes tea\n"
    assert memory_append(tmp_path, {"text": 5})["error"] == "text required (a string)"
    assert "target must be" in memory_append(tmp_path, {"text": "x", "target": "weekly"})["error"]
    assert "not writable" in memory_append(tmp_path, {"text": "x"}, access="none")["error"]
