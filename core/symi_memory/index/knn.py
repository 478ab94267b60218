"""Vector reads: sqlite-vec KNN and the stored vectors by rowid, by id, or all of them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .db import meta_values
from .meta import Generation
from .parts import StoreParts
from .records import VectorSnapshot

__all__ = ["VectorReads"]


class VectorReads(StoreParts):
    """The one stored copy of each vector, read for scans, rescoring and in-database KNN."""

    def vec_knn(self, query: bytes, k: int, unit_weight: float = 0.0) -> list[tuple[int, float]]:
        """Exact KNN inside SQLite (sqlite-vec's ``vec_distance_cosine`` over the stored vectors): ``(rowid, cosine)``.

        The in-database answer for small indexes and while a scan matrix loads; it reads the one
        stored copy of each vector (no second copy in a ``vec0`` table). With ``unit_weight`` the
        score is ``vectors.combine_unit`` of the chunk's cosine and its best unit's.
        """
        if not self.vec_dims or len(query) != self.vec_dims * 4:
            return []
        if unit_weight <= 0.0:
            rows = self._read(
                "SELECT c.rowid, 1.0 - vec_distance_cosine(v.embedding, ?) AS s FROM chunks c JOIN embedding_cache v "
                "ON v.id = c.vector WHERE length(v.embedding) = ? ORDER BY s DESC LIMIT ?",
                (query, len(query), k),
            ).fetchall()
        else:
            rows = self._read(
                "WITH s(r, u, cs) AS (SELECT c.rowid, 0, 1.0 - vec_distance_cosine(v.embedding, :q) FROM chunks c "
                "JOIN embedding_cache v ON v.id = c.vector WHERE length(v.embedding) = :n "
                "UNION ALL SELECT u.chunk, 1, 1.0 - vec_distance_cosine(v.embedding, :q) FROM chunk_units u "
                "JOIN embedding_cache v ON v.id = u.vector WHERE length(v.embedding) = :n) "
                "SELECT r, (1.0 - :w) * MAX(CASE WHEN u = 0 THEN cs END) + :w * MAX(cs) AS score FROM s GROUP BY r "
                "HAVING MAX(CASE WHEN u = 0 THEN cs END) IS NOT NULL ORDER BY score DESC LIMIT :k",
                {"q": query, "n": len(query), "w": float(unit_weight), "k": k},
            ).fetchall()
        return [(rowid, float(score)) for rowid, score in rows]

    def unit_vectors_by_rowid(self, rowids: Sequence[int]) -> dict[int, list[bytes]]:
        """The unit vectors (packed float32) of these chunk rowids; chunks without units are left out."""
        out: dict[int, list[bytes]] = {}
        for i in range(0, len(rowids), 500):
            part = list(rowids[i : i + 500])
            marks = ",".join("?" * len(part))
            for rowid, blob in self._read(
                f"SELECT u.chunk, v.embedding FROM chunk_units u JOIN embedding_cache v ON v.id = u.vector "
                f"WHERE u.chunk IN ({marks})", part,
            ):
                out.setdefault(rowid, []).append(blob)
        return out

    def unit_vectors_by_id(self, ids: Sequence[str]) -> dict[str, list[tuple[int, int, bytes]]]:
        """``{Candidate.id: [(start line, end line, packed float32), ...]}``: the unit (line) vectors of these
        chunks in line order, with the file lines each unit covers; chunks without units are left out."""
        out: dict[str, list[tuple[int, int, bytes]]] = {}
        for i in range(0, len(ids), 500):
            part = list(ids[i : i + 500])
            marks = ",".join("?" * len(part))
            for cid, start, end, blob in self._read(
                f"SELECT c.id, u.start_line, u.end_line, v.embedding FROM chunks c JOIN chunk_units u ON u.chunk = c.rowid "
                f"JOIN embedding_cache v ON v.id = u.vector WHERE c.id IN ({marks}) "
                f"ORDER BY c.id, u.start_line, u.end_line", part,
            ):
                out.setdefault(cid, []).append((int(start), int(end), blob))
        return out

    def unit_count(self) -> int:
        """How many unit vectors the index holds (of chunks that have a vector)."""
        return int(self._read("SELECT COUNT(*) FROM chunk_units").fetchone()[0])

    def iter_scan_rows(self, with_units: bool) -> Iterator[tuple[int, bool, int, bytes]]:
        """``(chunk rowid, is_unit, vector id, blob)``: each chunk's vector, then its units' (``with_units``), by rowid.

        Two cursors of a connection of the load's own (one read transaction while both are open), merged in
        rowid order, so nothing is sorted or held in SQLite. The vector id is the stored vector's
        ``embedding_cache`` row, which :meth:`vector_rows` reads back directly. The connection is not
        this thread's: a search that loads the copy itself (a small index, or no sqlite-vec) would fill its
        connection's page cache (:data:`~symi_memory.index.store.SEARCH_CACHE_KIB`) with every vector, pages
        it never reads again; this one keeps SQLite's default cache and is closed when the rows are read.
        """
        from .db import open_db

        conn = open_db(self.path)
        try:
            chunks = conn.execute("SELECT c.rowid, v.id, v.embedding FROM chunks c JOIN embedding_cache v "
                                  "ON v.id = c.vector ORDER BY c.rowid")
            if not with_units:
                for rowid, vid, blob in chunks:
                    yield rowid, False, vid, blob
                return
            units = conn.cursor().execute(
                "SELECT u.chunk, v.id, v.embedding FROM chunk_units u JOIN embedding_cache v ON v.id = u.vector "
                "ORDER BY u.chunk, u.start_line, u.end_line")
            pending = next(units, None)
            for rowid, vid, blob in chunks:
                yield rowid, False, vid, blob
                while pending is not None and pending[0] < rowid:
                    pending = next(units, None)  # units of a chunk without a vector
                while pending is not None and pending[0] == rowid:
                    yield rowid, True, pending[1], pending[2]
                    pending = next(units, None)
        finally:
            conn.close()

    def vector_rows(self, vector_ids: Sequence[int], dims: int, generation: Generation) -> Any:
        """The stored float32 vectors with these ``embedding_cache`` ids, as an ``(n, dims)`` matrix in that order.

        Read as blobs (``sqlite3_blob_reopen``: no statement per row, no row objects), about twice as
        fast as selecting them, in one read transaction that first checks the index is still at
        ``generation`` (:meth:`~.meta.MetaRows.generation_key`: the ids come from a scan copy of that index and
        generation). None when it is not (or the index has no id), or
        when a vector is gone or of another width: the caller then reads by chunk.
        """
        import apsw
        import numpy as np

        out = np.empty((len(vector_ids), dims), dtype=np.float32)
        if not len(vector_ids):
            return out
        width = dims * 4
        conn = self.reader()
        with conn:  # one read transaction: the generation and the vectors are of the same index state
            got = meta_values(conn, "index_id", "generation")
            if (got.get("index_id"), int(got.get("generation") or 0)) != generation:
                return None
            try:
                blob = conn.blob_open("main", "embedding_cache", "embedding", int(vector_ids[0]), False)
            except apsw.Error:
                return None
            try:
                view = out.data.cast("B")
                for i, vid in enumerate(vector_ids.tolist() if hasattr(vector_ids, "tolist") else vector_ids):
                    if i:
                        blob.reopen(vid)
                    if blob.length() != width:
                        return None
                    blob.read_into(view, i * width, width)
            except apsw.Error:
                return None
            finally:
                blob.close()
        return out

    def vectors_by_id(self, ids: Sequence[str]) -> dict[str, bytes]:
        """Stored embeddings (packed float32) of the chunks with these ``Candidate.id`` values; chunks without one are left out."""
        return self._vectors_where("c.id", ids)

    def vectors_and_lines_by_id(self, ids: Sequence[str]) -> tuple[dict[str, bytes], dict[str, bytes | None]]:
        """:meth:`vectors_by_id` of these chunks and, from the same rows, their stored line analyses
        (``chunks.lines``; None for a chunk not analysed yet), 500 ids per statement: supersession asks
        for both, for the same candidates."""
        vectors: dict[str, bytes] = {}
        lines: dict[str, bytes | None] = {}
        for i in range(0, len(ids), 500):
            part = list(ids[i : i + 500])
            marks = ",".join("?" * len(part))
            for key, blob, analysis in self._read(
                f"SELECT c.id, v.embedding, c.lines FROM chunks c LEFT JOIN embedding_cache v ON v.id = c.vector "
                f"WHERE c.id IN ({marks})", part,
            ):
                if blob is not None:
                    vectors[key] = blob
                lines[key] = analysis
        return vectors, lines

    def vectors_by_rowid(self, rowids: Sequence[int]) -> dict[int, bytes]:
        """Stored embeddings (packed float32) of these chunk rowids; chunks without one are left out."""
        return self._vectors_where("c.rowid", rowids)

    def _vectors_where(self, column: str, keys: Sequence[Any]) -> dict[Any, bytes]:
        """``{key: embedding}`` of the chunks whose ``column`` is one of ``keys``, 500 keys per statement."""
        out: dict[Any, bytes] = {}
        for i in range(0, len(keys), 500):
            part = list(keys[i : i + 500])
            marks = ",".join("?" * len(part))
            for key, blob in self._read(
                f"SELECT {column}, v.embedding FROM chunks c JOIN embedding_cache v ON v.id = c.vector "
                f"WHERE {column} IN ({marks})", part,
            ):
                out[key] = blob
        return out

    def all_vectors(self) -> tuple[list[int], list[bytes]]:
        rows = list(self.iter_vectors())
        return [r[0] for r in rows], [r[1] for r in rows]

    def vector_count(self) -> int:
        """How many chunks have a stored vector."""
        return int(self._read("SELECT COUNT(vector) FROM chunks").fetchone()[0])

    def vector_dims(self) -> int | None:
        """The width of the index's vectors (of the first chunk that has one), or None."""
        row = self._read("SELECT length(v.embedding) / 4 FROM chunks c JOIN embedding_cache v ON v.id = c.vector "
                         "LIMIT 1").fetchone()
        return int(row[0]) if row else None

    def vector_stats(self, dims: int) -> tuple[int, int]:
        """(count, sum of rowids) of the chunk vectors of this width: a cheap fingerprint of the vector set."""
        row = self._read("SELECT COUNT(*), COALESCE(SUM(c.rowid), 0) FROM chunks c JOIN embedding_cache v "
                         "ON v.id = c.vector WHERE length(v.embedding) = ?", (dims * 4,)).fetchone()
        return int(row[0]), int(row[1])

    def chunk_count(self) -> int:
        """How many chunks the index holds (with or without a vector)."""
        return int(self._read("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def iter_vectors(self) -> Iterator[tuple[int, bytes]]:
        """``(rowid, float32 blob)`` of every chunk with a vector, by rowid, one row at a time.

        Unlike :meth:`all_vectors` it never holds every blob at once, so a caller filling a
        preallocated matrix peaks at the matrix's size.
        """
        yield from self._read("SELECT c.rowid, v.embedding FROM chunks c JOIN embedding_cache v ON v.id = c.vector "
                              "ORDER BY c.rowid")

    def read_vectors(self) -> VectorSnapshot:
        """Generation and every chunk vector (of the first chunk's width) from one read transaction.

        Rows go straight into a preallocated matrix, so the peak is the matrix's size. Rows of
        another width (a half-finished provider switch) cannot be compared and are left out.
        """
        import numpy as np

        conn = self.reader()
        with conn:  # one read transaction: WAL gives a consistent view
            got = meta_values(conn, "index_id", "generation")
            generation = int(got.get("generation") or 0)
            dims = self.vector_dims() or 0
            n = self.vector_stats(dims)[0] if dims else 0
            rowids = np.empty(n, dtype=np.int64)
            matrix = np.empty((n, dims), dtype=np.float32)
            i = 0
            if dims:
                for rowid, blob in conn.execute(
                    "SELECT c.rowid, v.embedding FROM chunks c JOIN embedding_cache v ON v.id = c.vector "
                    "WHERE length(v.embedding) = ? ORDER BY c.rowid", (dims * 4,)
                ):
                    if i >= n:
                        break
                    rowids[i] = rowid
                    matrix[i] = np.frombuffer(blob, dtype=np.float32)
                    i += 1
        return VectorSnapshot(generation=generation, dims=dims, rowids=rowids[:i], matrix=matrix[:i],
                              index_id=got.get("index_id"))
