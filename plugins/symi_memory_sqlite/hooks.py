"""Registers the default backend, ``builtin-sqlite`` (:data:`symi_memory.specs.DEFAULT_BACKEND`): apsw + FTS5 + sqlite-vec."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from symi_memory import hookimpl
from symi_memory.specs import DEFAULT_BACKEND, BackendContext, BackendSpec


def _create(ctx: BackendContext) -> Any:
    from .backend import create_backend

    return create_backend(ctx)


@hookimpl
def symi_memory_register_backends(register: Callable[[Any], None]) -> None:
    register(BackendSpec(name=DEFAULT_BACKEND, short_name="builtin", factory=_create,
                         description="SQLite index (FTS5 keyword + exact vectors, sqlite-vec accelerated)."))
