"""The SQLite index shared by the SQLite-based backends (builtin-sqlite, faiss).

Files, chunks, meta, the embedding cache and the FTS5 keyword index live in
one SQLite file per agent (opened with apsw, which can load extensions).
Backends differ only in their vector side.

The engine pieces a backend may reuse, under documented names (imported on
first use, so importing this package stays cheap):

- :func:`assemble_backend` / :class:`IndexedBackend`: a whole backend over the
  index around a :class:`~symi_memory.specs.VectorSide` of your own;
- :class:`Indexer`: sync, bringing the index up to date with the files;
- :class:`IndexStore`: the chunk store (files, chunks, FTS, vectors, cache, meta);
- :class:`ExactVectors`: the exact vector scan.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["ExactVectors", "IndexStore", "IndexedBackend", "Indexer", "assemble_backend"]

_WHERE = {"ExactVectors": "vectors", "IndexStore": "store", "IndexedBackend": "backend", "Indexer": "indexer",
          "assemble_backend": "backend"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
