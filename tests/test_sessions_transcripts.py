from __future__ import annotations

import json
from pathlib import Path

import pytest

from symi_memory.redact import redact
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


def test_redaction_looking_for_what_each_pattern_needs_first_redacts_as_every_pattern_would() -> None:
    """``redact`` skips a pattern when the text lacks what it cannot match without (stop 34: 20x faster on prose);
    over text full of near-misses, in any case and with the letters case folds oddly (``ſ`` is an ``s``, ``K`` a
    ``k``, ``İ`` an ``i`` to the case-blind patterns), it gives what running every pattern gives."""
    import random

    from symi_memory.redact import _PATTERNS, redact

    def every_pattern(text: str) -> str:
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        return text

    pieces = ["sk-", "proj-", "AKIA", "ASIA", "ghp_", "gho_", "github_pat_", "xoxb-", "AIza", "eyJ", "Bearer",
              "bEaReR", "Authorization: Basic", "api_key", "ApiKey", "API-KEY", "secret", "SECRET", "ſecret", "toKen",
              "passwd", "PassWord", "pwd", "access_key", "accessKey", "https://", "user:", "@host", "=", ":", " ",
              '"', "'", "abcdefgh", "ABCDEFGHIJKLMNOP", "0123456789", ".", "/", "_", "-", "ı", "İ", "K", "é", "\t",
              # (review rev16) folds inside a needle, and letters whose case maps are odd: none may open a gate
              "api\u212aey", "paſſword", "ſk-", "\u212aey", "ẞ", "ß", "Ω", "ς", "Σ", "ǅ", "中文", "\u2028", "\n"]
    rng = random.Random(34)
    differing = []
    for _ in range(6000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 14)))
        if rng.random() < 0.3:
            text = "".join(c.swapcase() if rng.random() < 0.4 else c for c in text)
        if redact(text) != every_pattern(text):
            differing.append(text)
    assert differing == []
    assert redact("ſecret=abcdefghijk") == "ſecret=[REDACTED]"
