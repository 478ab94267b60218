"""Chunk rows by rowid, as a search's candidates are read (with their file's mtime, in one query)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from .parts import StoreParts
from .records import CandidateRow

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

    def candidate_rows(self, rowids: Sequence[int], sources: Sequence[str] | None = None, *,
                       vectors: bool = False, scored: Collection[int] = ()) -> dict[int, CandidateRow]:
        """rowid -> :class:`CandidateRow` of these chunks (from ``sources`` only, when given).

        One query per 500 rowids reads the chunk, its file's mtime and, with ``vectors``, its
        stored vector together; the vectors of the ``scored`` rowids (the vector side already
        has their cosine) are not read.
        """
        out: dict[int, CandidateRow] = {}
        where = ""
        extra: list[Any] = []
        if sources is not None:
            where = f" AND c.source IN ({','.join('?' * len(sources))})"
            extra = list(sources)
        blob = "NULL"
        skip: list[int] = list(scored) if vectors else []
        if vectors:
            blob = "(SELECT v.embedding FROM embedding_cache v WHERE v.id = c.vector)"
            if skip:
                blob = f"CASE WHEN c.rowid IN ({','.join('?' * len(skip))}) THEN NULL ELSE {blob} END"
        make = CandidateRow._make
        for i in range(0, len(rowids), 500):
            part = list(rowids[i : i + 500])
            marks = ",".join("?" * len(part))
            # The columns in CandidateRow's order: each row becomes one without unpacking.
            for row in self._read(
                f"SELECT c.rowid, c.id, c.path, c.source, c.start_line, c.end_line, c.text, f.mtime, {blob} FROM chunks c "
                f"LEFT JOIN files f ON f.path = c.path WHERE c.rowid IN ({marks}){where}",
                [*skip, *part, *extra],
            ):
                out[row[0]] = make(row)
        return out

    def line_analysis_by_id(self, ids: Sequence[str]) -> dict[str, bytes]:
        """``{Candidate.id: stored line analysis}`` (:func:`symi_memory.supersession.line_analysis`) of these
        chunks, 500 ids per statement; chunks not analysed yet (an index from before the column) are left out."""
        out: dict[str, bytes] = {}
        for i in range(0, len(ids), 500):
            part = list(ids[i : i + 500])
            marks = ",".join("?" * len(part))
            for cid, blob in self._read(f"SELECT id, lines FROM chunks WHERE id IN ({marks}) AND lines IS NOT NULL",
                                        part):
                out[cid] = blob
        return out
