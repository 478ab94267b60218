"""Registers the ``faiss`` backend: the shared SQLite index with a faiss vector side.

Cheap to import: faiss and numpy are imported by the factory only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from symi_memory import hookimpl
from symi_memory.specs import BackendContext, BackendSpec


def _create(ctx: BackendContext) -> Any:
    from .backend import create_backend

    return create_backend(ctx)


@hookimpl
def symi_memory_register_backends(register: Callable[[Any], None]) -> None:
    register(BackendSpec(name="faiss", short_name="faiss", factory=_create,
                         description="SQLite index (FTS5 keyword side) with a faiss vector index (flat, HNSW or IVF)."))
