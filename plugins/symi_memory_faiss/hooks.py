"""Registers the ``faiss`` backend: the shared SQLite index with a faiss vector side.

Cheap to import: faiss and numpy are imported by the factory only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from symi_memory import hookimpl
from symi_memory.specs import BackendContext, BackendSpec, ConfigSection


def _create(ctx: BackendContext) -> Any:
    from .backend import create_backend

    return create_backend(ctx)


@hookimpl
def symi_memory_register_backends(register: Callable[[Any], None]) -> None:
    register(BackendSpec(name="faiss", short_name="faiss", factory=_create,
                         description="SQLite index (FTS5 keyword side) with a faiss vector index (flat, HNSW or IVF)."))


@hookimpl
def symi_memory_register_config_sections(register: Callable[[Any], None]) -> None:
    from .config_schema import FaissSettings

    register(ConfigSection(key="agents.defaults.memorySearch.store.faiss", model=FaissSettings, doc="Settings of the faiss backend (plugin faiss)."))
