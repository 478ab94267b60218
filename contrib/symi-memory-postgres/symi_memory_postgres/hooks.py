"""The plugin's entry point: the ``postgres`` backend registration and its config defaults.

Cheap to import: psycopg is imported by the factory only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from symi_memory import hookimpl
from symi_memory.specs import BackendContext, BackendSpec

__all__ = ["DEFAULTS", "symi_memory_config_defaults", "symi_memory_register_backends"]

DEFAULTS: dict[str, Any] = {
    # libpq connection string or URL; empty means the SYMI_PG_DSN environment variable.
    "dsn": "",
    # The PostgreSQL schema holding the tables (created on first use).
    "schema": "symi_memory",
    # The id rows are scoped by; empty means the agent id. Unique per agent across the fleet.
    "agentId": "",
    "poolSize": 4,
    "connectTimeout": 5.0,
    "hnsw": {"m": 16, "efConstruction": 64, "efSearch": 100},
    # Shared scopes this agent reads and syncs: scope NAME is the folder <root>/NAME (MEMORY.md + memory/).
    "scopes": {"shared": [], "root": ""},
}


def _create(ctx: BackendContext) -> Any:
    from .backend import create_backend

    return create_backend(ctx)


@hookimpl
def symi_memory_register_backends(register: Callable[[Any], None]) -> None:
    """Register the ``postgres`` backend."""
    register(BackendSpec(name="postgres", short_name="postgres", factory=_create,
                         description="PostgreSQL + pgvector (tsvector keyword side, HNSW vectors), shared by many agents."))


@hookimpl
def symi_memory_config_defaults() -> dict[str, Any]:
    """Make ``memorySearch.store.postgres.*`` known keys (per agent, like every memorySearch key)."""
    import copy

    return {"agents": {"defaults": {"memorySearch": {"store": {"postgres": copy.deepcopy(DEFAULTS)}}}}}
