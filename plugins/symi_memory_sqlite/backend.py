"""builtin-sqlite: the shared SQLite index with the exact numpy/sqlite-vec vector side."""

from __future__ import annotations

from typing import Any

from symi_memory.index.backend import IndexedBackend
from symi_memory.index.indexer import Indexer
from symi_memory.index.store import IndexStore
from symi_memory.index.vectors import ExactVectors
from symi_memory.specs import BackendContext

__all__ = ["create_backend"]


def open_store(ctx: BackendContext) -> IndexStore:
    vec = ctx.agent.memory_search["store"]["vector"]
    return IndexStore.open(ctx.agent.store_path, vector_enabled=vec["enabled"], extension_path=vec["extensionPath"])


def create_backend(ctx: BackendContext) -> Any:
    store = open_store(ctx)
    choice = ctx.services.choose_provider()
    indexer = Indexer(store=store, agent=ctx.agent, choice=choice, plugins=ctx.services.plugins,
                      models=ctx.config.data.get("models") or {})
    return IndexedBackend(agent=ctx.agent, store=store, choice=choice, indexer=indexer, vectors=ExactVectors(store),
                          short_name="builtin", plugin_name="builtin-sqlite")
