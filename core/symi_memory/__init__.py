"""symi-memory: durable, searchable memory for AI agents."""

from __future__ import annotations

from .hookspecs import hookimpl

__all__ = ["hookimpl"]
__version__ = "0.1.0"
