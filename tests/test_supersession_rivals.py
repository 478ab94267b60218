"""Wrong supersession marks between notes about two things of one kind, or two facts of one thing (branch sup37).

- Two things of one kind: each line names which one with a word the other note lacks ("the flight to Lisbon" and
  "the flight to Oslo", "the energy company" and "Water company"); a vague question ("what time is the flight?")
  paired them, with vectors and keyword-only alike (``symi_memory.supersession.rival_subjects``).
- Two facts of one thing: a newer line still stating every value of the older one ("Washed the car; the SUV now has
  new Michelin tyres" for "now the car is a red SUV") says the older one still holds (``same_thing``).

Each wrong mark is checked beside a right one of the same words, so the fix cannot pass by marking nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.sqlite_memory import hybrid_results, open_local, open_mem, write

from symi_memory import tools


def _search(tmp_path: Path, notes: dict[str, str], query: str, provider: str) -> dict[str, dict]:
    """``{path: hit}`` of the search tool's results for ``query`` over ``notes``, default config and ``provider``."""
    ws = tmp_path / "ws"
    for rel, text in notes.items():
        write(ws, rel, text)
    if provider == "local":
        pytest.importorskip("symi_memory_local")
        with open_local(tmp_path, ws) as mem:
            mem.sync()
            hits = hybrid_results(mem, query)
    else:
        with open_mem(tmp_path, ws, {"provider": provider}) as mem:
            mem.sync()
            out = tools.memory_search(mem, {"query": query, "minScore": 0})
            assert "error" not in out, out
            hits = out["results"]
    return {h["path"]: h for h in hits}


def test_a_word_for_which_one_is_read_before_a_thing_and_after_to_for_of() -> None:
    from symi_memory.supersession import qualified_terms, rival_subjects

    assert qualified_terms("Flight to Lisbon on Friday departs at 09:40.")["flight"] == {"lisbon"}
    assert qualified_terms("Water company: the monthly bill dropped")["company"] == {"water"}
    # Not across punctuation, not a number, a change or a past-state word.
    assert "suv" not in qualified_terms("Sold the hatchback; SUV now")
    assert qualified_terms("the new router, 5 routers") == {}
    assert rival_subjects(["Flight to Lisbon on Friday departs at 09:40."],
                          "Booked the flight to Oslo: departs at 14:15.", {"flight", "lisbon"}, {"flight", "oslo"})
    # The newer side names the older one's word: a version of it, not another one.
    assert not rival_subjects(["Flight to Lisbon departs at 09:40."], "Flight to Porto, not Lisbon, at 14:15.",
                              {"flight", "lisbon"}, {"flight", "porto", "lisbon"})


FLIGHTS = {"memory/2026-03-01.md": "# 2026-03-01\n\n- Flight to Lisbon on Friday departs at 09:40.\n",
           "memory/2026-03-05.md": "# 2026-03-05\n\n- Booked the flight to Oslo for next month: departs at 14:15.\n"}


@pytest.mark.parametrize("provider", ["none", "local"])
def test_a_vague_question_does_not_pair_two_flights(tmp_path: Path, provider: str) -> None:
    hits = _search(tmp_path, FLIGHTS, "what time is the flight?", provider)
    assert "supersededBy" not in hits["memory/2026-03-01.md"]  # main: marked superseded by the Oslo flight


@pytest.mark.parametrize("provider", ["none", "local"])
def test_the_same_flight_at_another_time_still_supersedes(tmp_path: Path, provider: str) -> None:
    notes = {**FLIGHTS, "memory/2026-03-05.md": "# 2026-03-05\n\n- The flight to Lisbon on Friday now departs at "
                                                "11:20 instead.\n"}
    hits = _search(tmp_path, notes, "what time is the flight?", provider)
    assert hits["memory/2026-03-01.md"]["supersededBy"]["path"] == "memory/2026-03-05.md"


HEAT_PUMP = {"memory/2026-01-15.md": "# 2026-01-15\n\n- Called the energy company about the heat pump tariff.\n"
                                     "- Monthly bill was 180 euros; the night rate is the problem.\n",
             "memory/2026-03-03.md": "# 2026-03-03\n\n- Water company: the monthly bill dropped from 180 euros to 120 "
                                     "euros after the heat pump check.\n"}


