"""The record types the index's rows travel in: files, chunks, committed changes, vector snapshots."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import attrs

__all__ = ["CandidateRow", "ChunkRow", "FileRow", "IndexChange", "VectorSnapshot", "all_finite", "pack_vector"]


def pack_vector(vec: Sequence[float]) -> bytes:
    import array

    return array.array("f", vec).tobytes()


def all_finite(vector: Any) -> bool:
    """False when one of ``vector``'s values is NaN or infinite (a provider's bug: no backend can score against
    such a vector); True for what is not a flat sequence of numbers (the vector side tells what is wrong with it).

    Not by the sum of the values alone: numpy values (an array, or a list of numpy floats) are summed in their own
    type, and a float16 or float32 sum overflows while every value is finite. A list of Python floats is summed first (a finite sum: every value is finite; 3 us against 12 us
    for a look at each of 384 values), and looked at value by value only when that sum is not finite."""
    try:
        if hasattr(vector, "dtype"):  # a numpy array
            import numpy as np

            return bool(np.isfinite(vector).all())
        if type(vector) is list and vector and type(vector[0]) is float and math.isfinite(sum(vector)):
            return True
        return all(map(math.isfinite, vector))
    except (TypeError, ValueError):
        return True


@attrs.frozen(kw_only=True)
class FileRow:
    path: str
    source: str
    hash: str
    mtime: float
    size: int
    chunks: int = 0
    bad_utf8: int = 0
    lines: int = 0
    #: What a later sync needs to read and chunk only what a transcript appends (the indexer's JSON), stored with
    #: the rows by a store that keeps it (``stores_tails``); None removes the one stored.
    tail: str | None = None
    #: When not None, the chunks travelling with this row are added to the file's rows instead of replacing them,
    #: and these chunk ids are removed: a transcript read only past where the last sync stopped.
    drop: tuple[str, ...] | None = None
    #: With ``drop``: the file hash the rows added to were written with; another is there (another process's
    #: sync wrote the file since this one read it): the append is not written, and the next sync reads the file.
    base: str | None = None
    #: With ``drop``: the chunks of the file starting before this line are removed too (they left the window of a
    #: transcript past ``sync.maxFileBytes``).
    cut: int | None = None


@attrs.frozen(kw_only=True)
class UnitRow:
    """A finer unit of a chunk (a line), with its own vector: ``start_line``/``end_line`` in the file."""

    start_line: int
    end_line: int
    hash: str
    embedding: bytes


@attrs.frozen(kw_only=True)
class ChunkRow:
    id: str
    path: str
    source: str
    start_line: int
    end_line: int
    hash: str
    text: str
    embedding: bytes | None = None
    units: tuple[UnitRow, ...] = ()


@attrs.frozen(kw_only=True)
class IndexChange:
    """One committed write, as seen by ``IndexStore.listeners``.

    ``full``: every row was replaced (``added`` is then empty; re-read the
    index). Otherwise ``removed`` rowids are gone and ``added`` holds the new
    ``(rowid, embedding)`` pairs; a rowid may appear in both (SQLite reuses
    the highest rowid after a delete).
    """

    generation: int
    full: bool
    removed: tuple[int, ...] = ()
    added: tuple[tuple[int, bytes], ...] = ()
    #: The written index's meta ``index_id``: generations number the writes of one index id.
    index_id: str | None = None


@attrs.frozen
class VectorSnapshot:
    """Every chunk vector of one width, read in one transaction (a consistent view of the index).

    ``rowids`` (int64) and ``matrix`` (float32, one row per chunk, as stored: not normalised) are
    numpy arrays, ordered by rowid; ``dims`` is 0 when the index holds no vector. ``index_id``: the index's
    meta ``index_id`` (None for an index an older release rebuilt), which tells apart indexes whose
    generations are numbered alike.
    """

    generation: int
    dims: int
    rowids: Any
    matrix: Any
    index_id: str | None = None


class CandidateRow(NamedTuple):
    """A search candidate's chunk as read back: its row, its file's modification time, maybe its vector.

    A named tuple, not an attrs class: a search reads a hundred or more of these, straight from the row
    (``CandidateRow._make(row)``).
    """

    rowid: int
    id: str
    path: str
    source: str
    start_line: int
    end_line: int
    text: str
    mtime: float | None = None  # None when the file's row is gone
    vector: bytes | None = None  # the stored vector (packed float32), when asked for and the chunk has one
    #: the chunk's stored ``supersession.plain_fact`` (None: none stored yet, an index from before it)
    plain: int | None = None
