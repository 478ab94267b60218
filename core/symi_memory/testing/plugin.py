"""The builtin ``testing`` plugin: the ``hash`` provider and the ``in-memory`` backend.

They are test fakes, so this module is not an entry point: a test suite
asks for it, either in process (``load_plugins(extra=[("testing", module)])``)
or for itself and its subprocesses through ``SYMI_MEMORY_PLUGINS`` (the
``symi_test_plugins`` fixture of :mod:`symi_memory.testing.pytest_plugin` sets
it for the duration of one test). Operators never see them in choices or errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..hookspecs import hookimpl
from ..specs import BackendSpec, ProviderSpec

PLUGIN_ID = "testing"


def _hash(ctx: Any) -> Any:
    from .fakes import HashEmbedder

    return HashEmbedder.from_context(ctx)


def _memory(ctx: Any) -> Any:
    from .fakes import InMemoryBackend

    return InMemoryBackend(ctx)



@hookimpl
def symi_memory_register_embedding_providers(register: Callable[[Any], None]) -> None:
    register(ProviderSpec(name="hash", factory=_hash, default_model="hash-384",
                          description="Deterministic feature-hashing embedder for tests (no model)."))


@hookimpl
def symi_memory_register_backends(register: Callable[[Any], None]) -> None:
    register(BackendSpec(name="in-memory", short_name="in-memory", factory=_memory,
                         description="Reference backend for tests: keyword overlap, nothing persisted."))