@pytest.mark.parametrize("provider", ["none", "local"])
def test_another_companys_bill_naming_the_old_value_supersedes_nothing(tmp_path: Path, provider: str) -> None:
    hits = _search(tmp_path, HEAT_PUMP, "What does the heat pump cost me a month now?", provider)
    assert "supersededBy" not in hits["memory/2026-01-15.md"]  # main: held-out q10, marked by the water bill


@pytest.mark.parametrize("provider", ["none", "local"])
def test_the_heat_pumps_own_bill_naming_the_old_value_still_supersedes(tmp_path: Path, provider: str) -> None:
    notes = {**HEAT_PUMP, "memory/2026-03-03.md": "# 2026-03-03\n\n- Heat pump on the dynamic tariff: the monthly "
                                                  "bill dropped from 180 euros to 120 euros.\n"}
    hits = _search(tmp_path, notes, "What does the heat pump cost me a month now?", provider)
    assert hits["memory/2026-01-15.md"]["supersededBy"]["path"] == "memory/2026-03-03.md"


CARS = {"memory/2026-03-01.md": "# 2026-03-01\n\n- The car is a blue hatchback.\n- Booked the dentist for Tuesday.\n",
        "memory/2026-06-01.md": "# 2026-06-01\n\n- Sold the hatchback; now the car is a red SUV.\n",
        "memory/2026-07-01.md": "# 2026-07-01\n\n- Washed the car; the SUV now has new Michelin tyres.\n"}


def test_keyword_only_a_later_fact_about_the_same_car_leaves_it_current(tmp_path: Path) -> None:
    hits = _search(tmp_path, CARS, "what car do I drive?", "none")
    assert "supersededBy" not in hits["memory/2026-06-01.md"]  # main: marked superseded by the tyres
    # The hatchback is still superseded by the SUV.
    assert hits["memory/2026-03-01.md"]["supersededBy"]["path"] == "memory/2026-06-01.md"


def test_keyword_only_a_newer_line_naming_the_old_value_as_replaced_still_supersedes(tmp_path: Path) -> None:
    notes = {"memory/2026-03-01.md": "# 2026-03-01\n\n- Parking: the car stays at Q-Park now.\n",
             "memory/2026-06-01.md": "# 2026-06-01\n\n- Parking: the car moved from Q-Park to the Zuid garage now.\n"}
    hits = _search(tmp_path, notes, "where is the car parked?", "none")
    assert hits["memory/2026-03-01.md"]["supersededBy"]["path"] == "memory/2026-06-01.md"


# A real change whose new value is itself "a thing of one kind" with its own word for which one: the clinic, the
# room, the street moved to. Before (sup37 as merged): read as two rival clinics/rooms/streets, and the older
# line was left current.
MOVES = [({"memory/2026-03-01.md": "# 2026-03-01\n\n- My dentist is at Riverside Clinic.\n",
           "memory/2026-06-01.md": "# 2026-06-01\n\n- My dentist moved to Harbour Clinic.\n"}, "where is my dentist?"),
         ({"memory/2026-03-01.md": "# 2026-03-01\n\n- The team standup is in the Ares Room at 9.\n",
           "memory/2026-06-01.md": "# 2026-06-01\n\n- The team standup now is in the Zeus Room at 10.\n"},
          "where is the team standup?")]


@pytest.mark.parametrize("provider", ["none", "local"])
@pytest.mark.parametrize("k", range(len(MOVES)))
def test_a_move_to_another_place_of_one_kind_still_supersedes(tmp_path: Path, provider: str, k: int) -> None:
    notes, query = MOVES[k]
    hits = _search(tmp_path, notes, query, provider)
    assert hits["memory/2026-03-01.md"]["supersededBy"]["path"] == "memory/2026-06-01.md"


def test_keyword_only_moving_house_to_another_street_still_supersedes(tmp_path: Path) -> None:
    notes = {"memory/2026-03-01.md": "# 2026-03-01\n\n- I live at Park Street 12.\n",
             "memory/2026-06-01.md": "# 2026-06-01\n\n- Moved house: I now live at Elm Street 4.\n"}
    hits = _search(tmp_path, notes, "where do I live?", "none")
    assert hits["memory/2026-03-01.md"]["supersededBy"]["path"] == "memory/2026-06-01.md"
