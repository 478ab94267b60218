"""A memory backend over the SQLite index; builtin-sqlite and faiss are this with different vector sides."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import EmbeddingError
from ..fusion import fuse_rrf, fuse_weighted, query_weights
from ..specs import DEFAULT_CALIBRATION, BatchingProvider, Closeable, ScoreCalibration, VectorSide
from ..types import BackendResult, Candidate, ReadResult, SearchQuery, SyncProgress, SyncReport
from ..workspace import PathRules
from . import analysis
from .indexer import Indexer, SyncCancelled
from .keyword import fold, identifier_tokens, query_tokens, token_pattern
from .scheduler import SyncScheduler
from .store import IndexStore

if TYPE_CHECKING:
    from ..config import AgentView
    from ..embedding import EmbeddingChoice

__all__ = ["IndexedBackend", "KEYWORD_OVERFETCH", "VectorSide", "assemble_backend"]

KEYWORD_OVERFETCH = 3
TERMS_CACHE_MAX = 50_000

log = logging.getLogger("symi_memory.backend")


@attrs.define
class IndexedBackend:
    """Hybrid search over the SQLite index with a pluggable vector side."""

    agent: AgentView
    store: IndexStore
    choice: EmbeddingChoice
    indexer: Indexer
    vectors: VectorSide
    short_name: str = "builtin"
    plugin_name: str = "builtin-sqlite"
    scheduler: SyncScheduler | None = None
    _sync_lock: threading.Lock = attrs.field(factory=threading.Lock)
    _closing: bool = False
    on_synced: Callable[[SyncReport], None] | None = None
    _terms_cache: dict[int, frozenset[str]] = attrs.field(factory=dict)
    _terms_gen: int = -1

    def start(self) -> None:
        """Arm the watcher, the interval and the staleness check."""
        self.scheduler = SyncScheduler(agent=self.agent, run_sync=self._background_sync,
                                       check_stale=lambda: self.is_stale(retry_pending=self.indexer.retry_due()))
        self.scheduler.start()

    # ------------------------------------------------------------------ sync

    def sync(self, *, reason: str = "manual", force: bool = False,
             progress: Callable[[SyncProgress], None] | None = None) -> SyncReport:
        with self._sync_lock:
            if self._closing:
                raise SyncCancelled("sync cancelled: the memory manager is closing")
            report = self.indexer.sync(reason=reason, force=force, progress=progress)
        if self.scheduler:
            self.scheduler.mark_clean()
        if self.on_synced:
            self.on_synced(report)
        return report

    def _background_sync(self, reason: str) -> None:
        if self._closing:
            return
        try:
            self.sync(reason=reason)
        except SyncCancelled:
            pass
        except Exception as exc:  # a background sync must never crash the host
            log.warning("background sync (%s) failed: %s", reason, exc)

    def is_stale(self, *, retry_pending: bool = True) -> bool:
        """True when any file on disk differs from the index (mtime/size), still lacks vectors, or the identity changed."""
        if self.indexer.needs_full():
            return True
        changed, removed = self.indexer.changed_files(retry_pending=retry_pending)
        return bool(removed) or any(f.source != "sessions" for f in changed)

    # ---------------------------------------------------------------- search

    def search(self, query: SearchQuery) -> BackendResult:
        if self.scheduler:
            self.scheduler.on_search(query.session_key)
        ms = self.agent.memory_search
        hybrid = ms["query"]["hybrid"]
        sources = tuple(s for s in query.sources if s in ("memory", "sessions")) or ("memory",)
        provider = self.choice.provider
        words = query_tokens(query.text)
        qterms = analysis.query_terms(words)
        if not qterms:
            # Only stop words ("the", "what is it"): nothing to look for, on either side.
            return BackendResult(candidates=(), mode="none", provider=provider.id if provider else "none",
                                 model=provider.model if provider else None, fallback=self.choice.fallback)
        qvec: list[float] | None = None
        if provider is not None:
            try:
                qvec = provider.embed_query(query.text)
            except EmbeddingError as exc:
                log.warning("query embedding failed (%s); keyword results only", exc)
        if qvec is not None and not any(qvec):
            qvec = None  # an all-zero vector carries no meaning
        # Vectors built by another provider/model are not comparable: keyword-only until the reindex lands.
        use_vec = qvec is not None and not self.indexer.needs_full()
        use_text = hybrid["enabled"] or not use_vec
        limit = query.candidate_limit
        # One FTS query serves both: the top `limit` are keyword candidates, the rest score vector candidates.
        ranked = self.store.keyword_search(query.text, limit * KEYWORD_OVERFETCH) if use_text else []
        vec_hits: dict[int, float] = {}
        if use_vec:
            # Over-fetch when filtering by source, since the vector side cannot filter.
            vec_hits = dict(self.vectors.search(qvec, limit * (2 if len(sources) == 1 else 1)))  # type: ignore[arg-type]
        # Every keyword hit fetched is rescored by coverage below, so all of them are candidates.
        rows, keyword_ids = self._candidate_rows(ranked, vec_hits, limit * KEYWORD_OVERFETCH, sources)
        vec_hits = {k: v for k, v in vec_hits.items() if k in rows}
        if use_vec and hybrid["enabled"]:
            missing = {k: rows[k][6] for k in rows if k not in vec_hits}
            vec_hits.update(self.vectors.cosine(qvec, missing))  # type: ignore[arg-type]
        # Keyword side: IDF-weighted share of the query's terms in each candidate, calibrated.
        weights = self.store.term_weights(qterms) if use_text else {}
        idents_q = identifier_tokens(query.text)
        ident_patterns = [token_pattern(t) for t in idents_q]
        chunk_terms = self._chunk_terms(rows)
        text_hits: dict[int, float] = {}
        exact: set[int] = set()
        idents: set[int] = set()
        scored = rows if (use_vec and hybrid["enabled"]) or not use_vec else {}
        for k in scored:
            ident = bool(ident_patterns) and any(p.search(fold(rows[k][5])) for p in ident_patterns)
            cov = analysis.coverage(chunk_terms[k], weights)
            if ident:
                idents.add(k)
            if ident or cov >= 1.0 - 1e-9:
                exact.add(k)
            if cov > 0 or k in keyword_ids:
                text_hits[k] = analysis.keyword_probability(cov)
        cal = self.calibration()
        vec_p = {k: cal.probability(v) for k, v in vec_hits.items()}
        if not use_vec:
            mode, scores = "fts-only", {k: v for k, v in text_hits.items() if v > 0}
        elif not hybrid["enabled"]:
            mode, scores = "vector", dict(vec_p)
        else:
            mode = "hybrid"
            scores = self._fuse(vec_p, text_hits, exact, has_identifier=bool(idents_q))
        mtimes = self.store.file_mtimes({r[1] for r in rows.values()})
        if hybrid["fusion"] == "rrf" and mode == "hybrid":
            ordered = sorted(scores.items(), key=lambda kv: -kv[1])  # stable: RRF order among equal scores
        else:
            # Equal scores (say, every chunk holding all query words) keep the keyword ranking's order.
            krank = {k: i for i, (k, _) in enumerate(ranked)}
            ordered = sorted(scores.items(), key=lambda kv: (-kv[1], krank.get(kv[0], len(krank)), kv[0]))
        candidates = tuple(
            Candidate(id=rows[k][0], path=rows[k][1], source=rows[k][2], start_line=rows[k][3], end_line=rows[k][4],
                      text=rows[k][5], score=score, vector_score=vec_p.get(k), text_score=text_hits.get(k),
                      mtime=mtimes.get(rows[k][1]), identifier_match=k in idents)
            for k, score in ordered
        )
        return BackendResult(candidates=candidates, mode=mode, provider=provider.id if provider else "none",
                             model=provider.model if provider else None, fallback=self.choice.fallback)

    def _chunk_terms(self, rows: dict[int, Any]) -> dict[int, frozenset[str]]:
        """Index terms of each candidate chunk, cached by rowid for the current index generation."""
        gen = self.store.generation()
        if self._terms_gen != gen:
            self._terms_cache.clear()
            self._terms_gen = gen
        cache = self._terms_cache
        out = {}
        for k, row in rows.items():
            got = cache.get(k)
            if got is None:
                got = frozenset(analysis.terms(row[5]))
                if len(cache) >= TERMS_CACHE_MAX:
                    cache.clear()
                cache[k] = got
            out[k] = got
        return out

    def calibration(self) -> ScoreCalibration:
        """The active provider's declared cosine calibration (the documented default when it declares none)."""
        provider = self.choice.provider
        if provider is None:
            return DEFAULT_CALIBRATION
        plugins = self.indexer.plugins
        spec = plugins.providers.get(provider.id) if plugins is not None else None
        return spec.calibration_for(provider.model) if spec is not None else DEFAULT_CALIBRATION

    def _candidate_rows(self, ranked: list[tuple[int, float]], vec_hits: dict[int, float], limit: int,
                        sources: tuple[str, ...]) -> tuple[dict[int, Any], list[int]]:
        """Chunk rows of the vector hits and of the first ``limit`` keyword hits from ``sources``."""
        rows = {k: r for k, r in self.store.chunk_rows(list(vec_hits) + [k for k, _ in ranked[:limit]]).items()
                if r[2] in sources}
        keyword_ids = [k for k, _ in ranked[:limit] if k in rows]
        if len(keyword_ids) < limit and len(ranked) > limit:
            # Other sources took some of the top places: look further down the keyword ranking.
            extra = self.store.chunk_rows([k for k, _ in ranked[limit:]])
            for k, _ in ranked[limit:]:
                if len(keyword_ids) >= limit:
                    break
                if k in extra and extra[k][2] in sources:
                    rows[k] = extra[k]
                    keyword_ids.append(k)
        return rows, keyword_ids

    def _fuse(self, vec_p: dict[int, float], text_p: dict[int, float], exact: set[int], *,
              has_identifier: bool) -> dict[int, float]:
        hybrid = self.agent.memory_search["query"]["hybrid"]
        vw, tw = query_weights(hybrid["vectorWeight"], hybrid["textWeight"], has_identifier=has_identifier)
        if hybrid["fusion"] == "rrf":
            return fuse_rrf(vec_p, text_p, k=hybrid["rrfK"], vector_weight=vw, text_weight=tw, exact=exact)
        return fuse_weighted(vec_p, text_p, vector_weight=vw, text_weight=tw, exact=exact)

    # ----------------------------------------------------------------- other

    def read_file(self, path: str, *, from_line: int | None = None, lines: int | None = None) -> ReadResult:
        rules = PathRules.from_workspace(self.agent.workspace, self.agent.memory_search.get("extraPaths") or [])
        return rules.read(path, from_line=from_line, lines=lines)

    def status(self) -> dict[str, Any]:
        ms = self.agent.memory_search
        counts = self.store.counts()
        p = self.choice.provider
        cache = ms["cache"]
        dirty = self.scheduler.dirty if self.scheduler else None
        if dirty is None or not dirty:
            dirty = self.is_stale()
        return {
            "backend": self.short_name,
            "plugin": self.plugin_name,
            "files": counts["files"],
            "chunks": counts["chunks"],
            "dirty": dirty,
            "pendingFiles": self.store.pending_count(),
            "workspaceDir": str(self.agent.workspace),
            "dbPath": str(self.store.path),
            "provider": p.id if p else "none",
            "model": p.model if p else None,
            "requestedProvider": self.choice.requested,
            "providerReason": self.choice.reason,
            "sources": list(ms.get("sources") or []),
            "extraPaths": list(ms.get("extraPaths") or []),
            "sourceCounts": counts["sourceCounts"],
            "invalidUtf8Files": counts["invalidUtf8Files"],
            "skipped": counts["skipped"],
            "cache": {"enabled": cache["enabled"], "entries": counts["cacheEntries"], "maxEntries": cache["maxEntries"]},
            "fts": {"enabled": True, "available": self.store.fts_error is None, "error": self.store.fts_error},
            "vector": {
                "enabled": ms["store"]["vector"]["enabled"],
                "available": self.store.vec.available,
                "extensionPath": self.store.vec.path,
                "loadError": self.store.vec.error,
                "dims": self.store.vec_dims or self._dims(),
                **{f"exact{k.title()}": v for k, v in self.vectors.status().items()},
            },
            "fallback": self.choice.fallback.to_dict() if self.choice.fallback else None,
            "batch": {"enabled": _batch_enabled(ms), **self._batch_status()},
            "lastError": self.indexer.last_error,
        }

    def _batch_status(self) -> dict[str, Any]:
        p = self.choice.provider
        return dict(p.batch_status()) if isinstance(p, BatchingProvider) else {}

    def _dims(self) -> int | None:
        row = self.store._read("SELECT length(embedding) / 4 FROM chunks WHERE embedding IS NOT NULL LIMIT 1").fetchone()
        return int(row[0]) if row else None

    def close(self) -> None:
        # Stop a running sync at its next file first, then the threads, then wait for the sync,
        # so nothing is closed under it.
        self._closing = True
        self.indexer.cancel.set()
        if self.scheduler:
            self.scheduler.stop()
        with self._sync_lock:
            pass
        if self.choice.provider is not None:
            self.choice.provider.close()
        if isinstance(self.vectors, Closeable):  # a vector side with its own files (faiss) saves them here
            self.vectors.close()
        self.store.close()


