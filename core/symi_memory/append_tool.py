"""The ``memory_append`` agent tool: validated params in, tool JSON out.

It wraps :func:`symi_memory.writing.append_memory` so an agent can write
memory without a general file-write tool. Errors come back as
``{path, bytesWritten: 0, error}`` rather than exceptions, like the other
memory tools.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from .errors import SymiMemoryError

__all__ = ["MEMORY_APPEND_DEFINITION", "memory_append"]

log = logging.getLogger("symi_memory.tools")

MEMORY_APPEND_DEFINITION: dict[str, Any] = {
    "name": "memory_append",
    "description": (
        "Append a note to memory. target 'daily' (default) appends to today's memory/YYYY-MM-DD.md "
        "for running context; 'long-term' appends to MEMORY.md for decisions, preferences and durable "
        "facts. Existing content is never changed. If memory already says the same thing, nothing is written and "
        "the answer names it (duplicateOf, appended: false); set allowDuplicate to write anyway. If the note "
        "changes a stored fact, it is written and the answer names the memory it supersedes."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "Markdown to append."},
            "target": {"type": "string", "enum": ["daily", "long-term"], "default": "daily"},
            "allowDuplicate": {"type": "boolean", "default": False,
                               "description": "Write even when memory already states this."},
        },
        "required": ["text"],
        "additionalProperties": False,
    },
}


def memory_append(
    workspace: str | Path,
    params: Mapping[str, Any],
    *,
    now: datetime | None = None,
    tz: str | None = None,
    access: str | None = None,
) -> dict[str, Any]:
    """Run the tool: ``{text, target?}`` → ``{path, bytesWritten}`` or ``{path: "", bytesWritten: 0, error}``."""
    text = params.get("text") if isinstance(params, Mapping) else None
    target = params.get("target", "daily") if isinstance(params, Mapping) else "daily"
    if not isinstance(text, str):
        return {"path": "", "bytesWritten": 0, "error": "text required (a string)"}
    if target is None:
        target = "daily"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return {
            "path": "",
            "bytesWritten": 0,
            "error": f"text must be valid Unicode: a lone surrogate at character {exc.start}; send UTF-8 text",
        }
    if target not in ("daily", "long-term"):
        return {
            "path": "",
            "bytesWritten": 0,
            "error": f"target must be 'daily' or 'long-term', got {target!r}",
        }
    from .writing import append_memory  # the writer (dates, time zones): only when something is written

    try:
        return append_memory(workspace, text, target=target, now=now, tz=tz, access=access).to_dict()
    except SymiMemoryError as exc:
        log.info("memory_append refused: %s", exc)
        return {"path": "", "bytesWritten": 0, "error": str(exc)}
    except Exception as exc:  # a tool must answer, whatever broke underneath
        log.warning("memory_append failed: %s: %s", type(exc).__name__, exc)
        return {"path": "", "bytesWritten": 0, "error": f"memory append failed: {type(exc).__name__}: {exc}"}
