"""The default backend: the shared SQLite index with the exact numpy/sqlite-vec vector side."""

from __future__ import annotations

from typing import Any

from symi_memory.index import ExactVectors, assemble_backend
from symi_memory.specs import BackendContext

__all__ = ["create_backend"]


def create_backend(ctx: BackendContext) -> Any:
    vec = ctx.agent.memory_search["store"]["vector"]
    scan, weight = vec.get("scan", "auto"), float(vec.get("unitWeight", 0.0))
    threads = int(vec.get("scanThreads", 1))
    return assemble_backend(ctx, lambda store: ExactVectors(store, scan=scan, unit_weight=weight,
                                                            scan_threads=threads))
