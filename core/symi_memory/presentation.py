"""What the agent sees of a search: snippets, citation footers and the injected-text budget.

One place for every backend: a backend returns full candidate texts (and,
optionally, a :class:`~symi_memory.types.SnippetBudget` of its own, as qmd's
``memory.qmd.limits``); the core cuts the snippets and counts the budget here.
"""

from __future__ import annotations

from collections.abc import Sequence

from .citations import apply_citation, format_citation, should_cite
from .types import SNIPPET_MAX_CHARS, Candidate, MemoryHit, SnippetBudget, truncate_chars

__all__ = ["DEFAULT_BUDGET", "FOOTER", "present"]

#: What :func:`symi_memory.citations.apply_citation` puts between a snippet and its citation.
FOOTER = "\n\nSource: "
DEFAULT_BUDGET = SnippetBudget()


def present(candidates: Sequence[Candidate], *, citations: str, session_key: str | None,
            budget: SnippetBudget | None = None) -> list[MemoryHit]:
    """Turn final candidates into tool hits: snippet, citation where wanted, within the budget.

    Each snippet is the candidate's text cut to ``budget.max_snippet_chars``
    (at most :data:`~symi_memory.types.SNIPPET_MAX_CHARS`). With
    ``budget.max_injected_chars`` set, the total the agent sees (each trimmed
    snippet plus its ``Source:`` footer when citations apply) stays within it:
    the first hit that does not fit is cut to the room left (if any text
    fits) and the rest are left out.
    """
    budget = budget or DEFAULT_BUDGET
    cite = should_cite(citations, session_key)
    limit = max(0, min(SNIPPET_MAX_CHARS, budget.max_snippet_chars))
    total = budget.max_injected_chars
    used = 0
    hits = []
    for c in candidates:
        snippet = truncate_chars(c.text, limit)
        citation = format_citation(c.path, c.start_line, c.end_line)
        last = False
        if total is not None:
            snippet = snippet.strip()
            footer = len(FOOTER) + len(citation) if cite else 0
            room = total - used - footer
            if room <= 0:
                break
            if len(snippet) > room:
                snippet, last = snippet[:room].rstrip(), True
                if not snippet:
                    break
            used += len(snippet) + footer
        if cite:
            snippet = apply_citation(snippet, citation)
        hits.append(MemoryHit(path=c.path, start_line=c.start_line, end_line=c.end_line, score=c.score,
                              snippet=snippet, source=c.source, citation=citation if cite else None,
                              superseded_by=c.superseded_by, supersedes=c.supersedes))
        if last:
            break
    return hits
