"""The embedding cache: stored vectors by embedder and text hash (the index's own vectors among them)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import apsw

from .db import BUSY_TIMEOUT_MS
from .parts import StoreParts

__all__ = ["SPARE_WRITE_WAIT_MS", "EmbeddingCache"]

#: How long a write the sync can do without waits for another process's write lock before it is skipped: a commit
#: of vectors mid-run (:meth:`EmbeddingCache.try_cache_put`, the next one takes them) and a cache hit's ``used_at``.
#: Not the busy timeout and its retries (about a minute): each try would hold up the provider's next batch that long.
SPARE_WRITE_WAIT_MS = 100


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
                # Only what pruning goes by (the write of the chunks using them sets it again): skipped while another
                # process holds the write lock, not waited for (a full rebuild's groups each look up the cache).
                now = time.time()
                self._write_if_free(lambda: self.conn.executemany(
                    "UPDATE embedding_cache SET used_at=? WHERE embedder=? AND hash=?",
                    [(now, embedder, h) for h in out]))
        return out

    def _write_if_free(self, work: Callable[[], object]) -> bool:
        """Run ``work`` in a write transaction if the write lock is free within :data:`SPARE_WRITE_WAIT_MS`;
        False (nothing written) when another process holds it."""
        with self.lock:
            self.conn.set_busy_timeout(SPARE_WRITE_WAIT_MS)
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except apsw.BusyError:
                return False
            except apsw.ReadOnlyError as exc:
                raise self.read_only_error(exc) from exc
            finally:
                self.conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            saved = self.vec_dims
            try:
                work()
                self.conn.execute("COMMIT")
            except BaseException as exc:
                if not self.conn.getautocommit():
                    self.conn.execute("ROLLBACK")
                self._forget_uncommitted(saved)
                if isinstance(exc, apsw.ReadOnlyError):
                    raise self.read_only_error(exc) from exc
                raise
        return True

    def try_cache_put(self, provider: str, model: str, fingerprint: str, items: dict[str, bytes]) -> bool:
        """:meth:`cache_put` if the index's write lock is free within :data:`SPARE_WRITE_WAIT_MS`, else nothing:
        False. The sync's commits of vectors mid-run are a safety net (a run stopped mid-way keeps them): one that
        finds another process writing is skipped, and the vectors go with the next one."""
        now = time.time()

        def put() -> None:
            embedder = self._embedder_id(provider, model, fingerprint)
            self.conn.executemany(
                "INSERT INTO embedding_cache(embedder, hash, embedding, used_at) VALUES (?,?,?,?) "
                "ON CONFLICT(embedder, hash) DO UPDATE SET embedding = excluded.embedding, used_at = excluded.used_at",
                [(embedder, h, b, now) for h, b in items.items()],
            )

        return self._write_if_free(put)

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
