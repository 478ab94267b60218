"""Entry point of the ``qmd-sidecar`` plugin: registers the qmd backend.

Kept cheap to import: the implementation loads only when the backend is made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from symi_memory import hookimpl
from symi_memory.specs import BackendServices, BackendSpec, ConfigSection

if TYPE_CHECKING:
    from symi_memory.specs import BackendContext, MemoryBackend

__all__ = ["create_backend", "symi_memory_register_backends"]


def create_backend(ctx: BackendContext) -> MemoryBackend:
    """Build a :class:`~symi_memory_qmd.backend.QmdBackend` from the core's context."""
    from .backend import FALLBACK_BACKEND, QmdBackend
    from .settings import QmdSettings

    config, agent, services = ctx.config, ctx.agent, ctx.services
    section = config.get("memory.qmd")
    fallback: Callable[[], Any] | None = (
        (lambda: services.create_backend(FALLBACK_BACKEND)) if isinstance(services, BackendServices) else None
    )
    return QmdBackend(
        QmdSettings.from_config(section),
        agent_id=agent.id,
        workspace=agent.workspace,
        state_dir=agent.state_dir,
        extra_paths=list(agent.memory_search.get("extraPaths") or []),
        fallback_factory=fallback,
        max_transcript_bytes=int(agent.memory_search["sync"]["maxFileBytes"]),
        start=False,  # the manager calls start(); one-shot tools never arm timers
    )


@hookimpl
def symi_memory_register_backends(register: Callable[[Any], None]) -> None:
    """Register ``qmd-sidecar`` (short name ``qmd``)."""
    register(
        BackendSpec(
            name="qmd-sidecar",
            short_name="qmd",
            factory=create_backend,
            description="Retrieval by the qmd CLI (BM25/vector/rerank) in a private home; falls back to builtin-sqlite.",
        )
    )


@hookimpl
def symi_memory_register_config_sections(register: Callable[[Any], None]) -> None:
    from .config_schema import QmdSection

    register(ConfigSection(key="memory.qmd", model=QmdSection, doc="The qmd sidecar backend (plugin qmd-sidecar)."))
