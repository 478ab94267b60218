"""Supersession through a note's dated past line, ratios as measured values, and one subject named two ways
(issue 16, branch ``stale16``). Held-out cases in original wording are in bench/supersession_heldout.py
(rules ``history``, ``measure`` and ``subject``)."""

from __future__ import annotations

import pytest
from support.sqlite_memory import local_search

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


# ---- As a user sees it: real files, real index, the search tool with the default config and the offline local model.

FILLER = {
    "memory/2026-01-04.md": "# 2026-01-04\n\n- Dentist check-up booked for 2026-02-12 at 09:30.\n- Returned the library "
                            "books; two still overdue.\n",
    "memory/2026-02-22.md": "# 2026-02-22\n\n- Ran 8 km along the river in 46 minutes.\n- Called mum about the "
                            "birthday dinner; we meet at the Italian place.\n",
    "memory/2026-03-18.md": "# 2026-03-18\n\n- Sprint planning: the export feature slips to the next release.\n- Bought "
                            "new running shoes, size 44.\n",
    "memory/2026-05-27.md": "# 2026-05-27\n\n- Repainted the bathroom ceiling; two coats of white.\n- The cat's vet "
                            "visit went fine, weight 4.1 kg.\n",
    "memory/projects.md": "# Projects\n\n- Photo book of the summer trip, due before the holidays.\n- Learn enough "
                          "Italian to order dinner without English.\n",
}


def _marked(tmp_path, notes: dict[str, str], query: str, old: str, as_of: str | None = None):  # type: ignore[no-untyped-def]
    found = local_search(tmp_path, {**FILLER, **notes}, query, **({"asOf": as_of} if as_of else {}))
    hits = [h for h in found if h["path"] == old]
    assert hits
    return hits[0].get("supersededBy")


WALL = "# 2026-03-02\n\n- Garden wall footing: concrete mixed 1:2:3 with river sand and gravel, poured at 08:00.\n"


def test_a_weaker_newer_note_giving_another_ratio_marks_the_old_mix_replaced(tmp_path) -> None:  # type: ignore[no-untyped-def]
    got = _marked(tmp_path, {"memory/2026-03-02.md": WALL,
                             "memory/2026-04-20.md": "# 2026-04-20\n\n- Garden wall concrete now 1:3:3 instead of 1:2:3 "
                                                     "for the footing, the builder says it cures more evenly.\n"},
                  "How is the concrete for the garden wall mixed (ratio and sand)?", "memory/2026-03-02.md")
    assert got == {"path": "memory/2026-04-20.md", "startLine": 3, "endLine": 3}


def test_the_same_ratio_restated_leaves_the_old_mix_unmarked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    got = _marked(tmp_path, {"memory/2026-03-02.md": WALL,
                             "memory/2026-04-20.md": "# 2026-04-20\n\n- New wheelbarrow bought; still mixing 1:2:3 for "
                                                     "the footing.\n"},
                  "How is the concrete for the garden wall mixed (ratio and sand)?", "memory/2026-03-02.md")
    assert got is None


CAR = ("# Car\n\n- Car: a 2019 Skoda Octavia estate, plate XR-551-K.\n- Car tyres: the winter set is stored in the "
       "shed.\n\n## History\n- Until 2026-03-01 the car was serviced at Garage Peters on Moorweg.\n")


def test_a_dated_past_line_in_an_undated_note_is_marked_replaced_by_a_later_note(tmp_path) -> None:  # type: ignore[no-untyped-def]
    got = _marked(tmp_path, {"memory/car.md": CAR,
                             "memory/2026-03-02.md": "# 2026-03-02\n\n- From now on the car is serviced at Autohaus "
                                                     "Brandt instead of Garage Peters.\n"},
                  "Where is the car serviced?", "memory/car.md")
    assert got == {"path": "memory/2026-03-02.md", "startLine": 3, "endLine": 3}


def test_a_later_note_about_something_else_leaves_the_past_line_unmarked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    got = _marked(tmp_path, {"memory/car.md": CAR,
                             "memory/2026-03-02.md": "# 2026-03-02\n\n- From now on the bike is serviced at the shop "
                                                     "on Moorweg.\n"},
                  "Where is the car serviced?", "memory/car.md")
    assert got is None


# ---- A note holding both the newest version and a dated past line (review of stale16): no supersession cycle.

HOUSE_NOW = ("# House\n\n- House heating: the Daikin heat pump, now serviced by Klimaat Noord instead of Frank Mol.\n"
             "- Bins: paper on Tuesdays, plastic every other Thursday.\n\n## History\n"
             "- Until 2026-04-10 the heating was an old Vaillant gas boiler, serviced by Frank Mol.\n")
