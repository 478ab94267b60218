"""Same-thing detection at line level: quantities by kind, query-term weights, best lines (issue 16)."""

from __future__ import annotations

from symi_memory.supersession import best_lines, conflicting, quantities, salient, split_lines, term_weights


def test_quantities_are_grouped_by_shape_and_unit_and_dates_are_left_out() -> None:
    assert quantities("standup at 09:45, 15 minutes, since 2026-08-03") == {
        "9:9": frozenset({"09:45"}), "9 minutes": frozenset({"15"})}
    assert quantities("Biscuit weighs 13.6 kg; loaf at 76% hydration") == {
        "9.9 kg": frozenset({"13.6"}), "9 %": frozenset({"76"})}
    assert quantities("3 people came on 08-03") == {}


def test_conflict_needs_the_same_kind_with_no_shared_value() -> None:
    assert conflicting(quantities("fed 1:5:5 rye"), quantities("now feeding 1:10:10 spelt"))
    assert not conflicting(quantities("standup at 09:45"), quantities("standup at 09:45, lunch at 12:30"))
    assert not conflicting(quantities("weighs 13.6 kg"), quantities("ran 13.6 km"))


def test_a_term_on_every_chunk_weighs_least_and_does_not_pick_the_line() -> None:
    chunks = [split_lines(f"memory/2026-01-0{k}.md", 1, text, None) for k, text in enumerate((
        "Priya: allergic to penicillin.\nPriya: two migraines.",
        "Priya: one migraine since candesartan.",
        "Priya: ran 5K on Sunday."), start=1)]
    w = term_weights(salient("What is Priya allergic to?"), chunks)
    assert w["allergi"] > w["priya"] > 0
    assert [ln.line_no for ln in best_lines(chunks[0], w)] == [1]
