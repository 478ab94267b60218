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


def test_a_chunker_taken_up_from_its_stored_state_chunks_as_one_run() -> None:
    """(review rev16) The indexer stores a transcript's ``Chunker`` state as JSON and takes it up at the next sync:
    stopped and re-made anywhere (after any line, through a JSON round trip), it gives ``chunk_text``'s chunks —
    lines longer than a chunk, CJK and astral characters, blank lines, overlap 0 and overlap clamped."""
    import json
    import random

    from symi_memory.chunking import Chunker

    rng = random.Random(16)
    alphabet = ["a", "b ", "記憶", "😀", " ", "x" * 50, "y" * 400, ""]
    for trial in range(300):
        tokens, overlap = rng.choice([(8, 2), (8, 0), (16, 40), (400, 80), (10, 9)])
        lines = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(rng.randint(1, 40))]
        expected = chunk_text("\n".join(lines), tokens, overlap)
        got = []
        chunker = Chunker.start(tokens, overlap)
        for n, line in enumerate(lines, start=1):
            got += chunker.feed(line, n)
            if rng.random() < 0.3:  # stored and taken up, as between two syncs
                state = json.loads(json.dumps({"current": chunker.current, "cost": chunker.cost}))
                chunker = Chunker.start(tokens, overlap, [(p, int(i)) for p, i in state["current"]], state["cost"])
        last = chunker.last()
        got += [last] if last is not None else []
        assert got == expected, (trial, tokens, overlap)
