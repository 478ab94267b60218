"""Chunk rows by rowid, as a search's candidates are read (with their file's mtime, in one query)."""

from __future__ import annotations

import array
import json
from collections.abc import Collection, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any

import apsw

from .meta import NO_GENERATION, Generation
from .parts import StoreParts
from .records import CandidateRow

__all__ = ["EPOCH_COLUMNS", "ChunkReads", "bound_list", "listed"]

#: A list of keys (rowids, ids) is bound to a statement as one value, a ``carray`` where SQLite has it (else a
#: JSON array), read by ``IN (SELECT value FROM ...)`` (candidate rows: joined as a table, ``_LISTED_TABLE``, each
#: key once and in order): the statement's text then does not depend on how many
#: keys it asks about, so it stays prepared in the connection's statement cache (100 statements). Written
#: ``IN (?,?,...)``, each count of keys was another statement, prepared again (150-200 us at a search's 50-140
#: rowids) and pushing the search's other statements out of the cache. The same rows come back, in the same
#: order (SQLite reads the list's distinct values in order either way).
CARRAY = getattr(apsw, "carray", None) is not None and "ENABLE_CARRAY" in getattr(apsw, "compile_options", ())
_LISTED_TABLE = "carray(?)" if CARRAY else "json_each(?)"
_LISTED = f"SELECT value FROM {_LISTED_TABLE}"
#: The index's ``((index id, generation), touches)`` (:meth:`~.meta.MetaRows.search_epoch`) as three columns of a
#: statement reading chunk rows: the epoch those rows were read at (one statement reads one snapshot of the database).
EPOCH_COLUMNS = ("(SELECT value FROM meta WHERE key = 'index_id'), "
                 "(SELECT value FROM meta WHERE key = 'generation'), "
                 "(SELECT value FROM meta WHERE key = 'touches')")
#: The epoch of rows read across snapshots, or of an index without an id: equal to no search's.
NO_EPOCH = (NO_GENERATION, -1)

_FIRST = itemgetter(0)
_ROW_LEN = len(CandidateRow._fields)
_ROW_FIELDS = itemgetter(slice(0, _ROW_LEN))  # a row's CandidateRow columns, without the epoch's


def listed() -> str:
    """The subquery giving the values of a list bound with :func:`bound_list` (``x IN (listed())``)."""
    return _LISTED


def bound_list(values: Sequence[int] | Sequence[str]) -> Any:
    """``values`` (all ints or all strings, at least one) as the one parameter :func:`listed` reads."""
    if CARRAY:
        if isinstance(values[0], int):
            return apsw.carray(array.array("q", values))
        return apsw.carray(tuple(values))
    return json.dumps(list(values))


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
        return self._candidate_rows(rowids, sources, vectors=vectors, scored=scored)[0]

    def candidate_rows_at(self, rowids: Sequence[int]) -> tuple[dict[int, CandidateRow], tuple[Generation, int] | None]:
        """:meth:`candidate_rows` of these chunks (every source, no vectors) and the index's epoch
        (:meth:`~.meta.MetaRows.search_epoch`) they were read at, in the same statement: None when no row
        came back."""
        return self._candidate_rows(rowids, None, vectors=False, scored=(), epoch=True)

    def _candidate_rows(self, rowids: Sequence[int], sources: Sequence[str] | None, *, vectors: bool,
                        scored: Collection[int], epoch: bool = False,
                        ) -> tuple[dict[int, CandidateRow], tuple[Generation, int] | None]:
        out: dict[int, CandidateRow] = {}
        read_at: tuple[Generation, int] | None = None
        if not rowids:
            return out, read_at
        where = ""
        extra: list[Any] = []
        if sources is not None:
            where = f" WHERE c.source IN ({','.join('?' * len(sources))})"
            extra = list(sources)
        blob = "NULL"
        skip: list[Any] = []
        if vectors:
            blob = "(SELECT v.embedding FROM embedding_cache v WHERE v.id = c.vector)"
            if scored:
                blob = f"CASE WHEN c.rowid IN ({_LISTED}) THEN NULL ELSE {blob} END"
                skip = [bound_list(list(scored))]
        more = f", {EPOCH_COLUMNS}" if epoch else ""
        new = tuple.__new__
        for i in range(0, len(rowids), 500):
            # Each rowid once, in order: the rows come in the list's order (the join reads the list first and looks
            # each rowid up), which is rowid order, as ``c.rowid IN (list)`` gave them (that built a sorted copy of
            # the list inside SQLite first: about 0.5 us a rowid more).
            part = sorted(set(rowids[i : i + 500]))
            # The columns in CandidateRow's order: each row becomes one without unpacking.
            rows = self._read(
                f"SELECT c.rowid, c.id, c.path, c.source, c.start_line, c.end_line, c.text, f.mtime, {blob}, c.plain{more} "
                f"FROM {_LISTED_TABLE} k CROSS JOIN chunks c ON c.rowid = k.value "
                f"LEFT JOIN files f ON f.path = c.path{where}",
                [*skip, bound_list(part), *extra],
            ).fetchall()
            if not rows:
                continue
            if not epoch:
                out.update(zip(map(_FIRST, rows), map(new, repeat(CandidateRow), rows), strict=True))
                continue
            # One statement reads one snapshot: its rows' epoch columns are all the same.
            first = rows[0]
            # Without an id (an index an older release rebuilt): like no search's epoch (which got another key).
            n = _ROW_LEN  # the epoch's columns follow the row's
            at = ((first[n], int(first[n + 1] or 0)), int(first[n + 2] or 0)) if first[n] is not None else NO_EPOCH
            if read_at is None:
                read_at = at
            elif at != read_at:  # statements of 500 rowids each read a later snapshot than the one before
                read_at = NO_EPOCH
            out.update(zip(map(_FIRST, rows), map(new, repeat(CandidateRow), map(_ROW_FIELDS, rows)), strict=True))
        return out, read_at

    def line_analysis_by_id(self, ids: Sequence[str]) -> dict[str, bytes]:
        """``{Candidate.id: stored line analysis}`` (:func:`symi_memory.supersession.line_analysis`) of these
        chunks, 500 ids per statement; chunks not analysed yet (an index from before the column) are left out."""
        out: dict[str, bytes] = {}
        for i in range(0, len(ids), 500):
            part = list(ids[i : i + 500])
            for cid, blob in self._read(f"SELECT id, lines FROM chunks WHERE id IN ({_LISTED}) AND lines IS NOT NULL",
                                        (bound_list(part),)):
                out[cid] = blob
        return out
