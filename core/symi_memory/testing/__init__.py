"""Test support for symi-memory and for plugin authors.

- :class:`HashEmbedder`: a deterministic embedder (no model, no network).
- :class:`InMemoryBackend`: a tiny reference backend.
- ``symi_memory.testing.conformance``: the backend conformance suite, run by
  ``pytest --symi-backend NAME`` (see docs/plugin-authors.md).

Both fakes are registered by the builtin ``testing`` plugin under the names
``hash`` (provider) and ``in-memory`` (backend); neither is ever auto-selected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .fakes import HashEmbedder, InMemoryBackend

__all__ = ["HashEmbedder", "InMemoryBackend"]


def __getattr__(name: str) -> Any:
    # Importing the package (the pytest plugin, the conformance suite) does not load the fakes until used.
    if name in __all__:
        from . import fakes

        return getattr(fakes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
