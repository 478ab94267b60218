"""The shared indexing machinery, for backends that keep their rows elsewhere.

builtin-sqlite and faiss store their index in SQLite; a third-party backend
(for example one on a database server) can reuse everything else the core
does for them, so every backend lists, chunks, embeds and scores alike:

- :class:`Indexer` runs a sync (spec/behaviour.md §3): lists the agent's
  files (:func:`list_sources`), compares mtime and size with the store,
  chunks changed files, embeds chunks through the embedding cache (keyed by
  provider, model, fingerprint and text hash), retries files left without
  vectors by a failing provider, switches to the fallback provider, and hands
  the rows to a store in batches. Its store is anything following
  :class:`SyncStore`; give it yours.
- :class:`SyncScheduler` starts syncs in the background as the builtin
  backends do: the file watcher, ``sync.intervalMinutes``, the first search
  of a session and a search that finds the index stale.
- :class:`FileRow` and :class:`ChunkRow` are the rows it hands over;
  ``ChunkRow.embedding`` is float32 bytes (:func:`pack_vector`,
  :func:`unpack_vector`), or None without a provider. :func:`all_finite` tells
  a vector holding NaN or infinity (a provider's bug), which no backend can
  score against.
- :func:`symi_memory.fusion.score_hits` turns keyword evidence and vector
  similarities into the final, calibrated candidate scores; give it each
  query term's :func:`idf` (from your own document counts) and each
  candidate's term counts. :func:`query_tokens`, :func:`fold` and
  :func:`cjk_bigrams` are how the builtin keyword side splits text, so a
  backend building its own keyword index can match the same tokens;
  :data:`STOP_WORDS` are the words a query's keyword side leaves out (a query
  made only of them finds nothing), and :func:`stem_word` stems a word as the
  builtin index does.

Everything named here is public API (stable across minor versions); the
modules under ``symi_memory.index`` are the SQLite engine's internals.
"""

from __future__ import annotations

import array
from collections.abc import Iterable, Sequence
from typing import Protocol

from .index.analysis import STOP_WORDS, idf, stem_word
from .index.indexer import PARTIAL_META, Indexer, SyncCancelled, list_sources
from .index.keyword import cjk_bigrams, fold, query_tokens
from .index.records import all_finite
from .index.scheduler import SyncScheduler
from .index.store import ChunkRow, FileRow, pack_vector

__all__ = [
    "PARTIAL_META",
    "STOP_WORDS",
    "ChunkRow",
    "FileRow",
    "Indexer",
    "SyncCancelled",
    "SyncScheduler",
    "SyncStore",
    "all_finite",
    "cjk_bigrams",
    "fold",
    "idf",
    "list_sources",
    "pack_vector",
    "query_tokens",
    "stem_word",
    "unpack_vector",
]


def unpack_vector(blob: bytes) -> list[float]:
    """The floats of a :func:`pack_vector` blob."""
    return array.array("f", blob).tolist()


class SyncStore(Protocol):
    """What :class:`Indexer` needs from a store: one agent's rows.

    Writes must be atomic per call: a reader sees a call's rows all or none.
    ``build_full`` replaces every row (files, chunks, skipped, meta) at once
    and is handed a lazy iterable: the rows are produced (read, chunked,
    embedded) while it consumes them. ``meta`` carries the index identity
    (``{"identity": json}``) that ``get_meta("identity")`` must return later;
    a changed identity (another provider, model or chunking) makes the next
    sync a full one.
    """

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None:
        """Store one of the indexer's facts (failed files, the last sync's result) for this agent."""
        ...

    @property
    def vec_dims(self) -> int | None:
        """The dimension of the stored vectors, None when there are none (a batch of another is refused)."""
        ...

    def files(self) -> dict[str, FileRow]:
        """Every indexed file of this store, by path."""
        ...

    def build_full(self, files: Iterable[tuple[FileRow, list[ChunkRow]]], *, skipped: dict[str, str],
                   meta: dict[str, str]) -> int:
        """Replace every row; returns the number of chunks written."""
        ...

    def replace_files(self, files: Iterable[tuple[FileRow, list[ChunkRow]]], *, remove: Iterable[str] = (),
                      skipped: dict[str, str] | None = None, meta: dict[str, str] | None = None) -> int:
        """Replace the rows of ``files`` and drop those of ``remove``, in one transaction."""
        ...

    def touch_file(self, path: str, mtime: float, size: int, lines: int) -> None:
        """Same content, new mtime/size: update the file row only."""
        ...

    def skipped_map(self) -> dict[str, str]:
        """Files skipped by the last sync (path -> reason)."""
        ...

    def pending_count(self) -> int:
        """Files indexed without their vectors (their ``FileRow.hash`` starts with ``pending:``)."""
        ...

    def cache_get(self, provider: str, model: str, fingerprint: str, hashes: Sequence[str]) -> dict[str, bytes]: ...

    def cache_put(self, provider: str, model: str, fingerprint: str, items: dict[str, bytes]) -> None: ...

    # Optional: ``try_cache_put(provider, model, fingerprint, items) -> bool``, cache_put only if the store can write
    # at once (False, nothing written, when another writer holds the lock): the sync's commits of vectors mid-run
    # use it where present (docs/plugin-authors.md).

    def cache_prune(self, max_entries: int) -> int: ...
