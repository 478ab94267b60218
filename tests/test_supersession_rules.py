"""The three stale3 supersession / "as of" rules as a user sees them, on workspaces in original wording (not the
dev sets' text): real files, real index, the public search tool with the default config.

The held-out cases these come from, with each rule on and off, are in bench/supersession_heldout.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.sqlite_memory import hybrid_results, open_local, write

pytest.importorskip("symi_memory_local")
# The offline local model (all-MiniLM-L6-v2), as a user runs it: which line is closest to a query by meaning is
# what two of the rules turn on, and the test hash embedder does not model meaning.


OLD = "memory/2026-03-03.md"
NEW = "memory/2026-07-14.md"


@pytest.fixture
def plumber_ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    write(ws, OLD, "# 2026-03-03\n\n- Our plumber is Kofi Mensah, phone 0612 448 190.\n")
    write(ws, NEW, "# 2026-07-14\n\n- Kofi retired; our plumber is now Dara Quinn, phone 0655 301 872.\n")
    return ws


@pytest.mark.parametrize("query", [
    "Which plumber did we call in March, and who is our plumber now?",
    "Where did we find a plumber in March, and who do we call these days?",
])
def test_a_past_question_that_also_asks_about_now_marks_the_old_answer_replaced(tmp_path: Path, plumber_ws: Path,
                                                                                 query: str) -> None:
    # The second clause asks who the plumber is now: the March line is returned, but marked as replaced by July's.
    with open_local(tmp_path, plumber_ws) as mem:
        mem.sync()
        old = [h for h in hybrid_results(mem, query) if h["path"] == OLD]
        assert old and old[0].get("supersededBy") == {"path": NEW, "startLine": 3, "endLine": 3}


@pytest.mark.parametrize("query", [
    "Who was our plumber before Dara, and why did he stop?",
    "Which plumber did we call in March and pay in cash?",
])
def test_a_past_question_with_a_second_past_clause_leaves_the_old_answer_unmarked(tmp_path: Path, plumber_ws: Path,
                                                                                  query: str) -> None:
    with open_local(tmp_path, plumber_ws) as mem:
        mem.sync()
        old = [h for h in hybrid_results(mem, query) if h["path"] == OLD]
        assert old and "supersededBy" not in old[0]


TEAM = ("# Team\n\n- Jonas: data team lead since 2026-08-01 (before: analyst), sits by the window, allergic to nuts.\n"
        "{second}\n")


@pytest.mark.parametrize(("second", "left_out"), [
    # Close to the question by meaning, sharing only the name: says nothing of when the answer was written.
    ("- Jonas's job at work is explained on his profile.", True),
    # About the question by its words too, and undated: it may have held on the date, so the note stays.
    ("- Jonas's role on the data team also covers the weekly report.", False),
])
def test_as_of_leaves_out_a_note_whose_answer_came_later_even_beside_a_line_naming_only_the_person(
        tmp_path: Path, second: str, left_out: bool) -> None:
    ws = tmp_path / "ws"
    write(ws, "memory/2026-03-10.md", "# 2026-03-10\n\n- Jonas joined the data team as an analyst.\n")
    write(ws, "memory/team.md", TEAM.format(second=second))
    with open_local(tmp_path, ws) as mem:
        mem.sync()
        hits = hybrid_results(mem, "What is Jonas's role on the data team?", asOf="2026-05-01")
        assert hits[0]["path"] == "memory/2026-03-10.md"
        assert (all(h["path"] != "memory/team.md" for h in hits)) is left_out
        # Without a date the lead line is memory like the rest.
        assert any(h["path"] == "memory/team.md" for h in hybrid_results(mem, "What is Jonas's role on the data team?"))


ERRANDS = ("# 2026-02-09\n\n- Errands: Spanish class at 19:00 with Lucia, returned the library books, bought stamps, called "
           "the insurer about the dent in the car.\n- Lucia recommended a Spanish evening course for beginners.\n")


@pytest.mark.parametrize(("newer", "replaced"), [
    # Another value of the class's time, holding every query word: the February line is replaced.
    ("- Spanish class with Lucia from this week: Thursdays at 19:30.", True),
    # The class time did not change; the other time is the exam's.
    ("- Spanish class with Lucia stays at 19:00; the exam is on 2026-06-20 at 10:00.", False),
])
def test_a_value_line_beside_a_closer_side_remark_is_replaced_by_a_newer_value(tmp_path: Path, newer: str,
                                                                                replaced: bool) -> None:
    # The line closest to the question by meaning is the course tip; the line holding the class time is the
    # one a newer time replaces.
    ws = tmp_path / "ws"
    write(ws, "memory/2026-02-09.md", ERRANDS)
    write(ws, "memory/2026-05-18.md", f"# 2026-05-18\n\n{newer}\n")
    with open_local(tmp_path, ws) as mem:
        mem.sync()
        hits = hybrid_results(mem, "When is the Spanish class with Lucia?")
        assert hits[0]["path"] == "memory/2026-05-18.md"
        old = [h for h in hits if h["path"] == "memory/2026-02-09.md"]
        assert old
        expected = {"path": "memory/2026-05-18.md", "startLine": 3, "endLine": 3} if replaced else None
        assert old[0].get("supersededBy") == expected
