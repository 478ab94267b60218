"""Chunking exactly as spec/behaviour.md §3 pins it down."""

from __future__ import annotations

from symi_memory.chunking import chunk_text, split_utf8


def ranges(text: str, tokens: int = 400, overlap: int = 80) -> list[tuple[int, int]]:
    return [(c.start_line, c.end_line) for c in chunk_text(text, tokens, overlap)]


def test_worked_examples() -> None:
    assert ranges("\n".join(["x" * 99] * 40)) == [(1, 16), (13, 28), (25, 40)]
    assert ranges("\n".join(["x" * 100] * 40)) == [(1, 15), (12, 26), (23, 37), (34, 40)]


def test_overlong_line_becomes_pieces_on_one_line() -> None:
    chunks = chunk_text("a" * 4825, 400, 0)
    assert [len(c.text) for c in chunks] == [1600, 1600, 1600, 25]
    assert {(c.start_line, c.end_line) for c in chunks} == {(1, 1)}


def test_whitespace_only_chunks_are_dropped_and_lines_are_one_based() -> None:
    assert chunk_text("   \n\n  \n") == []
    chunks = chunk_text("\n\nhello\n")
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 4)]


def test_non_bmp_characters_are_never_split() -> None:
    text = "😀" * 2000
    chunks = chunk_text(text, 400, 0)
    assert "".join(c.text for c in chunks) == text
    assert all(c.text.encode("utf-8").decode("utf-8") == c.text for c in chunks)


def test_overlap_is_clamped_below_tokens() -> None:
    assert ranges("\n".join(["y" * 10] * 30), tokens=8, overlap=500) == ranges("\n".join(["y" * 10] * 30), 8, 7)


def test_split_utf8_never_breaks_a_character() -> None:
    text = "é" * 10 + "金" * 10 + "😀" * 3
    parts = split_utf8(text, 7)
    assert "".join(parts) == text
    assert all(len(p.encode("utf-8")) <= 7 for p in parts)
    assert split_utf8("short", 100) == ["short"]
