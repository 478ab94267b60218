"""What the agent is shown of a search, the same for every backend: snippets, citations, the budget."""

from __future__ import annotations

from symi_memory.presentation import present
from symi_memory.types import SNIPPET_MAX_CHARS, Candidate, SnippetBudget


def _cand(path: str, text: str, start: int = 5, end: int = 7) -> Candidate:
    return Candidate(id=path, path=path, start_line=start, end_line=end, score=0.5, text=text)


def test_default_budget_caps_each_snippet_and_cites_in_direct_chats() -> None:
    hits = present([_cand("memory/a.md", "a" * 900)], citations="auto", session_key=None)
    assert hits[0].snippet == "a" * SNIPPET_MAX_CHARS + "\n\nSource: memory/a.md#L5-L7"
    assert hits[0].citation == "memory/a.md#L5-L7"
    group = present([_cand("memory/a.md", "a" * 900)], citations="auto", session_key="agent:main:discord:group:1")
    assert group[0].snippet == "a" * SNIPPET_MAX_CHARS and group[0].citation is None


def test_default_budget_has_no_total_cap() -> None:
    cands = [_cand(f"memory/{i}.md", "x" * 900) for i in range(20)]
    hits = present(cands, citations="off", session_key=None)
    assert len(hits) == 20 and all(len(h.snippet) == SNIPPET_MAX_CHARS for h in hits)


def test_injected_budget_counts_the_citation_footer() -> None:
    cands = [_cand("memory/a.md", "a" * 100), _cand("memory/b.md", "b" * 100), _cand("memory/c.md", "c" * 100)]
    footer = len("\n\nSource: memory/a.md#L5-L7")
    budget = SnippetBudget(max_snippet_chars=700, max_injected_chars=2 * (100 + footer) + 10)
    hits = present(cands, citations="on", session_key=None, budget=budget)
    assert [h.path for h in hits] == ["memory/a.md", "memory/b.md"]
    assert sum(len(h.snippet) for h in hits) <= 2 * (100 + footer) + 10
    # Without citations the same budget fits a cut third snippet, and nothing after it.
    hits = present([*cands, _cand("memory/d.md", "d")], citations="off", session_key=None, budget=budget)
    assert [len(h.snippet) for h in hits] == [100, 100, 2 * footer + 10]


def test_snippet_cap_of_a_backend_budget_never_exceeds_the_core_cap() -> None:
    cands = [_cand(f"memory/{i}.md", "  " + "x" * 900) for i in range(3)]
    small = present(cands, citations="off", session_key=None, budget=SnippetBudget(max_snippet_chars=50))
    assert all(len(h.snippet) == 50 for h in small)
    big = present(cands, citations="off", session_key=None,
                  budget=SnippetBudget(max_snippet_chars=5000, max_injected_chars=100_000))
    # Trimmed, then capped at the core's 700: a backend cannot widen what the agent is shown.
    assert all(len(h.snippet) <= SNIPPET_MAX_CHARS and not h.snippet.startswith(" ") for h in big)


def test_hits_are_the_records_their_fields_make_with_and_without_citations() -> None:
    # Each hit is the MemoryHit of its candidate, every field (a superseded hit's links included), one per candidate.
    import attrs

    from symi_memory.types import MemoryHit

    by = {"path": "memory/b.md", "startLine": 3, "endLine": 3}
    cands = [attrs.evolve(_cand("memory/a.md", "  alpha  ", 2, 2), score=0.9, superseded_by=by),
             attrs.evolve(_cand("sessions/s.jsonl", "beta", 4, 9), source="sessions", score=0.4,
                          supersedes=({"path": "memory/c.md", "startLine": 1, "endLine": 1},))]
    for mode, cited in (("on", True), ("off", False)):
        hits = present(cands, citations=mode, session_key=None)
        want = [MemoryHit(path=c.path, start_line=c.start_line, end_line=c.end_line, score=c.score,
                          snippet=(f"{c.text.strip()}\n\nSource: {c.path}#L{c.start_line}"
                                   + (f"-L{c.end_line}" if c.end_line > c.start_line else "")) if cited else c.text,
                          source=c.source, citation=(f"{c.path}#L{c.start_line}"
                                                     + (f"-L{c.end_line}" if c.end_line > c.start_line else ""))
                          if cited else None, superseded_by=c.superseded_by, supersedes=c.supersedes)
                for c in cands]
        assert hits == want and [repr(h) for h in hits] == [repr(h) for h in want]
        assert [h.to_dict() for h in hits] == [h.to_dict() for h in want]
        assert all(type(h) is MemoryHit for h in hits)
    assert present([], citations="on", session_key=None) == []
