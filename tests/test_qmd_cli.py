"""The qmd backend from the CLI, as a new user meets it: qmd missing, qmd noisy, extra paths (issue 14)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from qmd_standin.helpers import standin_command, write

# What a new process reports and whether it runs qmd again: every CLI call here is a new process, as a user's is.
pytestmark = pytest.mark.cli_process


def _config(tmp_path: Path, command: str, **memory_search) -> Path:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"memory": {"backend": "qmd", "qmd": {"command": command}},
                               "agents": {"defaults": {"memorySearch": {"provider": "none", **memory_search}}}}),
                   encoding="utf-8")
    return cfg


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    write(ws / "MEMORY.md", "# Memory\n\nThe zephyr project uses PostgreSQL 16.\n")
    write(ws / "memory" / "2026-05-01.md", "# May\n\nMet Bob about the zephyr migration.\n")
    return ws


def test_without_qmd_a_one_shot_search_answers_from_the_fallback_and_index_and_status_say_so(tmp_path, cli):
    ws = _ws(tmp_path)
    cfg = _config(tmp_path, str(tmp_path / "no-such-qmd"))
    base = ("--config", str(cfg), "--workspace", str(ws))
    code, out, err = cli(*base, "search", "zephyr", "--json", json_out=True)
    assert code == 0, err
    assert {r["path"] for r in out["results"]} == {"MEMORY.md", "memory/2026-05-01.md"}
    assert out["fallback"]["from"] == "qmd" and "cannot run" in out["fallback"]["reason"]
    assert "cancelled" not in err
    code, text, err = cli(*base, "index")
    assert code == 0, err
    assert "2 files scanned" in text
    assert "not using qmd" in err and "builtin fallback (2 files)" in err
    code, st, _ = cli(*base, "status", "--json", json_out=True)
    assert st["fallback"]["from"] == "qmd" and st["fallbackIndex"]["files"] == 2 and st["ready"] is False


def test_qmd_state_after_index_is_what_a_new_process_reports(tmp_path, cli):
    ws = _ws(tmp_path)
    base = ("--config", str(_config(tmp_path, standin_command())), "--workspace", str(ws))
    code, _, err = cli(*base, "index")
    assert code == 0, err
    code, st, _ = cli(*base, "status", "--json", json_out=True)
    assert st["ready"] is True and st["lastUpdate"] is not None and st["fallback"] is None
    assert all(c["ready"] for c in st["collections"] if c["source"] == "memory" and c["name"].startswith("memory-"))


def test_qmd_commands_do_not_rerun_update_and_embed_each_time_and_say_once_that_embedding_is_off(tmp_path, cli):
    ws = _ws(tmp_path)
    log = tmp_path / "calls.jsonl"
    base = ("--config", str(_config(tmp_path, standin_command(QMD_STANDIN_FAIL="missing-model",
                                                              QMD_STANDIN_LOG=str(log)))),
            "--workspace", str(ws))
    code, _, err1 = cli(*base, "search", "zephyr")
    assert code == 0, err1
    code, _, err2 = cli(*base, "search", "zephyr")
    assert code == 0, err2
    code, st, _ = cli(*base, "status", "--json", json_out=True)
    argv = [json.loads(line)["argv"] for line in log.read_text().splitlines()]
    assert sum(1 for a in argv if a[:1] == ["embed"]) == 1, argv
    assert sum(1 for a in argv if a[:1] == ["update"]) == 1, argv  # nothing changed before the second search
    assert "qmd embed failed" in err1 and "qmd embed failed" not in err2
    assert st["embedding"]["enabled"] is False and st["embedding"]["error"]


def test_extra_paths_are_qmd_collections(tmp_path, cli):
    ws = _ws(tmp_path)
    write(tmp_path / "notes" / "k.md", "# Notes\n\nThe kraken cluster runs on ARM.\n")
    base = ("--config", str(_config(tmp_path, standin_command(), extraPaths=[str(tmp_path / "notes")])),
            "--workspace", str(ws))
    code, out, err = cli(*base, "search", "kraken", "--json", json_out=True)
    assert code == 0, err
    assert out["fallback"] is None
    assert [r["path"] for r in out["results"]] == ["qmd/notes/k.md"]  # qmd's name for a file outside the workspace
    code, text, err = cli(*base, "get", "qmd/notes/k.md")
    assert code == 0 and "kraken cluster" in text, err
