"""A large write leaves the keyword index (FTS5) in one segment; small writes leave it to FTS5's own merging.

Every term a search looks up is sought in each segment of the keyword index, so an index a sync wrote in one
go is merged into one segment (``index/fts_segments.py``); the rows, ranks and counts searches read are the same.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import attrs

from symi_memory.index.fts_segments import MERGE_MIN_CHUNKS, PENDING_META
from symi_memory.index.store import ChunkRow, FileRow, IndexStore

PER_FILE = 50


def _files(first: int, count: int, tag: str = "") -> list[tuple[FileRow, list[ChunkRow]]]:
    out = []
    for f in range(first, first + count, PER_FILE):
        rel = f"memory/f{f // PER_FILE:04d}.md"
        rows = [ChunkRow(id=f"{tag}{i:06d}", path=rel, source="memory", start_line=i - f + 1, end_line=i - f + 1,
                         hash=f"{tag}{i}", text=f"note {i} about uniq{i}{tag} and shared words {i % 7}", embedding=None)
                for i in range(f, min(first + count, f + PER_FILE))]
        out.append((FileRow(path=rel, source="memory", hash=f"{rel}{tag}", mtime=0.0, size=0, lines=len(rows)), rows))
    return out


def _segments(store: IndexStore) -> int:
    # FTS5 numbers each data row by its segment (the bits above 37; segment 0 holds the index's own records).
    return len({rowid >> 37 for (rowid,) in store.conn.execute("SELECT id FROM chunks_fts_data")} - {0})


def _pending(store: IndexStore) -> int:
    row = store.conn.execute("SELECT value FROM meta WHERE key = ?", (PENDING_META,)).fetchone()
    return int(row[0]) if row else 0


def test_a_large_write_leaves_one_segment_and_search_finds_every_chunk(tmp_path: Path) -> None:
    store = IndexStore.open(tmp_path / "index.sqlite")
    try:
        n = 2 * MERGE_MIN_CHUNKS
        # Written in parts (FTS5 makes a segment of each transaction): the last part brings the unmerged chunks to
        # the whole index, so it merges them.
        for first in range(0, n, n // 4):
            store.replace_files(_files(first, n // 4))
        assert _segments(store) == 1
        assert _pending(store) == 0
        store.conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")
        rowid_of = dict(store.conn.execute("SELECT id, rowid FROM chunks").fetchall())
        for i in (0, 1, n // 2, n - 1):
            assert [r for r, _ in store.keyword_search(f"uniq{i}", 5)] == [rowid_of[f"{i:06d}"]]
    finally:
        store.close()


def test_small_writes_are_counted_and_left_to_fts5(tmp_path: Path) -> None:
    store = IndexStore.open(tmp_path / "index.sqlite")
    try:
        n = 2 * MERGE_MIN_CHUNKS
        store.replace_files(_files(0, n))
        assert _segments(store) == 1
        # One file written again, then another: a small share of the index, not merged; counted toward the next merge.
        store.replace_files(_files(0, PER_FILE, tag="b"))
        store.replace_files(_files(PER_FILE, PER_FILE, tag="c"))
        assert _pending(store) == 2 * PER_FILE
        assert _segments(store) > 1
        rowid_of = dict(store.conn.execute("SELECT id, rowid FROM chunks").fetchall())
        assert [r for r, _ in store.keyword_search(f"uniq{PER_FILE}c", 5)] == [rowid_of[f"c{PER_FILE:06d}"]]
        assert store.keyword_search(f"uniq{PER_FILE}", 5) == []  # its old text is gone
    finally:
        store.close()


def test_one_write_below_the_merge_size_leaves_one_segment(tmp_path: Path) -> None:
    # The keyword rows of one write go in together: FTS5 writes its pending terms as a segment whenever another
    # statement of the transaction opens a statement journal (each chunk's vector upsert did), not once per chunk.
    store = IndexStore.open(tmp_path / "index.sqlite")
    try:
        files = [(frow, [attrs.evolve(c, embedding=struct.pack("4f", 1.0, float(i), 0.0, 0.5)) for i, c in enumerate(rows)])
                 for frow, rows in _files(0, MERGE_MIN_CHUNKS - PER_FILE)]
        identity = {"provider": "test", "model": "m", "fingerprint": "f", "chunkTokens": 400, "chunkOverlap": 80}
        store.replace_files(files, meta={"identity": json.dumps(identity, sort_keys=True)})
        assert store.conn.execute("SELECT COUNT(*) FROM chunks WHERE vector IS NOT NULL").fetchone()[0] == len(
            [c for _, rows in files for c in rows])
        assert _pending(store) == MERGE_MIN_CHUNKS - PER_FILE  # not merged
        assert _segments(store) == 1
        rowid_of = dict(store.conn.execute("SELECT id, rowid FROM chunks").fetchall())
        assert [r for r, _ in store.keyword_search("uniq3", 5)] == [rowid_of["000003"]]
    finally:
        store.close()


def test_a_path_written_twice_in_one_write_keeps_only_its_last_text_searchable(tmp_path: Path) -> None:
    # The second copy deletes the first's chunks before their (deferred) keyword rows went in, and its new chunks
    # take the same rowids: a search for a word only the first copy had must find nothing.
    store = IndexStore.open(tmp_path / "index.sqlite")
    try:
        store.replace_files(_files(0, 3))
        old = _files(100, 3, tag="old")[0]
        new = _files(100, 3, tag="new")[0]
        store.replace_files([(attrs.evolve(old[0], path="memory/twice.md"), [attrs.evolve(c, path="memory/twice.md") for c in old[1]]),
                             (attrs.evolve(new[0], path="memory/twice.md"), [attrs.evolve(c, path="memory/twice.md") for c in new[1]])])
        rowid_of = dict(store.conn.execute("SELECT id, rowid FROM chunks").fetchall())
        assert store.keyword_search("uniq101old", 5) == []
        assert [r for r, _ in store.keyword_search("uniq101new", 5)] == [rowid_of["new000101"]]
        # Each chunk's keyword row once: as many rows in the keyword index as chunks.
        assert store.conn.execute("SELECT COUNT(*) FROM chunks_fts_docsize").fetchone()[0] == len(rowid_of)
    finally:
        store.close()
