"""The supersession processor's per-chunk facts answer as the rules they stand in for (issue 16 speed work)."""

from __future__ import annotations

import itertools
from pathlib import Path

from symi_memory.supersession import focus_lines, salient, split_lines
from symi_memory_postprocess.supersede import _facts

DEVMEM = Path(__file__).resolve().parents[1] / "bench" / "datasets" / "devmem"


def test_the_focus_lines_through_the_term_index_are_those_of_focus_lines() -> None:
    # Every chunk-sized piece of the dev set's notes, against queries made of their own words: ties (two lines
    # sharing as many query terms) must keep focus_lines' order, and a chunk no query word is on gives its first lines.
    notes = sorted((DEVMEM / "workspace").rglob("*.md"))[:40]
    assert notes
    checked = 0
    for note in notes:
        text = note.read_text(encoding="utf-8")
        lines = split_lines(str(note.name), 1, text, None)
        facts = _facts(lines)
        words = sorted({t for ln in lines for t in ln.terms})
        queries = [frozenset(), salient("unrelated zebra xylophone")]
        queries += [frozenset(c) for c in itertools.islice(itertools.combinations(words[::7], 3), 12)]
        queries += [ln.terms for ln in lines[:5]]
        for q in queries:
            assert facts.focus(q) == focus_lines(lines, q)
            checked += 1
    assert checked > 200


def test_the_facts_are_kept_per_lines_list_and_follow_a_new_list() -> None:
    lines = split_lines("memory/2026-03-01.md", 1, "Sold the hatchback; now a red SUV.\nThe car is 4.2 m long.", None)
    assert _facts(lines) is _facts(lines)
    other = split_lines("memory/2026-03-02.md", 1, "The car is a blue hatchback.", None)
    assert _facts(other).lines is other
    assert _facts(lines).movers and not _facts(other).movers  # "Sold the hatchback" names a thing gone
    assert _facts(lines).kinds == frozenset({"9.9 m"}) and not _facts(other).kinds
