"""Arguments of the wrong kind get one clear error from every entry point: the tools' error shape, a ValueError
from the manager's methods, a usage error from the CLI; never a TypeError from inside a search."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from support.sqlite_memory import open_mem, write

from symi_memory import tools

NOTES = "# Home\n\n- The router is a FRITZ!Box 7530 in the hall cupboard.\n- The NAS is a Synology DS920.\n"
NOT_WHOLE = ["5", True, 2.5, math.nan, math.inf, -math.inf, [5], {"n": 5}]
NOT_A_SCORE = ["0.5", True, math.nan, [0.5], {"x": 1}]


@pytest.fixture
def mem(tmp_path: Path) -> Any:
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", NOTES)
    with open_mem(tmp_path, ws) as m:
        m.sync()
        yield m


def test_history_refuses_a_count_or_score_of_the_wrong_kind_as_search_does(mem: Any) -> None:
    # history(max_results="5") raised "TypeError: '<' not supported between instances of 'str' and 'int'",
    # 2.5 and NaN "slice indices must be integers", -inf an SQLite datatype mismatch, and [5] a TypeError.
    for bad in NOT_WHOLE:
        message = f"maxResults must be a whole number, got {bad!r}"
        for call in (mem.history, mem.search, mem.explain):
            with pytest.raises(ValueError) as err:
                call("router", max_results=bad)
            assert str(err.value) == message, (call.__name__, bad)
        assert tools.memory_search(mem, {"query": "router", "maxResults": bad}) == {
            "results": [], "disabled": True, "error": message}
    for bad in (0, -1):
        with pytest.raises(ValueError, match=f"maxResults must be at least 1, got {bad}"):
            mem.history("router", max_results=bad)
    for bad in NOT_A_SCORE:
        message = f"minScore must be a number from 0 to 1, got {bad!r}"
        for call in (mem.history, mem.search):
            with pytest.raises(ValueError) as err:
                call("router", min_score=bad)
            assert str(err.value) == message, (call.__name__, bad)
        assert tools.memory_search(mem, {"query": "router", "minScore": bad})["error"] == message


def test_counts_that_are_whole_numbers_in_another_form_answer_as_the_plain_ones(mem: Any) -> None:
    plain = mem.history("router", max_results=5)
    assert plain and "FRITZ!Box" in plain[-1]["text"]
    assert mem.history("router", max_results=5.0) == plain  # JSON's 5.0
    # A huge count is the most a search returns (200), as the config's maxResults is clamped.
    assert mem.history("router", max_results=10**30) == mem.history("router", max_results=200)
    assert mem.search("router", max_results=10**30, min_score=0) == mem.search("router", max_results=200, min_score=0)
    # A score above 1 is 1 (nothing scores above it), as the config's minScore is clamped.
    assert mem.history("router", min_score=math.inf) == mem.history("router", min_score=1) == []
    assert mem.read_file("MEMORY.md", from_line=3.0, lines=1.0) == mem.read_file("MEMORY.md", from_line=3, lines=1)
    for bad in NOT_WHOLE:
        with pytest.raises(ValueError, match="from must be a whole number"):
            mem.read_file("MEMORY.md", from_line=bad)


def test_memory_append_refuses_a_falsy_target_instead_of_writing_the_daily_log(mem: Any) -> None:
    # target 0, "" or false was taken for "daily" (the tool read `target or "daily"`).
    ws = Path(mem.agent.workspace)
    before = {p: p.read_bytes() for p in ws.rglob("*.md")}
    for bad in (0, "", False, []):
        out = tools.memory_append(mem, {"text": "- The printer is a Brother HL-L2350.", "target": bad})
        assert out == {"path": "", "bytesWritten": 0, "error": f"target must be 'daily' or 'long-term', got {bad!r}"}
    assert {p: p.read_bytes() for p in ws.rglob("*.md")} == before, "nothing was written"
    for text, allow, message in ((5, False, "text must be a string, got 5"),
                                 ("- note", "yes", "allow_duplicate must be True or False, got 'yes'"),
                                 ("\ud800", False, "text must be valid Unicode: a lone surrogate at character 0")):
        with pytest.raises(ValueError) as err:
            mem.append(text, allow_duplicate=allow)
        assert str(err.value) == message


def test_the_cli_refuses_a_min_score_that_is_not_a_number(tmp_path: Path, cli, workspace: Path) -> None:
    for command in ("search", "history"):
        code, out, err = cli("--workspace", str(workspace), command, "tea", "--min-score", "nan")
        assert code == 2 and out == "", err
        assert err.strip().splitlines()[-1] == (f"symi-memory {command}: error: argument --min-score: 'nan' is not a "
                                                f"number; use one from 0 to 1")


def test_numpy_counts_and_scores_answer_as_the_plain_ones(mem: Any) -> None:
    # search(max_results=np.int64(3)) and search(min_score=np.float32(...)) answered before the checks came, then
    # raised "maxResults must be a whole number, got np.int64(3)" (an integrator's k from numpy is one).
    import numpy as np

    assert mem.search("router", max_results=np.int64(3), min_score=np.float32(0.25)) == mem.search(
        "router", max_results=3, min_score=0.25)
    assert mem.history("router", max_results=np.int32(5), min_score=np.float32(0.25)) == mem.history(
        "router", max_results=5, min_score=0.25)
    assert mem.read_file("MEMORY.md", from_line=np.int64(3), lines=np.int64(1)) == mem.read_file(
        "MEMORY.md", from_line=3, lines=1)
    for bad in (np.float32(2.5), np.float64(math.nan), np.bool_(True)):
        with pytest.raises(ValueError, match="maxResults must be a whole number"):
            mem.search("router", max_results=bad)


def test_a_score_too_large_for_a_float_is_1_not_an_overflow(mem: Any) -> None:
    # JSON reads 1 followed by 400 zeros as an int; float() of it raised OverflowError: the HTTP API's history and
    # explain answered 500, the tool "memory search failed: int too large to convert to float".
    huge = 10**400
    assert mem.history("router", min_score=huge) == mem.history("router", min_score=1) == []
    assert mem.search("router", min_score=huge) == mem.search("router", min_score=1)
    assert mem.search("router", min_score=-huge) == mem.search("router", min_score=0)
    out = tools.memory_search(mem, {"query": "router", "minScore": huge})
    assert "error" not in out and out["results"] == []


@pytest.mark.parametrize("provider", ["default", "none", "local"])
def test_a_query_with_a_lone_surrogate_is_refused_by_name_not_failed_inside(tmp_path: Path, provider: str) -> None:
    """JSON may carry a lone surrogate (``"\\udc80"``), which no tokenizer or UTF-8 store takes: the HTTP API's
    search answered "memory search failed: TextEncodeInput must be ..." (a traceback in the server's log), its
    explain and history 500 Internal Server Error."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", NOTES)
    if provider == "local":
        from support.sqlite_memory import open_local

        opened = open_local(tmp_path, ws)
    else:
        opened = open_mem(tmp_path, ws, None if provider == "default" else {"provider": provider})
    with opened as m:
        m.sync()
        query = "router \udc80 cupboard"
        for call in (m.search, m.explain, m.history):
            with pytest.raises(ValueError, match=r"query must be valid Unicode: a lone surrogate at character 7"):
                call(query)
        out = tools.memory_search(m, {"query": query})
        assert out["results"] == [] and out["disabled"] is True
        assert out["error"].startswith("query must be valid Unicode: a lone surrogate at character 7"), out
        assert tools.memory_search(m, {"query": "router cupboard"})["results"]


def test_the_mcp_wire_names_a_number_too_long_to_read_without_python_s_advice() -> None:
    """A JSON number of 5,000 digits was answered "Exceeds the limit (4300 digits) for integer string conversion
    ...; use sys.set_int_max_str_digits() to increase the limit": advice for the server's Python, not its client."""
    pytest.importorskip("mcp_types")
    from symi_memory.mcp_server import _refusal

    raw = (b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "memory_get", '
           b'"arguments": {"path": "MEMORY.md", "from": ' + b"9" * 5000 + b"}}}")
    ident, code, message = _refusal(raw, None)
    assert code == -32700 and "set_int_max_str_digits" not in message
    assert message == "Parse error: a number in the request has more than 4300 digits", message
