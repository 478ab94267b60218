from __future__ import annotations

import json
from pathlib import Path

import pytest
from symi_memory.redact import redact
from symi_memory.session_delta import SessionDeltaTracker
from symi_memory.sessions import (
    extract_message_text,
    list_session_files,
    parse_session_file,
    sessions_dir,
)

SENTINEL = "sk-test-SENTINEL1234567890abcdef"


def _msg(role: str, content) -> str:
    return json.dumps({"type": "message", "message": {"role": role, "content": content}})


def _write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_parse_transcript_with_line_map(tmp_path: Path) -> None:
    d = sessions_dir(tmp_path, "main")
    assert d == tmp_path / "agents" / "main" / "sessions"
    f = _write(
        d / "abc.jsonl",
        [
            json.dumps({"type": "session", "id": "abc"}),  # 1: not a message
            _msg("user", "Which   database\n did we pick?"),  # 2
            "",  # 3: blank
            "{not json",  # 4: invalid
            _msg("system", "You are helpful."),  # 5: wrong role
            _msg(
                "assistant",
                [
                    {"type": "text", "text": "Postgres,"},
                    {"type": "tool_use", "name": "x"},
                    {"type": "text", "text": " for JSONB."},
                ],
            ),  # 6
            _msg("tool", "42"),  # 7
            _msg("user", [{"type": "image", "data": "..."}]),  # 8: no text parts
            _msg("user", "thanks"),  # 9
        ],
    )
    doc = parse_session_file(f)
    assert doc.path == "sessions/abc.jsonl"
    assert doc.text.split("\n") == [
        "User: Which database did we pick?",
        "Assistant: Postgres, for JSONB.",
        "User: thanks",
    ]
    assert doc.line_map == (2, 6, 9)
    assert doc.jsonl_lines(2, 3) == (6, 9)
    assert doc.size == f.stat().st_size and doc.newlines == 9
    assert doc.to_dict()["lineMap"] == [2, 6, 9]


def test_sentinel_secret_never_survives(tmp_path: Path) -> None:
    f = _write(
        tmp_path / "s" / "leak.jsonl",
        [
            _msg("user", f"my key is {SENTINEL} please keep it"),
            _msg("assistant", [{"type": "text", "text": f"export OPENAI_API_KEY={SENTINEL}"}]),
            _msg(
                "user", f"curl -H 'Authorization: Bearer {SENTINEL}' https://admin:{SENTINEL}@example.com/x"
            ),
        ],
    )
    doc = parse_session_file(f)
    assert "SENTINEL" not in doc.text
    assert "SENTINEL" not in json.dumps(doc.to_dict())
    assert doc.text.count("[REDACTED]") >= 4
    assert "please keep it" in doc.text  # the rest of the message survives
    assert len(doc.line_map) == 3


@pytest.mark.parametrize(
    "secret",
    [
        "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx",
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "xoxb-1234567890-abcdefghij",
        "AIzaSyA1234567890abcdefghijklmnopqrstu",
    ],
)
def test_known_key_shapes_are_redacted(secret: str) -> None:
    assert redact(f"value: {secret}.") == "value: [REDACTED]."


def test_redaction_keeps_ordinary_text() -> None:
    for text in [
        "the bearer instrument was signed",
        "a basic understanding of tokens: 4000 max",
        '"totalTokens": 176000',
        "see https://example.com/a:b@c and ask-me-anything",
    ]:
        assert redact(text) == text
    assert redact("password=correcthorsebattery") == "password=[REDACTED]"
    assert redact("postgres://bob:hunter2@db:5432/app") == "postgres://bob:[REDACTED]@db:5432/app"


def test_extract_message_text_shapes() -> None:
    assert extract_message_text("  a \t b\n\nc ") == "a b c"
    assert extract_message_text([{"type": "text", "text": "x"}, "y", {"type": "text"}]) == "x"
    assert extract_message_text(None) == ""
    assert extract_message_text({"text": "no"}) == ""


def test_list_session_files_skips_symlinks_and_others(tmp_path: Path) -> None:
    d = tmp_path / "sessions"
    _write(d / "b.jsonl", [_msg("user", "b")])
    _write(d / "a.jsonl", [_msg("user", "a")])
    (d / "notes.txt").write_text("x")
    (d / "link.jsonl").symlink_to(d / "a.jsonl")
    assert [p.name for p in list_session_files(d)] == ["a.jsonl", "b.jsonl"]
    assert list_session_files(tmp_path / "missing") == []


def _append(path: Path, lines: list[str]) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def test_delta_tracker_thresholds_and_persistence(tmp_path: Path) -> None:
    d = tmp_path / "sessions"
    f = _write(d / "s.jsonl", [_msg("user", "hello")])
    state = tmp_path / "index.sqlite.sessions.json"
    tracker = SessionDeltaTracker(delta_bytes=2000, delta_messages=5, state_path=state)
    assert tracker.due([f]) == []  # one small line from nothing crosses no threshold

    tracker.mark_indexed(f, parse_session_file(f))
    tracker.save()
    _append(f, [_msg("user", f"msg {i}") for i in range(4)])
    assert tracker.due([f]) == []
    _append(f, [_msg("assistant", "fifth")])
    (delta,) = tracker.due([f])
    assert (delta.reason, delta.messages_added) == ("messages", 5)

    # A fresh tracker reads the saved baseline: the growth is still pending.
    reloaded = SessionDeltaTracker(delta_bytes=2000, delta_messages=5, state_path=state)
    assert [x.reason for x in reloaded.due([f])] == ["messages"]
    reloaded.mark_indexed(f, parse_session_file(f))
    assert reloaded.due([f]) == []

    _append(f, [_msg("user", "x" * 2500)])
    (big,) = reloaded.due([f])
    assert big.reason == "bytes" and big.bytes_added > 2500 and big.to_dict()["messagesAdded"] == 1


def test_delta_tracker_truncation_rewrite_and_deletion(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.jsonl", [_msg("user", f"line {i}") for i in range(10)])
    g = _write(tmp_path / "t.jsonl", [_msg("user", "keep")])
    tracker = SessionDeltaTracker(delta_bytes=10**9, delta_messages=10**9)
    tracker.mark_indexed(f, parse_session_file(f))
    tracker.mark_indexed(g, parse_session_file(g))

    _write(f, [_msg("user", "short")])
    assert [x.reason for x in tracker.due([f, g])] == ["truncated"]

    tracker.mark_indexed(f, parse_session_file(f))
    _write(
        f, [_msg("user", "SHORT")] + [_msg("user", f"more {i}") for i in range(3)]
    )  # same start length, new bytes
    assert [x.reason for x in tracker.due([f, g])] == ["rewritten"]

    g.unlink()
    assert [(Path(x.path).name, x.reason) for x in tracker.due([f])] == [
        ("s.jsonl", "rewritten"),
        ("t.jsonl", "deleted"),
    ]
    tracker.mark_indexed(g, None)
    assert all(x.reason != "deleted" for x in tracker.due([f]))


def test_corrupt_delta_state_starts_fresh(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text("{nope")
    f = _write(tmp_path / "s.jsonl", [_msg("user", "x")])
    tracker = SessionDeltaTracker(delta_bytes=1, delta_messages=1, state_path=state)
    assert [x.reason for x in tracker.due([f])] == ["bytes"]
