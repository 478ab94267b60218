"""Line-aware chunking (spec/behaviour.md §3).

4 characters per token; a line longer than the chunk becomes several pieces
that share its line number; the next chunk starts with the fewest trailing
pieces whose cost reaches the overlap budget.
"""

from __future__ import annotations

import attrs

__all__ = ["Chunk", "chunk_text", "split_utf8"]

CHARS_PER_TOKEN = 4


@attrs.frozen
class Chunk:
    """Chunk text with its 1-based inclusive line range."""

    start_line: int
    end_line: int
    text: str
    #: The line number of each line of ``text`` (a long line's pieces share one).
    lines: tuple[int, ...] = ()


def chunk_text(text: str, tokens: int = 400, overlap: int = 80) -> list[Chunk]:
    """Split ``text`` into overlapping chunks of at most ``4*tokens`` characters."""
    max_chars = max(32, CHARS_PER_TOKEN * tokens)
    overlap = max(0, min(overlap, tokens - 1))
    budget = CHARS_PER_TOKEN * overlap
    chunks: list[Chunk] = []
    current: list[tuple[str, int]] = []
    cost = 0

    def close() -> None:
        body = "\n".join(p for p, _ in current)
        if body.strip():
            chunks.append(Chunk(current[0][1], current[-1][1], body, tuple(n for _, n in current)))

    for lineno, line in enumerate(text.split("\n"), start=1):
        pieces = [line[i : i + max_chars] for i in range(0, len(line), max_chars)] or [""]
        for piece in pieces:
            piece_cost = len(piece) + 1
            if current and cost + piece_cost > max_chars:
                close()
                carry: list[tuple[str, int]] = []
                carried = 0
                if budget > 0:
                    for item in reversed(current):
                        carry.insert(0, item)
                        carried += len(item[0]) + 1
                        if carried >= budget:
                            break
                current, cost = carry, carried
            current.append((piece, lineno))
            cost += piece_cost
    if current:
        close()
    return chunks


def split_utf8(text: str, max_bytes: int) -> list[str]:
    """Split ``text`` into parts of at most ``max_bytes`` UTF-8 bytes, never inside a character."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return [text]
    parts: list[str] = []
    start = 0
    while start < len(data):
        end = min(len(data), start + max_bytes)
        # Step back over UTF-8 continuation bytes (10xxxxxx) so a character is never cut.
        while end < len(data) and end > start and (data[end] & 0xC0) == 0x80:
            end -= 1
        parts.append(data[start:end].decode("utf-8"))
        start = end
    return parts
