"""The builtin ``testing`` plugin: the ``hash`` provider and the ``in-memory`` backend.

They are test fakes, so they register only when ``SYMI_MEMORY_TESTING=1``
(the symi-memory pytest plugin sets it for test runs and their subprocesses;
benchmarks set it too). Operators never see them in choices or errors.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..hookspecs import hookimpl
from ..specs import BackendSpec, ProviderSpec

TESTING_ENV = "SYMI_MEMORY_TESTING"


def _hash(ctx: Any) -> Any:
    from .fakes import HashEmbedder

    return HashEmbedder.from_context(ctx)


def _memory(ctx: Any) -> Any:
    from .fakes import InMemoryBackend

    return InMemoryBackend(ctx)


def enabled() -> bool:
    return os.environ.get(TESTING_ENV, "").strip().lower() in ("1", "true", "yes")


@hookimpl
def symi_memory_register_embedding_providers(register: Callable[[Any], None]) -> None:
    if not enabled():
        return
    register(ProviderSpec(name="hash", factory=_hash, default_model="hash-384",
                          description="Deterministic feature-hashing embedder for tests (no model)."))


@hookimpl
def symi_memory_register_backends(register: Callable[[Any], None]) -> None:
    if not enabled():
        return
    register(BackendSpec(name="in-memory", short_name="in-memory", factory=_memory,
                         description="Reference backend for tests: keyword overlap, nothing persisted."))
