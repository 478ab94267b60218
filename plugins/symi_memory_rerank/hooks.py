"""Registers the rerankers ``cohere``, ``voyage`` and ``jina`` (hosted ``/rerank`` APIs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from symi_memory import hookimpl
from symi_memory.specs import ConfigSection, RerankerContext, RerankerSpec

from .rerankers import APIS

__all__ = ["create_reranker", "symi_memory_register_rerankers"]


def create_reranker(name: str, ctx: RerankerContext, **options: Any) -> Any:
    """Build reranker ``name``; ``options`` (sleep, transport, rng) go to :class:`HttpReranker`."""
    from .rerankers import HttpReranker

    return HttpReranker(APIS[name], ctx, **options)


def _factory(name: str) -> Callable[[RerankerContext], Any]:
    def factory(ctx: RerankerContext) -> Any:
        return create_reranker(name, ctx)

    return factory


@hookimpl
def symi_memory_register_rerankers(register: Callable[[Any], None]) -> None:
    """Register one :class:`RerankerSpec` per hosted API."""
    for name, api in APIS.items():
        register(
            RerankerSpec(
                name=name,
                factory=_factory(name),
                default_model=api.default_model,
                description=f"{api.label} rerank API ({api.base_url}/rerank)",
            )
        )


@hookimpl
def symi_memory_register_config_sections(register: Callable[[Any], None]) -> None:
    from .config_schema import RerankApi

    register(ConfigSection(key="agents.defaults.memorySearch.query.rerank", model=RerankApi, doc=""))
