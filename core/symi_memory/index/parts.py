"""What the parts of :class:`~symi_memory.index.store.IndexStore` rely on: its connections and each other.

The store is one object made of parts (meta, writes, rebuild, cache, keyword
search, vector reads, chunk reads), each in its own module. A part is a
plain mixin over :class:`StoreParts`, which names, for the type checker
only, the fields and methods the facade and the other parts provide.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import contextlib

    import apsw

    from ..errors import BackendError
    from .db import VecExtension
    from .meta import Generation
    from .records import IndexChange

__all__ = ["StoreParts"]


class StoreParts:
    """The base of every part of the store (declarations only: the facade holds the state)."""

    if TYPE_CHECKING:
        path: Path
        conn: apsw.Connection
        vec: VecExtension
        fts_error: str | None
        vector_wanted: bool
        extension_path: str | None
        lock: threading.RLock
        vec_dims: int | None
        _local: threading.local
        listeners: list[Callable[[IndexChange], None]]
        _embedder_ids: dict[tuple[str, str, str], int]
        _embedder_ids_of: str | None
        _id_claim: threading.Thread | None

        def reader(self) -> apsw.Connection: ...
        def write(self) -> contextlib.AbstractContextManager[None]: ...
        def read_only_error(self, exc: object = None) -> BackendError: ...
        def _read(self, sql: str, params: Any = ()) -> Any: ...
        def generation(self) -> int: ...
        def generation_key(self) -> Generation: ...
        def generation_now(self) -> int: ...
        def index_id_now(self) -> str | None: ...
        def vector_dims(self) -> int | None: ...
        def vector_stats(self, dims: int) -> tuple[int, int]: ...
        def _chunk_count(self) -> int: ...
        def _notify(self, change: IndexChange) -> None: ...
        def _note_dims(self, dims: int) -> None: ...
        def _embedder(self, meta: dict[str, str] | None) -> int | None: ...
        def _embedder_id(self, provider: str, model: str, fingerprint: str, *, create: bool = True) -> int | None: ...
        def _forget_uncommitted(self, saved_dims: int | None) -> None: ...
        def _kept_analyses(self, conn: Any, path: str) -> dict[tuple[int, str], bytes]: ...
