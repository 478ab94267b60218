"""Vector reads: sqlite-vec KNN and the stored vectors by rowid, by id, or all of them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .parts import StoreParts
from .records import VectorSnapshot

__all__ = ["VectorReads"]


class VectorReads(StoreParts):
    """The one stored copy of each vector, read for scans, rescoring and in-database KNN."""

    def vec_knn(self, query: bytes, k: int) -> list[tuple[int, float]]:
        """Exact KNN inside SQLite (sqlite-vec's ``vec_distance_cosine`` over the stored vectors): ``(rowid, cosine)``.

        The in-database answer for small indexes and while a scan matrix loads; it reads the one
        stored copy of each vector (no second copy in a ``vec0`` table).
        """
        if not self.vec_dims or len(query) != self.vec_dims * 4:
            return []
        rows = self._read(
            "SELECT c.rowid, vec_distance_cosine(v.embedding, ?) AS d FROM chunks c JOIN embedding_cache v "
            "ON v.id = c.vector WHERE length(v.embedding) = ? ORDER BY d LIMIT ?",
            (query, len(query), k),
        ).fetchall()
        return [(rowid, 1.0 - dist) for rowid, dist in rows]

    def vectors_by_id(self, ids: Sequence[str]) -> dict[str, bytes]:
        """Stored embeddings (packed float32) of the chunks with these ``Candidate.id`` values; chunks without one are left out."""
        out: dict[str, bytes] = {}
        for i in range(0, len(ids), 500):
            part = list(ids[i : i + 500])
            marks = ",".join("?" * len(part))
            for cid, blob in self._read(
                f"SELECT c.id, v.embedding FROM chunks c JOIN embedding_cache v ON v.id = c.vector WHERE c.id IN ({marks})",
                part,
            ):
                out[cid] = blob
        return out

    def vectors_by_rowid(self, rowids: Sequence[int]) -> dict[int, bytes]:
        """Stored embeddings (packed float32) of these chunk rowids; chunks without one are left out."""
        out: dict[int, bytes] = {}
        for i in range(0, len(rowids), 500):
            part = list(rowids[i : i + 500])
            marks = ",".join("?" * len(part))
            for rowid, blob in self._read(
                f"SELECT c.rowid, v.embedding FROM chunks c JOIN embedding_cache v ON v.id = c.vector "
                f"WHERE c.rowid IN ({marks})", part,
            ):
                out[rowid] = blob
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
            row = conn.execute("SELECT value FROM meta WHERE key='generation'").fetchone()
            generation = int(row[0]) if row else 0
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
        return VectorSnapshot(generation=generation, dims=dims, rowids=rowids[:i], matrix=matrix[:i])
