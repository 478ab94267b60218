"""Supersession through a note's dated past line, ratios as measured values, and one subject named two ways
(issue 16, branch ``stale16``). Held-out cases in original wording are in bench/supersession_heldout.py
(rules ``history``, ``measure`` and ``subject``)."""

from __future__ import annotations

from symi_memory.supersession import (
    THRESHOLDS,
    gives_new_measure,
    quantities,
    salient,
    same_thing,
    split_lines,
    term_weights,
)
from symi_memory.types import Candidate
from symi_memory_postprocess.supersede import find_supersessions


def test_a_ratio_is_a_measured_quantity_and_a_clock_time_is_not() -> None:
    assert quantities("- Fed the starter 1:4:4 at 08:30.") == {
        "9:9:9 ratio": frozenset({"1:4:4"}), "9:9": frozenset({"08:30"})}
    # A 1:1 meeting is not a time of day either.
    assert quantities("- 1:1 with Tamar at 11:00.") == {"9:9 ratio": frozenset({"1:1"}), "9:9": frozenset({"11:00"})}
    assert quantities("- Standup at 9:15, call at 10:32:05.") == {"9:9": frozenset({"9:15"}),
                                                                  "9:9:9": frozenset({"10:32:05"})}
    # A newer line giving another value of a measured quantity changes it, even when it names the old value too.
    assert gives_new_measure(quantities("mix 1:2:3"), quantities("now 1:3:3 instead of 1:2:3"))
    assert gives_new_measure(quantities("1000 IU a day"), quantities("raised from 1000 IU to 2000 IU"))
    assert not gives_new_measure(quantities("mix 1:2:3"), quantities("still 1:2:3"))
    # Clock times differ between any two events: not a measurement that changed.
    assert not gives_new_measure(quantities("standup at 09:45"), quantities("standup now at 10:00"))


HOUSE = ("- House internet: fibre from Glasnet, 500 Mbit/s.\n"
         "- Bins: paper on Tuesdays, plastic every other Thursday.\n"
         "{past}")
NEW_HEATING = "- The house heating is now a Daikin heat pump; the Vaillant gas boiler is gone."


def _heating(past: str) -> dict:  # type: ignore[type-arg]
    # An undated note (changed after the dated note, as its mtime says) whose current lines are about other things,
    # and whose past line is the one about the query, closest to it and to the dated note's line by meaning.
    old = Candidate(id="a", path="memory/house.md", start_line=3, end_line=5, score=0.8,
                    text=HOUSE.format(past=past), mtime=1.9e9)
    new = Candidate(id="b", path="memory/2026-04-11.md", start_line=3, end_line=3, score=0.7, text=NEW_HEATING)
    other, heating, to_query = [0.0, 0.0, 1.0], [0.8, 0.6, 0.0], [1.0, 0.0, 0.0]
    return find_supersessions([old, new], {"a": [0.7, 0.5, 0.5], "b": [0.6, 0.8, 0.0]},
                              "What heating does the house have?",
                              line_vectors={"a": [(3, 3, other), (4, 4, other), (5, 5, heating)],
                                            "b": [(3, 3, [0.6, 0.8, 0.0])]},
                              query_vector=to_query)


def test_a_dated_past_line_beside_current_lines_is_superseded_by_a_later_note() -> None:
    found = _heating("- Until 2026-04-10 the heating was an old Vaillant gas boiler.")
    assert list(found) == [0] and found[0][0] == 1 and found[0][1].line_no == 5
    # A past state with no date says nothing of when it held: the note is newer than the dated one, so it stays.
    assert _heating("- The heating was an old Vaillant gas boiler before.") == {}


def test_a_newer_line_naming_the_subject_differently_is_the_same_thing_only_when_very_close() -> None:
    older = split_lines("memory/2026-02-11.md", 3, "- Aquarium: fed the tetras 1:2 flakes to pellets, twice a day.",
                        None)[0]
    newer = split_lines("memory/2026-06-02.md", 3, "- The tetras now get 1:3 flakes to pellets once a day instead.",
                        None)[0]
    w = term_weights(salient("How are the aquarium fish fed?"), [[older], [newer]])
    assert not older.terms & newer.terms & w.keys()  # no query word in common
    assert same_thing(older, newer, 0.7, THRESHOLDS, w, line_cos=0.75)
    assert not same_thing(older, newer, 0.7, THRESHOLDS, w, line_cos=0.65)
