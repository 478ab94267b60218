"""A workspace, state dir or extra path whose own path is not UTF-8 (a Latin-1 folder name on Linux).

Files below such a folder have ordinary relative names, so memory works there: the CLI (in a subprocess,
as an operator runs it) and ``open_memory`` search, read, append and report status, JSON stays valid UTF-8
with the path's odd bytes shown as ``\\xNN``, and an index of an ordinary UTF-8 workspace keeps the very
meta value it always had (no rebuild). A command that crashes never exits 0.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from symi_memory import load_config, open_memory

pytestmark = pytest.mark.skipif(sys.platform == "win32" or sys.platform == "darwin",
                                reason="needs a file system that takes any bytes in a name")

KEYWORD_ONLY = {"agents": {"defaults": {"memorySearch": {"provider": "none"}}}}


def _odd(tmp_path: Path, name: bytes) -> Path:
    """``tmp_path / name`` where ``name`` holds bytes that are not UTF-8, as Python names it (surrogates)."""
    return Path(os.fsdecode(os.fsencode(tmp_path) + b"/" + name))


def _workspace(path: Path, note: str = "The kraken lives in the north fjord.") -> Path:
    (path / "memory").mkdir(parents=True)
    (path / "MEMORY.md").write_text(f"# Memory\n\n- {note}\n", encoding="utf-8")
    return path


def _cli(state: Path, ws: Path, *args: str, cfg: Path, env_extra: dict[str, str] | None = None,
         ) -> subprocess.CompletedProcess[bytes]:
    cmd = [sys.executable, "-m", "symi_memory.cli", "--config", str(cfg), "--state-dir", os.fsencode(state),
           "--workspace", os.fsencode(ws), *args]
    env = {k: v for k, v in os.environ.items() if k not in ("SYMI_CONFIG", "SYMI_MEMORY_PLUGINS", "SYMI_STATE_DIR")}
    env.update(env_extra or {})
    return subprocess.run(cmd, capture_output=True, env=env, timeout=300)


def _config(tmp_path: Path) -> Path:
    cfg = tmp_path / "symi.json"
    cfg.write_text(json.dumps(KEYWORD_ONLY), encoding="utf-8")
    return cfg


def _ok(out: subprocess.CompletedProcess[bytes]) -> str:
    """The command's stdout, once it exited 0 with no traceback; stdout must be valid UTF-8."""
    err = out.stderr.decode("utf-8", "replace")
    assert out.returncode == 0, err
    assert "Traceback" not in err
    return out.stdout.decode("utf-8")  # strict: a raw byte of the path would fail here


def test_cli_works_in_a_workspace_and_state_dir_whose_paths_are_not_utf8(tmp_path: Path) -> None:
    ws = _workspace(_odd(tmp_path, b"ws\xff"))
    state = _odd(tmp_path, b"st\xfe")
    cfg = _config(tmp_path)

    found = _ok(_cli(state, ws, "search", "kraken", "--no-server", cfg=cfg))
    assert "north fjord" in found and "MEMORY.md" in found

    status = json.loads(_ok(_cli(state, ws, "status", "--json", cfg=cfg)))
    assert status["workspaceDir"] == os.fsencode(ws).decode("utf-8", "backslashreplace")
    assert status["workspaceDir"].endswith("/ws\\xff")
    assert status["dbPath"].startswith(os.fsencode(state).decode("utf-8", "backslashreplace"))
    assert status["files"] == 1

    assert "north fjord" in _ok(_cli(state, ws, "get", "MEMORY.md", cfg=cfg))

    _ok(_cli(state, ws, "append", "Octopus spotted near the pier.", cfg=cfg))
    daily = list((ws / "memory").glob("*.md"))
    assert len(daily) == 1 and "Octopus spotted" in daily[0].read_text(encoding="utf-8")
    assert "pier" in _ok(_cli(state, ws, "search", "octopus", "--no-server", cfg=cfg))
    # The index is under the odd state dir, not anywhere else.
    assert list((state / "memory").glob("*.sqlite"))


def test_status_json_is_utf8_even_where_stdout_would_write_raw_bytes(tmp_path: Path) -> None:
    """With a C.UTF-8 locale Python writes a path's odd byte to stdout as it is: JSON must not carry it."""
    ws = _workspace(_odd(tmp_path, b"ws\xe9"))
    out = _cli(tmp_path / "state", ws, "status", "--json", cfg=_config(tmp_path),
               env_extra={"LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8:surrogateescape"})
    assert json.loads(_ok(out))["workspaceDir"].endswith("/ws\\xe9")