HEAT_PUMP = ("# 2026-04-11\n\n- The house heating is now a Daikin heat pump serviced by Frank Mol; the Vaillant gas "
             "boiler is gone.\n")


def test_a_note_whose_current_line_changes_the_newer_note_is_not_superseded_by_it() -> None:
    # The undated note (changed after the dated one) supersedes the dated note through its current line (the
    # service moved), and the dated note supersedes the note's History line: before, both were marked, each
    # superseded by the other, so each was demoted below the other until both scores reached 0.
    old = Candidate(id="a", path="memory/house.md", start_line=3, end_line=7, score=0.8,
                    text=HOUSE_NOW.split("\n", 2)[2], mtime=1.9e9)
    new = Candidate(id="b", path="memory/2026-04-11.md", start_line=3, end_line=3, score=0.7,
                    text=HEAT_PUMP.split("\n", 2)[2])
    heat, other = [0.8, 0.6, 0.0], [0.0, 0.0, 1.0]
    found = find_supersessions([old, new], {"a": [0.7, 0.5, 0.5], "b": [0.6, 0.8, 0.0]},
                               "What heating does the house have?",
                               line_vectors={"a": [(3, 3, heat), (4, 4, other), (7, 7, heat)], "b": [(3, 3, heat)]},
                               query_vector=[1.0, 0.0, 0.0])
    assert {k: v[0] for k, v in found.items()} == {1: 0}


@pytest.mark.timeout(240)
def test_the_note_with_the_current_version_and_its_history_stays_in_the_results(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os

    from support.sqlite_memory import open_local, write

    from symi_memory import tools

    pytest.importorskip("symi_memory_local")
    ws = tmp_path / "ws"
    for rel, text in {**FILLER, "memory/house.md": HOUSE_NOW, "memory/2026-04-11.md": HEAT_PUMP}.items():
        write(ws, rel, text)
    os.utime(ws / "memory/house.md", (1.78e9, 1.78e9))  # changed 2026-05-29, after the dated note
    with open_local(tmp_path, ws) as mem:
        mem.sync()
        for as_of in (None, "2026-12-01"):  # an "as of" search followed the cycle forever
            args = {"query": "What heating does the house have?", **({"asOf": as_of} if as_of else {})}
            for _ in range(3):  # a loaded host's first query embedding can miss its deadline: ask again
                out = tools.memory_search(mem, args)
                if out["mode"] == "hybrid":
                    break
            assert out["mode"] == "hybrid", out
            top = out["results"][0]
            assert top["path"] == "memory/house.md" and "supersededBy" not in top, out["results"]
            assert any(h["path"] == "memory/2026-04-11.md" for h in out["results"])


def test_a_note_whose_current_line_names_a_later_value_is_not_marked_history(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # network.md (changed after 2026-06-20) says the router is now a Ubiquiti; the 2026-06-20 note says the
    # FRITZ!Box was replaced by a TP-Link. Marking network.md "supersededBy" the June note tells the agent to answer
    # TP-Link. Before stale16 the note, newer as a whole, was never paired with the older note.
    got = _marked(tmp_path, {
        "memory/network.md": "# Network\n\n- Router: Ubiquiti Dream Router, at 10.0.0.1, admin password in the "
                             "vault.\n- NAS on 10.0.0.20.\n\n## History\n- Until 2026-06-20 the router was the "
                             "FRITZ!Box 7530 at 192.168.178.1.\n",
        "memory/2026-06-20.md": "# 2026-06-20\n\n- Swapped the router: the FRITZ!Box is replaced by a TP-Link Archer "
                                "AX55.\n"},
        "Which router do we have at home?", "memory/network.md")
    assert got is None


def test_as_of_a_date_before_the_notes_current_line_its_past_line_is_superseded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The same notes as of 2026-07-01: network.md's "Router: Ubiquiti ..." line was written later (the note's
    # mtime), so on that day the June note's TP-Link had replaced the FRITZ!Box and nothing in network.md said
    # otherwise: the note's past line is superseded, as the search tool marks it.
    got = _marked(tmp_path, {
        "memory/network.md": "# Network\n\n- Router: Ubiquiti Dream Router, at 10.0.0.1, admin password in the "
                             "vault.\n- NAS on 10.0.0.20.\n\n## History\n- Until 2026-06-20 the router was the "
                             "FRITZ!Box 7530 at 192.168.178.1.\n",
        "memory/2026-06-20.md": "# 2026-06-20\n\n- Swapped the router: the FRITZ!Box is replaced by a TP-Link Archer "
                                "AX55.\n"},
        "Which router do we have at home?", "memory/network.md", as_of="2026-07-01")
    assert got is not None and got["path"] == "memory/2026-06-20.md"
