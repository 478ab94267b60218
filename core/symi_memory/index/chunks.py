"""Chunk rows by rowid, as a search's candidates are read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .parts import StoreParts

__all__ = ["ChunkReads"]


class ChunkReads(StoreParts):
    """Chunk rows of candidates."""

    def chunk_rows(self, rowids: Sequence[int], *, vectors: bool = True,
                   ) -> dict[int, tuple[str, str, str, int, int, str, bytes | None]]:
        """rowid -> (id, path, source, start, end, text, embedding); embedding None unless ``vectors``."""
        out: dict[int, Any] = {}
        for i in range(0, len(rowids), 500):
            part = list(rowids[i : i + 500])
            marks = ",".join("?" * len(part))
            blob = "v.embedding" if vectors else "NULL"
            join = "LEFT JOIN embedding_cache v ON v.id = c.vector " if vectors else ""
            for row in self._read(
                f"SELECT c.rowid, c.id, c.path, c.source, c.start_line, c.end_line, c.text, {blob} FROM chunks c "
                f"{join}WHERE c.rowid IN ({marks})",
                part,
            ):
                out[row[0]] = row[1:]
        return out
