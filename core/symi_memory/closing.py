"""Closing what a plugin built (a provider, a reranker): the :class:`~symi_memory.specs.Closeable` rule."""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["close_plugin_object"]

log = logging.getLogger("symi_memory.plugins")


def close_plugin_object(obj: Any, what: str) -> None:
    """Call ``obj.close()`` when it defines one; an error it raises is logged, never raised.

    A plugin's object need not define ``close`` (``Closeable`` is optional), and one whose ``close`` fails
    must not keep the core from closing the rest (the index, the other objects) or end a command with a
    traceback after it answered. ``what`` names the object in the warning (``reranker 'x'``).
    """
    close = getattr(obj, "close", None)
    if not callable(close):
        return
    try:
        close()
    except Exception as exc:
        log.warning("%s: close() raised %s: %s; ignored", what, type(exc).__name__, exc)
