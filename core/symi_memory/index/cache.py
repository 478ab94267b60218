"""The embedding cache: stored vectors by embedder and text hash (the index's own vectors among them)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from .parts import StoreParts

__all__ = ["EmbeddingCache"]


class EmbeddingCache(StoreParts):
    """Look-up, insertion and pruning of cached vectors."""

    def cache_get(self, provider: str, model: str, fingerprint: str, hashes: Sequence[str]) -> dict[str, bytes]:
        """Stored vectors of these text hashes by this provider (the index's own vectors included)."""
        out: dict[str, bytes] = {}
        with self.lock:
            # One read transaction: the vectors are read under the embedder id it looked up (another process's
            # drop of the index, committed between the two, would give that id to another provider).
            with self.conn:
                embedder = self._embedder_id(provider, model, fingerprint, create=False)
                if embedder is None:
                    return out
                for i in range(0, len(hashes), 500):
                    part = list(hashes[i : i + 500])
                    marks = ",".join("?" * len(part))
                    for h, blob in self.conn.execute(
                        f"SELECT hash, embedding FROM embedding_cache WHERE embedder=? AND hash IN ({marks})",
                        (embedder, *part),
                    ):
                        out[h] = blob
            if out:
                now = time.time()
                with self.write():
                    self.conn.executemany("UPDATE embedding_cache SET used_at=? WHERE embedder=? AND hash=?",
                                          [(now, embedder, h) for h in out])
        return out

    def cache_put(self, provider: str, model: str, fingerprint: str, items: dict[str, bytes]) -> None:
        now = time.time()
        with self.lock:
            saved = self.vec_dims
            try:
                with self.write():
                    embedder = self._embedder_id(provider, model, fingerprint)
                    self.conn.executemany(
                        "INSERT INTO embedding_cache(embedder, hash, embedding, used_at) VALUES (?,?,?,?) "
                        "ON CONFLICT(embedder, hash) DO UPDATE SET embedding = excluded.embedding, used_at = excluded.used_at",
                        [(embedder, h, b, now) for h, b in items.items()],
                    )
            except BaseException:
                self._forget_uncommitted(saved)
                raise

    def cache_prune(self, max_entries: int) -> int:
        """Drop the least recently used vectors beyond ``max_entries`` that no chunk refers to.

        The index's own vectors live in the cache (one copy each), so they are never pruned:
        ``max_entries`` bounds what is kept beyond them, for text that may come back.
        """
        with self.write():
            n = int(self.conn.execute("SELECT COUNT(*) FROM embedding_cache").fetchone()[0])  # type: ignore[index]
            if n <= max_entries:
                return 0
            used = int(self.conn.execute(  # type: ignore[index]
                "SELECT COUNT(*) FROM (SELECT vector FROM chunks WHERE vector IS NOT NULL "
                "UNION SELECT vector FROM chunk_units)").fetchone()[0])
            extra = min(n - max_entries, n - used)
            if extra <= 0:
                return 0
            self.conn.execute(
                "DELETE FROM embedding_cache WHERE id IN (SELECT id FROM embedding_cache e WHERE NOT EXISTS "
                "(SELECT 1 FROM chunks WHERE vector = e.id) AND NOT EXISTS "
                "(SELECT 1 FROM chunk_units WHERE vector = e.id) ORDER BY used_at LIMIT ?)",
                (extra,),
            )
        return extra
