"""Keeping the keyword index (FTS5) in few segments, so that a search's term look-ups stay cheap.

FTS5 writes the terms it holds as a new segment at each commit, and whenever another statement of the transaction
opens a statement journal (a write inserts its chunks' keyword rows together at its end for that, ``writes.py``), and
merges segments only when several pile up on one level (``automerge``), so a large index built by a sync holds several,
and every term a search looks up (its MATCH, the document counts, the counts read through ``fts5vocab``) is sought
in each of them. On the 10,000-chunk bench store (seven segments) merging them into one cut the instructions of a
hybrid search by about 4% (the rows, ranks and counts read are the same: only where FTS5 keeps them changes).

A write that brings the chunks written since the last merge to at least half of the index merges it into one
segment (FTS5's ``optimize``), in the same transaction: a full build, a first sync, a large change. Merging costs
about as much as writing the index's terms again, so the writes between two merges are at least half the index:
the merging at most doubles what the keyword index writes. Small indexes are left as they are.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MERGE_MIN_CHUNKS", "MERGE_SHARE", "PENDING_META", "merge_after_write"]

#: Meta key: chunks written to the keyword index since it was last merged into one segment.
PENDING_META = "fts_unmerged"
#: The index is merged once the chunks written since its last merge are at least this share of its chunks ...
MERGE_SHARE = 0.5
#: ... and at least this many (a small index's look-ups cost little whatever its segments).
MERGE_MIN_CHUNKS = 512


def merge_after_write(conn: Any, written: int) -> bool:
    """Count ``written`` chunks into the chunks written since the keyword index's last merge, inside the writing
    transaction on ``conn``, and merge it into one segment when they reach :data:`MERGE_SHARE` of its chunks
    (and :data:`MERGE_MIN_CHUNKS`). True when it merged."""
    if written <= 0:
        return False
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (PENDING_META,)).fetchone()
    try:
        pending = int(row[0]) + written if row is not None else written
    except (TypeError, ValueError):
        pending = written
    merged = False
    if pending >= MERGE_MIN_CHUNKS:
        total = int(conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
        if pending >= total * MERGE_SHARE:
            conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('optimize')")
            pending, merged = 0, True
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (PENDING_META, str(pending)))
    return merged
