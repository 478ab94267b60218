"""Citation rules for ``memory_search`` snippets (behaviour §5).

``memory.citations`` is ``off``, ``on`` or ``auto``; ``auto`` cites only in
direct chats, where the chat type comes from the session key.
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = [
    "CITATION_MODES",
    "ChatType",
    "apply_citation",
    "chat_type_from_session_key",
    "format_citation",
    "should_cite",
]

ChatType = Literal["direct", "group", "channel"]
CITATION_MODES = ("auto", "on", "off")

_AGENT_PREFIX = re.compile(r"^agent:[^:]*:", re.IGNORECASE)


def chat_type_from_session_key(session_key: str | None) -> ChatType:
    """Derive the chat type from a session key such as ``agent:main:discord:group:42``.

    The ``agent:<id>:`` prefix is ignored; any ``channel`` token makes it a
    channel, else any ``group`` token a group, else it is direct. No key
    (or a blank one) counts as direct: that is the agent's own private session.
    """
    if not session_key or not session_key.strip():
        return "direct"
    rest = _AGENT_PREFIX.sub("", session_key.strip().lower(), count=1)
    tokens = set(rest.split(":"))
    if "channel" in tokens:
        return "channel"
    if "group" in tokens:
        return "group"
    return "direct"


def should_cite(mode: str | None, session_key: str | None = None) -> bool:
    """Tell whether search snippets get a ``Source:`` line.

    ``mode`` is ``memory.citations``; ``None`` means the default ``auto``.
    An unknown mode raises ``ValueError`` naming the allowed values.
    """
    value = (mode or "auto").strip().lower()
    if value == "off":
        return False
    if value == "on":
        return True
    if value == "auto":
        return chat_type_from_session_key(session_key) == "direct"
    raise ValueError(
        f"memory.citations: {mode!r} is not a citation mode; use one of {', '.join(CITATION_MODES)}"
    )


def format_citation(path: str, start_line: int, end_line: int | None = None) -> str:
    """Return ``path#L5`` for one line or ``path#L5-L7`` for a range."""
    end = start_line if end_line is None else end_line
    if end <= start_line:
        return f"{path}#L{start_line}"
    return f"{path}#L{start_line}-L{end}"


def apply_citation(snippet: str, citation: str) -> str:
    """Append the citation to a snippet: ``trim(snippet) + "\\n\\nSource: " + citation``."""
    return f"{snippet.strip()}\n\nSource: {citation}"
