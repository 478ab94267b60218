"""The plugin's entry point: the ``postgres`` backend registration and its config defaults.

Cheap to import: psycopg is imported by the factory only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from symi_memory import hookimpl
from symi_memory.specs import BackendContext, BackendSpec, ConfigSection

__all__ = ["symi_memory_register_backends", "symi_memory_register_config_sections"]


def _create(ctx: BackendContext) -> Any:
    from .backend import create_backend

    return create_backend(ctx)


@hookimpl
def symi_memory_register_backends(register: Callable[[Any], None]) -> None:
    """Register the ``postgres`` backend."""
    register(BackendSpec(name="postgres", short_name="postgres", factory=_create,
                         description="PostgreSQL + pgvector (tsvector keyword side, HNSW vectors), shared by many agents."))


@hookimpl
def symi_memory_register_config_sections(register: Callable[[Any], None]) -> None:
    """``memorySearch.store.postgres.*``: per agent, like every memorySearch key."""
    from .config_schema import PostgresSettings

    register(ConfigSection(key="agents.defaults.memorySearch.store.postgres", model=PostgresSettings,
                           doc="Settings of the postgres backend (plugin postgres, contrib/symi-memory-postgres)."))
