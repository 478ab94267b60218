"""Line-aware chunking (spec/behaviour.md §3).

4 characters per token; a line longer than the chunk becomes several pieces
that share its line number; the next chunk starts with the fewest trailing
pieces whose cost reaches the overlap budget.

Chunks follow Markdown structure: a heading starts a new chunk (with no
overlap from the previous section) once the current chunk holds text of its
own, so a note about the cello under "## Hobbies" is not averaged with the
allergy under "## Health" into one vector.
"""

from __future__ import annotations

import re

import attrs

HEADING_RE = re.compile(r"^ {0,3}#{1,6}(?:\s|$)")

__all__ = ["Chunk", "chunk_text", "split_utf8"]

CHARS_PER_TOKEN = 4


@attrs.frozen
class Chunk:
    """Chunk text with its 1-based inclusive line range."""

    start_line: int
    end_line: int
    text: str


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
            chunks.append(Chunk(current[0][1], current[-1][1], body))

    in_fence = False
    for lineno, line in enumerate(text.split("\n"), start=1):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        elif not in_fence and HEADING_RE.match(line) and any(
                p.strip() and not HEADING_RE.match(p) for p, _ in current):
            close()
            current, cost = [], 0
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
