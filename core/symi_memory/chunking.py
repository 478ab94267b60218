"""Line-aware chunking (spec/behaviour.md §3).

4 characters per token; a line longer than the chunk becomes several pieces
that share its line number; the next chunk starts with the fewest trailing
pieces whose cost reaches the overlap budget.
"""

from __future__ import annotations

import attrs

__all__ = ["Chunk", "Chunker", "chunk_text", "split_utf8"]

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
    chunker = Chunker.start(tokens, overlap)
    chunks: list[Chunk] = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        chunks += chunker.feed(line, lineno)
    last = chunker.last()
    if last is not None:
        chunks.append(last)
    return chunks


@attrs.define
class Chunker:
    """:func:`chunk_text` a line at a time, whose state can be kept and taken up again.

    :meth:`feed` returns the chunks a line closes; :meth:`last` the chunk the lines fed so far end with (not
    closed: more lines may join it). ``current`` (the pieces of that chunk, with their line numbers) and ``cost``
    are all a chunker holds, so one made again from them (:meth:`start`) goes on exactly as this one would.
    """

    max_chars: int
    budget: int
    current: list[tuple[str, int]] = attrs.field(factory=list)
    cost: int = 0

    @classmethod
    def start(cls, tokens: int, overlap: int, current: list[tuple[str, int]] | None = None,
              cost: int = 0) -> Chunker:
        overlap = max(0, min(overlap, tokens - 1))
        return cls(max(32, CHARS_PER_TOKEN * tokens), CHARS_PER_TOKEN * overlap, list(current or ()), cost)

    def _chunk(self) -> Chunk | None:
        current = self.current
        body = "\n".join(p for p, _ in current)
        if current and body.strip():
            return Chunk(current[0][1], current[-1][1], body, tuple(n for _, n in current))
        return None

    def feed(self, line: str, lineno: int) -> list[Chunk]:
        """Add one line (``lineno``: its number, larger than the last one's); returns the chunks it closes."""
        max_chars = self.max_chars
        closed: list[Chunk] = []
        pieces = [line[i : i + max_chars] for i in range(0, len(line), max_chars)] or [""]
        for piece in pieces:
            piece_cost = len(piece) + 1
            if self.current and self.cost + piece_cost > max_chars:
                chunk = self._chunk()
                if chunk is not None:
                    closed.append(chunk)
                carry: list[tuple[str, int]] = []
                carried = 0
                if self.budget > 0:
                    for item in reversed(self.current):
                        carry.insert(0, item)
                        carried += len(item[0]) + 1
                        if carried >= self.budget:
                            break
                self.current, self.cost = carry, carried
            self.current.append((piece, lineno))
            self.cost += piece_cost
        return closed

    def last(self) -> Chunk | None:
        """The chunk the lines fed so far end with (None when it is blank)."""
        return self._chunk()


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
