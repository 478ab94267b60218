"""The agent tools: ``memory_search``, ``memory_get`` (and ``memory_append``).

Each tool takes the raw parameter dict an agent produced and returns the
JSON-ready dict of spec/behaviour.md §5. Tools never raise for bad input or
a failing backend: they return the error shape, so one bad call never ends
an agent's turn.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import append_tool
from .append_tool import MEMORY_APPEND_DEFINITION
from .config.fields import fields_by_key
from .config.schema import Query
from .errors import PathRefused, SymiMemoryError

if TYPE_CHECKING:
    from .manager import MemoryManager

__all__ = [
    "MEMORY_DISABLED",
    "MEMORY_RECALL_PROMPT",
    "recall_prompt",
    "TOOL_DEFINITIONS",
    "anthropic_tools",
    "memory_append",
    "memory_get",
    "memory_search",
    "openai_tools",
]

log = logging.getLogger("symi_memory.tools")

# The defaults the descriptions name are the config's own (a model takes "usually N" at its word).
_QUERY_DEFAULTS = {key: field.default for key, field in fields_by_key(Query).items()}

TOOL_DEFINITIONS: list[dict[str, Any]] = [
    {
        "name": "memory_search",
        "description": (
            "Search the agent's long-term memory (MEMORY.md, memory/*.md daily logs and other indexed notes) "
            "by meaning and by exact keywords. Returns snippets with their file path and line range; use "
            "memory_get to read more around a hit. Search before answering questions about past work, "
            "decisions, preferences, people or dates. A hit with supersededBy is an older version of a fact: "
            "the memory it points to is newer and says what is current."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "What to look for, in natural language or exact tokens (IDs, names, error text)."},
                "maxResults": {"type": "integer", "minimum": 1, "maximum": 200, "description": f"How many snippets to return (default from config, usually {_QUERY_DEFAULTS['maxResults']})."},
                "minScore": {"type": "number", "minimum": 0, "maximum": 1, "description": (
                    "Drop results scoring below this. Scores are calibrated probabilities of relevance, so a "
                    f"useful hit may score well under 0.5 (default from config, usually {_QUERY_DEFAULTS['minScore']})."
                )},
                "asOf": {"type": "string", "description": "Answer as memory stood on this date (YYYY-MM-DD): later notes are left out."},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
    {
        "name": "memory_get",
        "description": (
            "Read a memory Markdown file, or a window of its lines, by the path memory_search returned "
            "(e.g. memory/2026-02-10.md). Only memory files can be read. A file that does not exist yet "
            "returns empty text."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": "Workspace-relative path such as MEMORY.md or memory/2026-02-10.md."},
                "from": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)."},
                "lines": {"type": "integer", "minimum": 1, "description": "How many lines to read."},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    },
    MEMORY_APPEND_DEFINITION,
]

MEMORY_DISABLED = (
    "memory is disabled (plugins.slots.memory = none or memorySearch.enabled = false); enable it in config"
)

MEMORY_RECALL_PROMPT = """## Memory Recall
You have long-term memory in Markdown files. Before answering anything about earlier work, decisions,
dates, people, preferences or to-dos: call memory_search first, then memory_get on the best hits to read
the exact lines you need. Prefer the newest note when notes disagree. If nothing relevant turns up, say
you checked memory and found nothing. When asked to remember something, write it down (memory_append).
"""


NO_CITATIONS_NOTE = (
    "Memory citations are off: do not cite memory file paths or line numbers in your replies; the paths in\n"
    "search results are only for memory_get.\n"
)


def recall_prompt(citations: str = "auto", session_key: str | None = None) -> str:
    """The "Memory Recall" system prompt section for ``memory.citations`` (and the session, for ``auto``).

    When results carry no ``Source:`` footer (citations off, or ``auto`` outside a direct chat) the
    section tells the agent not to cite paths either.
    """
    from .citations import should_cite

    if should_cite(citations, session_key):
        return MEMORY_RECALL_PROMPT
    return MEMORY_RECALL_PROMPT + NO_CITATIONS_NOTE


def openai_tools(definitions: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The definitions in OpenAI's function-calling format."""
    return [{"type": "function", "function": dict(d)} for d in (definitions or TOOL_DEFINITIONS)]


