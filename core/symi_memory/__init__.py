"""symi-memory: durable, searchable memory for AI agents.

Plain Markdown in the agent's workspace is the source of truth; an index
makes it searchable by keyword and by meaning.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .config import Config, load_config
    from .errors import ConfigError, SymiMemoryError
    from .hookspecs import hookimpl
    from .manager import MemoryManager, open_memory
    from .types import MemoryHit, ReadResult, SearchResponse, SyncReport

# Loaded on first use, so `symi-memory search` answered by a running server imports none of them.
_LAZY = {
    "Config": "config", "load_config": "config", "ConfigError": "errors", "SymiMemoryError": "errors",
    "hookimpl": "hookspecs", "MemoryManager": "manager", "open_memory": "manager", "MemoryHit": "types",
    "ReadResult": "types", "SearchResponse": "types", "SyncReport": "types",
}

__all__ = [
    "Config",
    "ConfigError",
    "MemoryHit",
    "MemoryManager",
    "ReadResult",
    "SearchResponse",
    "SymiMemoryError",
    "SyncReport",
    "hookimpl",
    "load_config",
    "open_memory",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'symi_memory' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
