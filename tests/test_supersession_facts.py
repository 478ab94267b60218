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


def test_a_search_reading_the_facts_while_another_thread_builds_them_sees_the_whole_chunk() -> None:
    # serve runs searches in worker threads and the facts are shared: one thread asking for a chunk's focus lines
    # while another is still building its term index must not count the lines indexed so far (a query word on a
    # later line would be missed, and the chunk's first lines taken as found by meaning alone).
    import sys
    import threading

    text = "\n".join(f"- Filler line {n} about errand{n} and chore{n}." for n in range(20000))
    lines = split_lines("memory/2026-03-01.md", 1, text + "\n- The boiler is a Vaillant ecoTEC.", None)
    facts = _facts(lines)
    facts.focus(salient("chore3"))  # met once (answered by focus_lines): the next search builds the index
    assert facts._index is None
    query = salient("boiler Vaillant")
    got: list[list] = []

    def reader() -> None:
        while facts._index is None:  # the builder has not started yet
            pass
        got.append(facts.focus(query))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        t = threading.Thread(target=reader)
        t.start()
        facts.focus(salient("errand7"))
        t.join()
    finally:
        sys.setswitchinterval(old)
    assert got == [focus_lines(lines, query)]
    assert got[0][0].text.endswith("Vaillant ecoTEC.")
