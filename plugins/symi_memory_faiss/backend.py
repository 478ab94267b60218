"""faiss: the shared SQLite index (chunks, FTS5, cache, sync) with a faiss vector side."""

from __future__ import annotations

from typing import Any

from symi_memory.errors import BackendError
from symi_memory.specs import BackendContext

__all__ = ["create_backend"]

INSTALL_HINT = 'the faiss backend needs faiss-cpu: pip install "symi-memory[faiss]" (or set plugins.slots.memory = "builtin-sqlite")'


def create_backend(ctx: BackendContext) -> Any:
    try:
        import faiss
        import numpy  # noqa: F401
    except ImportError as exc:
        raise BackendError(f"{INSTALL_HINT} ({exc})") from None
    from symi_memory.index.backend import IndexedBackend
    from symi_memory.index.indexer import Indexer
    from symi_memory.index.store import IndexStore

    from .settings import FaissSettings
    from .vectors import FaissVectors

    ms = ctx.agent.memory_search
    settings = FaissSettings.from_memory_search(ms)
    if settings.threads > 0:
        faiss.omp_set_num_threads(settings.threads)
    vec = ms["store"]["vector"]
    store = IndexStore.open(ctx.agent.store_path, vector_enabled=vec["enabled"], extension_path=vec["extensionPath"])
    vectors = FaissVectors(store, settings)
    vectors.open()
    choice = ctx.services.choose_provider()
    indexer = Indexer(store=store, agent=ctx.agent, choice=choice, plugins=ctx.services.plugins,
                      models=ctx.config.data.get("models") or {})
    return IndexedBackend(agent=ctx.agent, store=store, choice=choice, indexer=indexer, vectors=vectors,
                          short_name="faiss", plugin_name="faiss")
