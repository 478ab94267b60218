"""symi-memory: durable, searchable memory for AI agents.

Plain Markdown in the agent's workspace is the source of truth; an index
makes it searchable by keyword and by meaning.
"""

from __future__ import annotations

from .config import Config
from .errors import ConfigError, SymiMemoryError
from .hookspecs import hookimpl
from .host import load_config
from .manager import MemoryManager, open_memory
from .types import MemoryHit, ReadResult, SearchResponse, SyncReport

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