def _batch_enabled(ms: Any) -> bool:
    """``memorySearch.remote.batch.enabled``; the section is the remote plugin's, absent when it is disabled."""
    return bool(((ms.get("remote") or {}).get("batch") or {}).get("enabled", False))


def assemble_backend(ctx: Any, make_vectors: Callable[[IndexStore], VectorSide], *, short_name: str,
                     plugin_name: str) -> IndexedBackend:
    """Build an :class:`IndexedBackend` for ``ctx`` (a BackendContext) with the given vector side.

    The one assembly both SQLite-based backends share: open the store, build
    the vector side over it, choose the embedding provider. Whatever was
    opened is closed again if a later step fails.
    """
    vec = ctx.agent.memory_search["store"]["vector"]
    store = IndexStore.open(ctx.agent.store_path, vector_enabled=vec["enabled"], extension_path=vec["extensionPath"])
    vectors: VectorSide | None = None
    try:
        vectors = make_vectors(store)
        choice = ctx.services.choose_provider()
    except BaseException:
        if isinstance(vectors, Closeable):
            vectors.close()
        store.close()
        raise
    indexer = Indexer(store=store, agent=ctx.agent, choice=choice, plugins=ctx.services.plugins,
                      models=ctx.config.data.get("models") or {})
    return IndexedBackend(agent=ctx.agent, store=store, choice=choice, indexer=indexer, vectors=vectors,
                          short_name=short_name, plugin_name=plugin_name)