def test_open_memory_in_a_workspace_whose_path_is_not_utf8(tmp_path: Path) -> None:
    ws = _workspace(_odd(tmp_path, b"caf\xe9"))
    state = _odd(tmp_path, b"state\xff")
    state.mkdir()
    (state / "symi.json").write_text(json.dumps(KEYWORD_ONLY), encoding="utf-8")
    with open_memory(load_config(None, state_dir=state), workspace=ws) as mem:
        mem.sync(reason="test")
        hits = mem.search("kraken").results
        assert [h.path for h in hits] == ["MEMORY.md"]
        assert "north fjord" in mem.read_file("MEMORY.md").text
        json.dumps(mem.status(), ensure_ascii=False).encode("utf-8")  # no lone surrogate left in
        mem.append("Squid ink on the deck.")
        mem.sync(reason="test")
        assert any("Squid" in h.snippet for h in mem.search("squid").results)


def test_two_odd_workspaces_of_one_agent_keep_their_own_indexes(tmp_path: Path) -> None:
    """The workspace claimed in the shared index file is compared as stored: each keeps its own notes."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "symi.json").write_text(json.dumps(KEYWORD_ONLY), encoding="utf-8")
    first = _workspace(_odd(tmp_path, b"one\xff"), "The kraken lives in the north fjord.")
    second = _workspace(_odd(tmp_path, b"two\xff"), "The walrus naps on the south beach.")
    for ws, word, other in ((first, "kraken", "walrus"), (second, "walrus", "kraken"),
                            (first, "kraken", "walrus")):
        with open_memory(load_config(None, state_dir=state), workspace=ws) as mem:
            mem.sync(reason="test")
            assert [h.path for h in mem.search(word).results] == ["MEMORY.md"]
            assert mem.search(other).results == ()
    assert len(list((state / "memory").glob("*.sqlite"))) == 2


def test_a_utf8_workspace_keeps_the_meta_value_existing_indexes_hold(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "wörkspace")
    state = tmp_path / "state"
    state.mkdir()
    (state / "symi.json").write_text(json.dumps(KEYWORD_ONLY), encoding="utf-8")
    with open_memory(load_config(None, state_dir=state), workspace=ws) as mem:
        mem.sync(reason="test")
        db = mem.status()["dbPath"]
    with sqlite3.connect(db) as conn:
        (value,) = conn.execute("SELECT value FROM meta WHERE key='workspace'").fetchone()
    assert value == str(ws.resolve())


def test_an_extra_path_that_is_not_utf8_is_named_not_a_crash(tmp_path: Path) -> None:
    """Files outside the workspace are stored by a relative name (``../x/notes.md``): below a folder whose name
    is not UTF-8 that name is not either, so they are reported skipped, as any such file name is."""
    ws = _workspace(tmp_path / "ws")
    extra = _odd(tmp_path, b"extra\xfd")
    extra.mkdir()
    (extra / "notes.md").write_text("Squid notes.\n", encoding="utf-8")
    cfg = tmp_path / "symi.json"
    cfg.write_text(json.dumps({"agents": {"defaults": {"memorySearch": {"provider": "none",
                                                                         "extraPaths": [str(extra)]}}}}),
                   encoding="utf-8")
    assert "north fjord" in _ok(_cli(tmp_path / "state", ws, "search", "kraken", "--no-server", cfg=cfg))
    status = json.loads(_ok(_cli(tmp_path / "state", ws, "status", "--json", cfg=cfg)))
    assert status["extraPaths"] == [os.fsencode(extra).decode("utf-8", "backslashreplace")]
    assert [s["path"] for s in status["skipped"]] == ["../extra\\xfd/notes.md"]


CRASHING_COMMAND = """
from symi_memory import hookimpl

def _boom(args, app):
    raise RuntimeError("tally table missing")

@hookimpl
def symi_memory_register_commands(subparsers):
    p = subparsers.add_parser("tally", help="count things")
    p.set_defaults(func=_boom)
"""


def test_a_command_that_crashes_does_not_exit_0(tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = site / "tally_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tally-plugin\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[symi_memory]\ntally = tally_plugin\n", encoding="utf-8")
    (site / "tally_plugin.py").write_text(textwrap.dedent(CRASHING_COMMAND), encoding="utf-8")
    ws = _workspace(tmp_path / "ws")
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    out = _cli(tmp_path / "state", ws, "tally", cfg=_config(tmp_path), env_extra=env)
    err = out.stderr.decode("utf-8", "replace")
    assert out.returncode == 1, err
    assert "tally table missing" in err
    # The one-line error names the plugin whose code raised (a third party's crash is not called ours).
    assert err.rstrip().splitlines()[-1].startswith("symi-memory: error: plugin 'tally' (tally-plugin 1.0) raised "
                                                     "RuntimeError at tally_plugin.py:")
