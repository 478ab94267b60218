from __future__ import annotations

import pytest

from symi_memory.citations import (
    apply_citation,
    chat_type_from_session_key,
    format_citation,
    should_cite,
)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (None, "direct"),
        ("", "direct"),
        ("main", "direct"),
        ("discord:dm:1234", "direct"),
        ("agent:main:discord:dm:1234", "direct"),
        ("discord:group:42", "group"),
        ("agent:main:telegram:group:42", "group"),
        ("slack:channel:C01", "channel"),
        ("agent:ops:slack:group:channel:C01", "channel"),  # channel outranks group
        ("AGENT:Main:Discord:GROUP:7", "group"),
        # The agent id itself never decides the type.
        ("agent:group:discord:dm:1", "direct"),
    ],
)
def test_chat_type_from_session_key(key: str | None, expected: str) -> None:
    assert chat_type_from_session_key(key) == expected


def test_on_always_cites_with_range() -> None:
    assert should_cite("on", "discord:group:1") is True
    snippet = apply_citation("  We picked Postgres.\n", format_citation("MEMORY.md", 5, 7))
    assert snippet == "We picked Postgres.\n\nSource: MEMORY.md#L5-L7"


def test_auto_cites_direct_only() -> None:
    assert should_cite("auto", "discord:dm:99") is True
    assert should_cite("auto", "discord:group:99") is False
    assert should_cite("auto", "agent:main:slack:channel:C1") is False
    assert should_cite("auto", None) is True
    assert should_cite(None, "discord:group:99") is False  # default is auto


def test_off_never_cites() -> None:
    assert should_cite("off", None) is False
    assert should_cite("OFF", "discord:dm:1") is False


def test_unknown_mode_names_allowed_values() -> None:
    with pytest.raises(ValueError, match=r"memory.citations: 'sometimes'.*auto, on, off"):
        should_cite("sometimes", None)


def test_single_line_citation() -> None:
    assert format_citation("memory/2026-02-16.md", 5, 5) == "memory/2026-02-16.md#L5"
    assert format_citation("sessions/a.jsonl", 3) == "sessions/a.jsonl#L3"
