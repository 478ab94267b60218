"""Session transcripts in builtin-sqlite: JSONL lines, secrets, delta thresholds, agent scope (issue 3, item 11)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.sqlite_memory import add_filler, open_mem, wait_for, write

from symi_memory.types import SearchQuery

KEY = "sk-test-SENTINEL1234567890abcdef"
STATEMENT = "The staging database password rotation happens on Thursdays through the vault job."
SESSION_MS = {"experimental": {"sessionMemory": True}, "sources": ["memory", "sessions"],
              "sync": {"sessions": {"deltaBytes": 100_000, "deltaMessages": 6}}}


def msg(role: str, content: object) -> str:
    return json.dumps({"type": "message", "message": {"role": role, "content": content}})


def transcript() -> tuple[list[str], int]:
    """JSONL lines (with tool records and junk) and the 1-based line of STATEMENT."""
    lines = [json.dumps({"type": "session", "id": "x", "cwd": "/tmp"})]
    for n in range(60):
        lines.append(msg("user", f"question {n}: what about the garden hose and the weekend plans?"))
        lines.append(json.dumps({"type": "tool_use", "name": "bash", "input": {"cmd": f"ls /garden/{n}"}}))
        lines.append(msg("tool", f"tool output {n}: lavender lavender lavender"))
        if n % 7 == 0:
            lines.append("this is not json {")
            lines.append("")
        lines.append(msg("assistant", [{"type": "text", "text": f"answer {n}: the hose is in the shed,"},
                                       {"type": "image", "data": "AAAA"}, {"type": "text", "text": "as usual."}]))
        if n == 30:
            lines.append(msg("user", f"my key is {KEY} keep it safe"))
            lines.append(msg("assistant", STATEMENT))
    return lines, lines.index(msg("assistant", STATEMENT)) + 1


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path, int]:
    ws = tmp_path / "ws"
    add_filler(ws, 10)
    write(ws, "MEMORY.md", "# Memory\n\n- Keep the hose in the shed.\n")
    lines, where = transcript()
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    write(sessions, "x.jsonl", "\n".join(lines) + "\n")
    write(tmp_path / "state" / "agents" / "other" / "sessions", "y.jsonl",
          msg("assistant", "The other agent knows the quince jam recipe.") + "\n")
    return ws, sessions / "x.jsonl", where


def test_transcript_hit_names_its_jsonl_line(tmp_path: Path, setup: tuple[Path, Path, int]) -> None:
    ws, path, where = setup
    with open_mem(tmp_path, ws, SESSION_MS) as mem:
        mem.sync()
        assert mem.status()["sourceCounts"]["sessions"]["files"] == 1
        res = mem.search("staging database password rotation Thursdays")
        top = res.results[0]
        assert (top.source, top.path) == ("sessions", "sessions/x.jsonl")
        jsonl = path.read_text().split("\n")
        assert top.start_line <= where <= top.end_line <= len(jsonl)
        assert top.end_line - top.start_line < len(jsonl) / 2, "a window of the transcript, not all of it"
        # The hit's JSONL lines really hold the statement, and its first line is a message record.
        assert STATEMENT in "\n".join(jsonl[top.start_line - 1 : top.end_line])
        assert json.loads(jsonl[top.start_line - 1])["type"] == "message"
        # The indexed text (snippets are cut at 700 characters) reads "Assistant: ...".
        raw = mem.backend.search(SearchQuery(text="staging database password rotation Thursdays", max_results=6,
                                             min_score=0.0, candidate_limit=24, sources=("sessions",)))
        text = raw.candidates[0].text
        assert (raw.candidates[0].start_line, raw.candidates[0].end_line) == (top.start_line, top.end_line)
        assert "Assistant: " + STATEMENT in text.split("\n")
        assert "Assistant: answer 30: the hose is in the shed, as usual." in text.split("\n")
        # Tool records, image parts and junk never become text.
        assert not any(h.source == "sessions" for h in mem.search("lavender").results)
        assert "AAAA" not in text and "not json" not in text and "/garden/" not in text


def test_secret_never_reaches_results_or_the_database_file(tmp_path: Path, setup: tuple[Path, Path, int]) -> None:
    ws, _, _ = setup
    with open_mem(tmp_path, ws, SESSION_MS) as mem:
        mem.sync()
        for q in (KEY, "SENTINEL1234567890abcdef", "my key is keep it safe"):
            for h in mem.search(q, min_score=0.0, max_results=20).results:
                assert "SENTINEL" not in h.snippet.upper()
        raw = mem.backend.search(SearchQuery(text="my key is keep it safe", max_results=20, min_score=0.0,
                                             candidate_limit=80, sources=("sessions",)))
        assert raw.candidates and all("SENTINEL" not in c.text.upper() for c in raw.candidates)
        db = Path(mem.status()["dbPath"])
    blobs = b"".join(p.read_bytes() for p in db.parent.iterdir() if p.name.startswith(db.name))
    assert blobs, "the index files exist"
    assert b"sentinel1234567890" not in blobs.lower()
    assert b"sk-test" not in blobs.lower()


def test_sessions_are_off_without_the_experimental_flag(tmp_path: Path, setup: tuple[Path, Path, int]) -> None:
    ws, _, _ = setup
    with open_mem(tmp_path, ws, {"sources": ["memory", "sessions"]}) as mem:
        mem.sync()
        assert "sessions" not in mem.status()["sourceCounts"]
        assert all(h.source == "memory" for h in mem.search("staging database password rotation").results)


def test_appends_reindex_only_past_the_delta_thresholds(tmp_path: Path, setup: tuple[Path, Path, int]) -> None:
    ws, path, _ = setup
    with open_mem(tmp_path, ws, SESSION_MS) as mem:
        mem.sync()
        with path.open("a") as fh:
            fh.write(msg("user", "where did we put the kayak paddles?") + "\n")
            fh.write(msg("assistant", "The kayak paddles hang in the garage loft.") + "\n")
        # The thresholds pace background syncs (the watcher's); an explicit sync takes every line.
        report = mem.sync(reason="watch")
        assert report.files_indexed == 0, "2 new lines are under deltaMessages=6"
        assert not any(h.source == "sessions" for h in mem.search("kayak paddles garage loft").results)
        assert mem.status()["dirty"] is True, "lines not indexed yet: status must not say clean"
        with path.open("a") as fh:
            for n in range(4):
                fh.write(msg("user", f"filler question {n} about tides") + "\n")
        report = mem.sync(reason="watch")
        assert report.files_indexed == 1
        hits = [h for h in mem.search("kayak paddles garage loft").results if h.source == "sessions"]
        assert hits and "kayak paddles" in hits[0].snippet


def test_byte_delta_threshold(tmp_path: Path, setup: tuple[Path, Path, int]) -> None:
    ws, path, _ = setup
    ms = {**SESSION_MS, "sync": {"sessions": {"deltaBytes": 2_000, "deltaMessages": 1_000}}}
    with open_mem(tmp_path, ws, ms) as mem:
        mem.sync()
        with path.open("a") as fh:
            fh.write(msg("assistant", "The spare fuse is taped inside the breaker box.") + "\n")
        assert mem.sync(reason="watch").files_indexed == 0
        with path.open("a") as fh:
            fh.write(msg("user", "long " * 500) + "\n")
        assert mem.sync(reason="watch").files_indexed == 1
        assert any(h.source == "sessions" for h in mem.search("spare fuse breaker box").results)


def test_rewritten_transcript_is_reindexed_at_once(tmp_path: Path, setup: tuple[Path, Path, int]) -> None:
    ws, path, _ = setup
    with open_mem(tmp_path, ws, SESSION_MS) as mem:
        mem.sync()
        path.write_text(msg("assistant", "Compacted: the boiler service is booked for May.") + "\n")
        assert mem.sync().files_indexed == 1
        assert any(h.source == "sessions" for h in mem.search("boiler service booked").results)
        assert not any(h.source == "sessions" for h in mem.search("staging database password rotation").results)


def test_other_agents_sessions_are_never_visible(tmp_path: Path, setup: tuple[Path, Path, int]) -> None:
    ws, _, _ = setup
    with open_mem(tmp_path, ws, SESSION_MS) as mem:
        mem.sync()
        assert mem.status()["sourceCounts"]["sessions"]["files"] == 1
        assert all("quince" not in h.snippet for h in mem.search("quince jam recipe", min_score=0.0).results)
        raw = mem.backend.search(SearchQuery(text="quince jam recipe", max_results=6, min_score=0.0,
                                             candidate_limit=200, sources=("memory", "sessions")))
        assert all("quince" not in c.text for c in raw.candidates)
    with open_mem(tmp_path, ws, SESSION_MS, agent_id="other") as other:
        other.sync()
        hits = other.search("quince jam recipe").results
        assert hits and hits[0].source == "sessions" and hits[0].path == "sessions/y.jsonl"
        assert not any("password rotation" in h.snippet for h in other.search("staging database password").results)


def test_one_appended_line_is_dirty_and_indexed_by_an_explicit_sync(tmp_path: Path,
                                                                    setup: tuple[Path, Path, int]) -> None:
    ws, path, _ = setup
    with open_mem(tmp_path, ws, SESSION_MS) as mem:
        mem.sync()
        assert mem.status()["dirty"] is False
        with path.open("a") as fh:
            fh.write(msg("assistant", "The canoe trailer key is under the blue flowerpot.") + "\n")
        assert mem.status()["dirty"] is True
        assert mem.sync(reason="cli").files_indexed == 1
        last = path.read_bytes().count(b"\n")
        hits = [h for h in mem.search("canoe trailer key flowerpot").results if h.source == "sessions"]
        assert any(h.end_line == last for h in hits)
        assert mem.status()["dirty"] is False


def test_the_background_check_indexes_a_transcript_that_grew_past_the_thresholds(tmp_path: Path,
                                                                                 setup: tuple[Path, Path, int]) -> None:
    # No watcher: only the staleness check on search can notice the new lines (the lost-event case).
    ws, path, _ = setup
    ms = {**SESSION_MS, "sync": {"watch": False, "onSessionStart": False,
                                 "sessions": {"deltaBytes": 100_000, "deltaMessages": 50}}}
    with open_mem(tmp_path, ws, ms, start=True) as mem:
        mem.sync()
        with path.open("a") as fh:
            for n in range(55):
                fh.write(msg("assistant", f"Line {n}: the sailboat mooring fee is paid in March.") + "\n")

        def found() -> bool:
            last = path.read_bytes().count(b"\n")
            return any(h.source == "sessions" and h.end_line == last
                       for h in mem.search("sailboat mooring fee").results)

        wait_for(found, timeout=15)


def test_lines_appended_right_after_open_are_indexed(tmp_path: Path, setup: tuple[Path, Path, int]) -> None:
    ws, path, _ = setup
    ms = {**SESSION_MS, "sync": {"sessions": {"deltaBytes": 100_000, "deltaMessages": 50}}}
    with open_mem(tmp_path, ws, ms, start=True) as mem:
        mem.search("hose")  # the session-start sync runs while the lines arrive
        with path.open("a") as fh:
            for n in range(55):
                fh.write(msg("assistant", f"Line {n}: the glider winch is stored at hangar {n}.") + "\n")
                fh.flush()
        last = path.read_bytes().count(b"\n")

        def indexed() -> bool:
            return any(h.source == "sessions" and h.end_line == last
                       for h in mem.search("glider winch hangar").results)

        wait_for(indexed, timeout=15)
        wait_for(lambda: mem.status()["dirty"] is False, timeout=15)
