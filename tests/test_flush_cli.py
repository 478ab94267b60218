"""`flush check` / `flush record` from the CLI, and the recall prompt with citations off (issue 14)."""

from __future__ import annotations

from pathlib import Path

from symi_memory import tools


def test_check_record_check_in_one_compaction_cycle_flushes_once(tmp_path: Path, cli, workspace: Path) -> None:
    check = ("--workspace", str(workspace), "flush", "check", "--session", "agent:main:main", "--tokens", "190000",
             "--compactions", "2", "--json")
    code, first, err = cli(*check, json_out=True)
    assert code == 0 and first["shouldFlush"] is True, err
    code, recorded, err = cli("--workspace", str(workspace), "flush", "record", "--session", "agent:main:main",
                              "--json", json_out=True)
    assert code == 0 and recorded["memoryFlushCompactionCount"] == 2, err
    code, again, _ = cli(*check, json_out=True)
    assert again["shouldFlush"] is False and again["reason"] == "already flushed this compaction cycle"
    code, next_cycle, _ = cli(*check[:-2], "3", "--json", json_out=True)
    assert next_cycle["shouldFlush"] is True


def test_check_takes_the_sandbox_workspace_access(tmp_path: Path, cli, workspace: Path) -> None:
    base = ("--workspace", str(workspace), "flush", "check", "--session", "s", "--tokens", "190000", "--json")
    for access, expected in (("rw", True), ("ro", False), ("none", False)):
        code, out, err = cli(*base, "--workspace-access", access, json_out=True)
        assert code == 0, err
        assert out["shouldFlush"] is expected
        if not expected:
            assert out["reason"] == "workspace not writable"
    code, _, err = cli(*base, "--workspace-access", "maybe")
    assert code == 2 and "invalid choice" in err


def test_the_recall_prompt_says_not_to_cite_paths_when_citations_are_off() -> None:
    assert "do not cite" not in tools.recall_prompt("on")
    assert "do not cite memory file paths" in tools.recall_prompt("off")
    assert "do not cite" not in tools.recall_prompt("auto", "agent:main:main")  # a direct chat cites
    assert "do not cite memory file paths" in tools.recall_prompt("auto", "agent:main:telegram:group:42")
    assert tools.recall_prompt("on") == tools.MEMORY_RECALL_PROMPT
