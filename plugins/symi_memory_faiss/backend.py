"""faiss: the shared SQLite index (chunks, FTS5, cache, sync) with a faiss vector side."""

from __future__ import annotations

from typing import Any

from symi_memory.errors import BackendError
from symi_memory.specs import BackendContext

__all__ = ["create_backend"]

INSTALL_HINT = 'the faiss backend needs faiss-cpu: pip install "symi-memory[faiss]" (or set plugins.slots.memory = "builtin-sqlite")'


def create_backend(ctx: BackendContext) -> Any:
    try:
        import faiss
        import numpy  # noqa: F401
    except ImportError as exc:
        raise BackendError(f"{INSTALL_HINT} ({exc})") from None
    from symi_memory.index.backend import assemble_backend

    from .settings import FaissSettings
    from .vectors import FaissVectors

    ms = ctx.agent.memory_search
    settings = FaissSettings.from_memory_search(ms)
    if settings.threads > 0:
        faiss.omp_set_num_threads(settings.threads)

    def make_vectors(store: Any) -> FaissVectors:
        vectors = FaissVectors(store, settings)
        vectors.open()
        return vectors

    return assemble_backend(ctx, make_vectors)
