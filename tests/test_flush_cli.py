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


def test_a_context_window_of_0_means_the_configured_one_in_the_cli_and_the_api(tmp_path: Path, cli,
                                                                              workspace: Path) -> None:
    """A runtime that does not know its model's window reports 0: `flush check --context-window 0` was a usage
    error while ``should_flush(..., context_window=0)`` used agents.defaults.contextWindow. Both use it now,
    and both refuse a negative window."""
    import pytest

    from symi_memory.flush import FlushSettings, should_flush

    config = tmp_path / "symi.json"
    config.write_text('{"agents": {"defaults": {"contextWindow": 100000}}}', encoding="utf-8")
    base = ("--config", str(config), "--workspace", str(workspace), "flush", "check", "--session", "s",
            "--tokens", "80000", "--json")
    code, configured, err = cli(*base, json_out=True)
    assert code == 0 and configured["thresholdTokens"] == 76000 and configured["shouldFlush"] is True, err
    code, zero, err = cli(*base, "--context-window", "0", json_out=True)
    assert code == 0 and zero == configured, err
    code, given, err = cli(*base, "--context-window", "200000", json_out=True)
    assert code == 0 and given["thresholdTokens"] == 176000 and given["shouldFlush"] is False, err

    settings = FlushSettings(context_window=100000)
    assert should_flush({"totalTokens": 80000}, settings, context_window=0).to_dict() == configured
    assert should_flush({"totalTokens": 80000}, settings).to_dict() == configured
    with pytest.raises(ValueError, match="context_window must be at least 0"):
        should_flush({"totalTokens": 80000}, settings, context_window=-1)


def test_the_recall_prompt_says_not_to_cite_paths_when_citations_are_off() -> None:
    assert "do not cite" not in tools.recall_prompt("on")
    assert "do not cite memory file paths" in tools.recall_prompt("off")
    assert "do not cite" not in tools.recall_prompt("auto", "agent:main:main")  # a direct chat cites
    assert "do not cite memory file paths" in tools.recall_prompt("auto", "agent:main:telegram:group:42")
    assert tools.recall_prompt("on") == tools.MEMORY_RECALL_PROMPT


def test_a_session_entry_with_counts_another_runtime_wrote_oddly_still_gets_a_decision(tmp_path: Path, cli,
                                                                                       workspace: Path) -> None:
    """sessions.json is shared with the agent runtime: counts it wrote as text, Infinity or junk were a traceback."""
    import json

    from symi_memory.flush import FlushSettings, should_flush
    from symi_memory.session_store import SessionStore

    settings = FlushSettings()
    for entry, expected in (
        ({"totalTokens": 190000, "compactionCount": "2", "memoryFlushCompactionCount": "2"}, False),  # flushed in 2
        ({"totalTokens": 190000, "compactionCount": "3", "memoryFlushCompactionCount": 2}, True),
        ({"totalTokens": 190000, "compactionCount": "x", "memoryFlushCompactionCount": "y"}, True),
        ({"totalTokens": 190000, "compactionCount": float("inf")}, True),
        ({"totalTokens": float("inf"), "compactionCount": 1}, False),  # unknown count: no flush
        ({"totalTokens": "190000", "compactionCount": 1}, True),
        ({"totalTokens": float("nan")}, False),
        ({"totalTokens": 178123.7}, True),  # an estimate
    ):
        assert should_flush(entry, settings).should_flush is expected, entry

    state = tmp_path / "state"
    store = SessionStore.for_agent(state, "main")
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text(json.dumps({"k": {"totalTokens": 190000, "compactionCount": "x",
                                            "memoryFlushCompactionCount": "y"}}), encoding="utf-8")
    base = ("--state-dir", str(state), "--workspace", str(workspace), "flush")
    code, out, err = cli(*base, "check", "--session", "k", "--json", json_out=True)
    assert code == 0 and out["shouldFlush"] is True, err
    code, out, err = cli(*base, "record", "--session", "k", "--json", json_out=True)
    assert code == 0 and out["memoryFlushCompactionCount"] == 0, err
    code, out, err = cli(*base, "check", "--session", "k", "--json", json_out=True)
    assert code == 0 and out["shouldFlush"] is False, err


def test_a_count_written_as_dashed_or_decimal_text_still_gets_a_decision() -> None:
    """'--5' was a ValueError traceback from flush check; '178123.7' as text was 'no token count' while the
    same number unquoted counted."""
    from symi_memory.flush import FlushSettings, should_flush

    settings = FlushSettings()
    assert should_flush({"totalTokens": 190000, "compactionCount": "--5"}, settings).should_flush is True
    assert should_flush({"totalTokens": "--5"}, settings).reason == should_flush({}, settings).reason
    decision = should_flush({"totalTokens": "178123.7"}, settings)
    assert (decision.should_flush, decision.total_tokens) == (True, 178123)
    assert should_flush({"totalTokens": 190000, "compactionCount": "2.0", "memoryFlushCompactionCount": 2},
                        settings).should_flush is False


def test_a_blank_session_key_or_a_negative_count_is_a_usage_error(tmp_path: Path, cli, workspace: Path) -> None:
    # `flush check --session ""` answered (and with --tokens stored an entry under the key ""), and
    # `--tokens -5` was stored as the session's count.
    base = ("--workspace", str(workspace), "flush")
    for args, named in ((("check", "--session", "", "--tokens", "190000"), "--session"),
                        (("check", "--session", "   "), "--session"),
                        (("record", "--session", "\t"), "--session"),
                        (("check", "--session", "s", "--tokens", "-5"), "--tokens"),
                        (("check", "--session", "s", "--compactions", "-1"), "--compactions"),
                        (("check", "--session", "s", "--context-window", "-1"), "--context-window"),
                        (("record", "--session", "s", "--compactions", "two"), "--compactions")):
        code, out, err = cli(*base, *args)
        assert code == 2 and out == "", (args, err)
        assert err.strip().splitlines()[-1].startswith(f"symi-memory flush {args[0]}: error: argument {named}: "), err
    assert not (tmp_path / "state" / "agents" / "main" / "sessions" / "sessions.json").exists(), "nothing was stored"


def test_the_session_store_refuses_a_blank_key_and_a_count_that_is_no_whole_number(tmp_path: Path) -> None:
    import pytest

    from symi_memory.flush import FlushSettings, should_flush
    from symi_memory.session_store import SessionStore

    store = SessionStore(tmp_path / "sessions.json")
    for key in ("", "  \n", None, 5):
        for call in (lambda: store.get(key), lambda: store.update(key, {"totalTokens": 1}),  # noqa: B023
                     lambda: store.record_flush(key)):  # noqa: B023
            with pytest.raises(ValueError, match="session key must be a non-empty string"):
                call()
    for bad in ("2", -1, 2.5, True, float("nan")):
        with pytest.raises(ValueError, match="compaction_count must be"):
            store.record_flush("s", compaction_count=bad)
    with pytest.raises(ValueError, match="context_window must be a whole number"):
        should_flush({"totalTokens": 190000}, FlushSettings(), context_window="200000")  # type: ignore[arg-type]
    assert not store.path.exists()