def anthropic_tools(definitions: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The definitions in Anthropic's tool format (``input_schema``)."""
    return [
        {"name": d["name"], "description": d["description"], "input_schema": d["parameters"]}
        for d in (definitions or TOOL_DEFINITIONS)
    ]


def _failure(what: str, exc: Exception) -> str:
    """The tool's error for an unexpected exception: the plugin whose code raised it, when one did."""
    from .plugins import plugin_failure

    return plugin_failure(what, exc)


def memory_search(manager: MemoryManager, params: Mapping[str, Any], *, session_key: str | None = None) -> dict[str, Any]:
    """Run the ``memory_search`` tool. Errors come back as ``{results: [], disabled: true, error}``."""
    try:
        if not isinstance(params, Mapping):
            raise ValueError("parameters must be an object with a query")
        query = params.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query required: pass a non-empty string")
        as_of = params.get("asOf")
        if as_of is not None and not isinstance(as_of, str):
            raise ValueError(f"asOf must be a date like 2026-04-01, got {as_of!r}")
        # The manager checks maxResults and minScore (symi_memory.arguments), as for every other caller.
        resp = manager.search(query, max_results=params.get("maxResults"), min_score=params.get("minScore"),
                              session_key=session_key, as_of=as_of)
        return resp.to_dict()
    except (SymiMemoryError, ValueError) as exc:
        return {"results": [], "disabled": True, "error": str(exc)}
    except Exception as exc:  # a tool must answer, whatever broke underneath
        log.exception("memory_search failed")
        return {"results": [], "disabled": True, "error": _failure("memory search", exc)}


def memory_get(manager: MemoryManager, params: Mapping[str, Any]) -> dict[str, Any]:
    """Run the ``memory_get`` tool. Errors come back as ``{path, text: "", disabled: true, error}``."""
    path = params.get("path") if isinstance(params, Mapping) else None
    try:
        if not isinstance(path, str) or not path.strip():
            raise PathRefused()
        return manager.read_file(path, from_line=params.get("from"), lines=params.get("lines")).to_dict()
    except (SymiMemoryError, ValueError) as exc:
        return {"path": path if isinstance(path, str) else "", "text": "", "disabled": True, "error": str(exc)}
    except Exception as exc:
        log.exception("memory_get failed")
        return {"path": path if isinstance(path, str) else "", "text": "", "disabled": True,
                "error": _failure("memory read", exc)}


def memory_append(manager: MemoryManager, params: Mapping[str, Any]) -> dict[str, Any]:
    """Run the ``memory_append`` tool on the manager's workspace (today's log or MEMORY.md), with dedup.

    With memory disabled nothing is written: the error shape says so. See
    :meth:`MemoryManager.append` for ``duplicateOf``/``supersedes``.
    """
    if not manager.enabled:
        return {"path": "", "bytesWritten": 0, "disabled": True, "error": MEMORY_DISABLED}
    text = params.get("text") if isinstance(params, Mapping) else None
    target = params.get("target") if isinstance(params, Mapping) else None
    target = "daily" if target is None else target  # not `or`: 0, "" and false are refused, not the daily log
    allow = params.get("allowDuplicate", False) if isinstance(params, Mapping) else False
    if not isinstance(text, str) or target not in ("daily", "long-term") or not isinstance(allow, bool):
        if not isinstance(allow, bool):
            return {"path": "", "bytesWritten": 0, "error": f"allowDuplicate must be true or false, got {allow!r}"}
        return append_tool.memory_append(manager.agent.workspace, params, tz=manager.agent.user_timezone)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate cannot be written as UTF-8: the plain tool answers with its error shape.
        return append_tool.memory_append(manager.agent.workspace, params, tz=manager.agent.user_timezone)
    try:
        return manager.append(text, target=target, allow_duplicate=allow)
    except SymiMemoryError as exc:
        log.info("memory_append refused: %s", exc)
        return {"path": "", "bytesWritten": 0, "error": str(exc)}
    except Exception as exc:  # a tool must answer, whatever broke underneath
        log.exception("memory_append failed")
        return {"path": "", "bytesWritten": 0, "error": _failure("memory append", exc)}
