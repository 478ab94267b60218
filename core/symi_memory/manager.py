"""The MemoryManager: one agent's memory behind whichever backend config selects."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import attrs

from .config import AgentView, Config, load_config
from .errors import SymiMemoryError
from .pipeline import Pipeline, to_hits
from .plugins import Plugins, load_plugins, resolve_backend_name
from .specs import BackendContext, MemoryBackend, ProviderUnavailable, RerankerContext, StartableBackend
from .types import ReadResult, SearchQuery, SearchResponse, SyncProgress, SyncReport

__all__ = ["MemoryManager", "Services", "open_memory"]

log = logging.getLogger("symi_memory.manager")


@attrs.define
class Services:
    """Core machinery handed to backend factories (``BackendContext.services``)."""

    plugins: Plugins
    config: Config
    agent: AgentView

    def choose_provider(self) -> Any:
        from .embedding import choose_provider

        return choose_provider(self.plugins, self.agent, self.config.data.get("models") or {})

    def create_backend(self, name: str) -> MemoryBackend:
        """Build another registered backend for the same agent (qmd uses this for its fallback)."""
        spec = self.plugins.backend(name)
        return spec.factory(BackendContext(config=self.config, agent=self.agent, services=self))


def _reranker(plugins: Plugins, config: Config, agent: AgentView) -> Any:
    rerank = agent.memory_search["query"]["rerank"]
    name = rerank.get("provider") or "none"
    if name == "none":
        return None
    spec = plugins.reranker(name)
    ctx = RerankerContext(settings=rerank, models=config.data.get("models") or {}, env=dict(os.environ),
                          model=rerank.get("model") or spec.default_model)
    try:
        return spec.factory(ctx)
    except ProviderUnavailable as exc:
        # A reranker is an optional refinement: without it, search still answers in fused order.
        log.warning("reranker %s unavailable (%s); searching without reranking", name, exc)
        return None


@attrs.define
class MemoryManager:
    """Thread-safe facade: search, read_file, sync, status, close."""

    config: Config
    agent: AgentView
    plugins: Plugins
    backend: MemoryBackend | None
    backend_name: str | None
    pipeline: Pipeline | None
    _closed: bool = False
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    @property
    def enabled(self) -> bool:
        return self.backend is not None

    def _require(self) -> MemoryBackend:
        if self._closed:
            raise SymiMemoryError("this memory manager is closed; open a new one with open_memory()")
        if self.backend is None:
            raise SymiMemoryError(
                "memory is disabled (plugins.slots.memory = none or memorySearch.enabled = false); enable it in config"
            )
        return self.backend

    def search(self, query: str, *, max_results: int | None = None, min_score: float | None = None,
               session_key: str | None = None, now: float | None = None) -> SearchResponse:
        """Search memory. Never waits for indexing."""
        backend = self._require()
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        q = self.agent.memory_search["query"]
        n = int(max_results if max_results is not None else q["maxResults"])
        if n < 1:
            raise ValueError(f"maxResults must be at least 1, got {n}")
        ms = float(min_score if min_score is not None else q["minScore"])
        ms = min(1.0, max(0.0, ms))
        mult = q["hybrid"]["candidateMultiplier"]
        sources = tuple(self.agent.memory_search.get("sources") or ["memory"])
        if not self.agent.memory_search["experimental"]["sessionMemory"]:
            sources = tuple(s for s in sources if s != "sessions") or ("memory",)
        sq = SearchQuery(text=query, max_results=n, min_score=ms, candidate_limit=min(200, max(1, n * mult)),
                         session_key=session_key, sources=sources)
        result = backend.search(sq)
        assert self.pipeline is not None
        floor = ms if result.calibrated else 0.0
        final = self.pipeline.run(query, result.candidates, max_results=n, min_score=floor, now=now)
        citations = self.config.data["memory"]["citations"]
        hits = to_hits(final, citations=citations, session_key=session_key)
        return SearchResponse(results=tuple(hits), mode=result.mode, provider=result.provider, model=result.model,
                              fallback=result.fallback, citations=citations)

    def read_file(self, path: str, *, from_line: int | None = None, lines: int | None = None) -> ReadResult:
        """``memory_get``: a safe, targeted read."""
        for name, value in (("from", from_line), ("lines", lines)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"{name} must be a whole number, got {value!r}")
        return self._require().read_file(path, from_line=from_line, lines=lines)

    def sync(self, *, reason: str = "manual", force: bool = False,
             progress: Callable[[SyncProgress], None] | None = None) -> SyncReport:
        """Bring the index up to date now (blocking)."""
        return self._require().sync(reason=reason, force=force, progress=progress)

    def status(self) -> dict[str, Any]:
        if self.backend is None:
            return {"backend": "none", "plugin": None, "enabled": False, "workspaceDir": str(self.agent.workspace)}
        return self._require().status()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self.backend is not None:
            self.backend.close()
        if self.pipeline is not None:
            self.pipeline.close()

    def __enter__(self) -> MemoryManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_memory(
    config: Config | str | os.PathLike[str] | None = None,
    *,
    agent_id: str = "main",
    workspace: str | os.PathLike[str] | None = None,
    state_dir: str | os.PathLike[str] | None = None,
    plugins: Iterable[tuple[str, object]] | Plugins | None = None,
    start: bool = True,
) -> MemoryManager:
    """Open one agent's memory with the backend config selects.

    ``config`` is a :class:`Config`, a path to a config file, or None (the
    documented lookup). ``plugins`` adds in-process plugins ``(id, obj)``.
    ``start=False`` skips the watcher and background syncs (one-shot tools).
    """
    if not isinstance(config, Config):
        config = load_config(config, state_dir=state_dir)
    elif state_dir is not None:
        config = attrs.evolve(config, state_dir=Path(state_dir).expanduser().resolve())
    if isinstance(plugins, Plugins):
        loaded = plugins
    elif plugins is None and config.plugins is not None:
        loaded = config.plugins
    else:
        loaded = load_plugins(config.data["plugins"]["disabled"], extra=plugins or ())
    agent = config.agent(agent_id, workspace=workspace)
    name = resolve_backend_name(config.data)
    if name is None or not agent.memory_search["enabled"]:
        return MemoryManager(config=config, agent=agent, plugins=loaded, backend=None, backend_name=None, pipeline=None)
    spec = loaded.backend(name)
    services = Services(plugins=loaded, config=config, agent=agent)
    pipeline = Pipeline.from_settings(loaded, agent.memory_search, _reranker(loaded, config, agent))
    try:
        backend = spec.factory(BackendContext(config=config, agent=agent, services=services))
    except BaseException:
        pipeline.close()
        raise
    if start and isinstance(backend, StartableBackend):
        backend.start()
    return MemoryManager(config=config, agent=agent, plugins=loaded, backend=backend, backend_name=name,
                         pipeline=pipeline)
