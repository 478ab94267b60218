"""sessions.json written by another tool: bytes that are not UTF-8, a BOM, numbers JSON cannot carry."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from symi_memory.session_store import SessionStore, SessionStoreCorrupt

ROOT = Path(__file__).resolve().parents[1]


def test_file_that_is_not_utf8_is_corrupt_and_repair_moves_it_aside(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions.json")
    # What PowerShell's Out-File writes by default: UTF-16 with a BOM.
    original = '{"k": {"totalTokens": 5}}'.encode("utf-16")
    store.path.write_bytes(original)
    with pytest.raises(SessionStoreCorrupt, match="not UTF-8"):
        store.get("k")
    with pytest.raises(SessionStoreCorrupt):
        store.record_flush("k")
    assert store.path.read_bytes() == original  # left untouched
    aside = store.repair()
    assert aside is not None and aside.read_bytes() == original
    assert store.record_flush("k", compaction_count=1)["memoryFlushCompactionCount"] == 1


def test_utf8_bom_is_read(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions.json")
    store.path.write_bytes(b'\xef\xbb\xbf{"k": {"totalTokens": 5}}\n')
    assert store.get("k") == {"totalTokens": 5}
    store.update("k", {"compactionCount": 1})
    assert json.loads(store.path.read_bytes()) == {"k": {"totalTokens": 5, "compactionCount": 1}}


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_number_is_refused_and_nothing_written(tmp_path: Path, value: float) -> None:
    store = SessionStore(tmp_path / "sessions.json")
    store.update("k", {"totalTokens": 5})
    before = store.path.read_bytes()
    with pytest.raises(ValueError, match="totalTokens"):
        store.update("k", {"totalTokens": value})
    assert store.path.read_bytes() == before
    json.loads(before, parse_constant=lambda c: pytest.fail(f"{c} in sessions.json"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sessions.json", "sessions.json.lock"]


def test_cli_flush_check_on_a_utf16_file_says_what_to_do(tmp_path: Path) -> None:
    sessions = tmp_path / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "sessions.json").write_bytes('{"k": {}}'.encode("utf-16"))
    proc = subprocess.run(
        [sys.executable, "-m", "symi_memory.cli", "--state-dir", str(tmp_path), "--workspace", str(tmp_path / "ws"),
         "flush", "check", "--session", "k", "--tokens", "190000"],
        capture_output=True, text=True, env={"PYTHONPATH": f"{ROOT / 'core'}:{ROOT / 'plugins'}", "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "not UTF-8" in proc.stderr and "repair" in proc.stderr


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_file_holding_a_non_finite_number_is_corrupt(tmp_path: Path, constant: str) -> None:
    """A sessions.json with NaN or Infinity in it (written by an older version, or another tool) is corrupt, as the
    runtime's JSON reader finds it. Before, it was read, and every update then failed to write it back: ``flush
    check`` crashed with a traceback and 'unexpected ValueError (a bug ...)'."""
    sessions = tmp_path / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    original = f'{{"k": {{"totalTokens": 5}}, "other": {{"x": {constant}}}}}\n'.encode()
    (sessions / "sessions.json").write_bytes(original)
    proc = subprocess.run(
        [sys.executable, "-m", "symi_memory.cli", "--state-dir", str(tmp_path), "--workspace", str(tmp_path / "ws"),
         "flush", "check", "--session", "k", "--tokens", "190000"],
        capture_output=True, text=True, env={"PYTHONPATH": f"{ROOT / 'core'}:{ROOT / 'plugins'}", "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert constant.lstrip("-") in proc.stderr and "repair" in proc.stderr
    store = SessionStore(sessions / "sessions.json")
    assert store.path.read_bytes() == original  # left untouched
    aside = store.repair()
    assert aside is not None and aside.read_bytes() == original
    assert store.record_flush("k", compaction_count=1)["memoryFlushCompactionCount"] == 1
