"""A newer line that says the state an older line gives moved on, without a change word or a value of the same kind
(issue 16, branch ``stale16b``): the person the older line names ends in the role, or the same case reached a later
stage of its process. Held-out cases in original wording are in bench/supersession_heldout.py (rules ``handover``
and ``stage``)."""

from __future__ import annotations

from support.sqlite_memory import local_search

from symi_memory.supersession import case_stage, ended_names, salient
from symi_memory.types import Candidate
from symi_memory_postprocess.supersede import find_supersessions


def _pair(old: str, new: str, query: str, new_score: float) -> dict:  # type: ignore[type-arg]
    """Find supersessions between a March note (score 0.8) and a weaker or stronger June note, their chunks close."""
    older = Candidate(id="a", path="memory/2026-03-04.md", start_line=3, end_line=3, score=0.8, text=old)
    newer = Candidate(id="b", path="memory/2026-06-20.md", start_line=3, end_line=3, score=new_score, text=new)
    return find_supersessions([older, newer], {"a": [0.8, 0.6, 0.0], "b": [0.6, 0.8, 0.0]}, query)


COACH = "- Rowing: Pim's sculling lessons with Coach Wouter, Saturdays at 09:00 on the Amstel."


def test_the_named_person_ending_in_the_role_supersedes_the_older_line_from_a_weaker_hit() -> None:
    found = _pair(COACH, "- Club news: Coach Wouter retires in July; Pim rows with Trainer Femke Dijk after that.",
                  "Who coaches Pim at rowing?", 0.2)
    assert list(found) == [0] and found[0][0] == 1
    # Other endings of the same person: leaving the club, handing over, someone taking over from him.
    for new in ("- Coach Wouter leaves the club; Pim moves to the group of Trainer Femke Dijk.",
                "- Coach Wouter hands over his Saturday group to Trainer Femke Dijk, Pim included.",
                "- At the club, Trainer Femke Dijk took over from Coach Wouter; Pim stays on Saturdays."):
        assert list(_pair(COACH, new, "Who coaches Pim at rowing?", 0.2)) == [0], new


def test_an_absence_an_ending_of_someone_else_or_a_question_not_about_a_person_supersedes_nothing() -> None:
    for new in ("- Coach Wouter leaves for a regatta in Ghent on Friday; Pim rows with Trainer Femke Dijk then.",
                "- Coach Wouter left the club evening early, so Trainer Femke Dijk told us about Pim's progress.",
                "- Trainer Bas retires in July; Pim rows with Coach Wouter as before, Trainer Femke Dijk helps."):
        assert _pair(COACH, new, "Who coaches Pim at rowing?", 0.2) == {}, new
    # The ending changes who holds the role; a question about something else the old line says keeps it.
    assert _pair(COACH, "- Club news: Coach Wouter retires in July; Pim rows with Trainer Femke Dijk after that.",
                 "When are Pim's rowing lessons?", 0.2) == {}
    assert ended_names("Coach Wouter leaves for a regatta on Friday") == frozenset()
    assert ended_names("Coach Wouter leaves the club") == {"wouter"}


VISA = "- Work visa for Oslo: the application needs a certified copy of the diploma."


def test_the_same_case_at_a_later_stage_supersedes_the_older_line_from_a_weaker_hit() -> None:
    query = "Where is the work visa application for Oslo?"
    for new in ("- The work visa application for Oslo was submitted with the certified diploma.",
                "- The work visa application for Oslo went to the immigration board; answer in six weeks.",
                "- Good news: the work visa application for Oslo was approved."):
        found = _pair(VISA, new, query, 0.3)
        assert list(found) == [0] and found[0][0] == 1, new


def test_another_case_a_lower_stage_or_a_quoted_title_gives_no_later_stage() -> None:
    query = "Where is the work visa application for Oslo?"
    for new in ("- The work visa application for Oslo needs a new passport photo as well.",  # no later stage
                "- Ingrid's work visa application for Oslo went to the immigration board.",  # another person's case
                "- The tourist visa application for Rome was submitted online."):  # another case
        assert _pair(VISA, new, query, 0.3) == {}, new
    asked = salient("claim check")
    # The case's words only in a quoted title: the stage is the talk's, not the claim check's.
    assert case_stage('Talk submitted to the conference: "Claim checks and other lies"; the CFP closes 07-10.',
                      asked) == 0
    assert case_stage("Promotion to Staff Engineer: case submitted in May.", salient("promotion case")) == 3


# ---- As a user sees it: real files, real index, the search tool with the default config and the offline local model.

FILLER = {
    "memory/2026-01-06.md": "# 2026-01-06\n\n- Bought a new kettle; the old one leaked.\n- Paid the parking permit for "
                            "the year.\n",
    "memory/2026-02-17.md": "# 2026-02-17\n\n- Ran 10 km in 55 minutes along the canal.\n- Lunch with Sophie at the "
                            "noodle bar.\n",
    "memory/2026-04-09.md": "# 2026-04-09\n\n- Release planning: the search feature moves to the summer release.\n",
    "memory/2026-05-15.md": "# 2026-05-15\n\n- Cleaned the gutters; one downpipe was blocked.\n- The dog's vaccination "
                            "is due in October.\n",
}


def _search(tmp_path, notes: dict[str, str], query: str):  # type: ignore[no-untyped-def]
    return local_search(tmp_path, {**FILLER, **notes}, query)


def test_who_question_the_note_naming_the_successor_is_marked_current(tmp_path) -> None:  # type: ignore[no-untyped-def]
    hits = _search(tmp_path, {
        "memory/2026-03-04.md": "# 2026-03-04\n\n- Rowing: Pim's sculling lesson with Coach Wouter on the Amstel, "
                                "Saturday at 09:00; Wouter says Pim should keep his back straight.\n",
        "memory/2026-06-20.md": "# 2026-06-20\n\n- Club barbecue. Coach Wouter retires in July; from September Pim "
                                "rows with Trainer Femke Dijk.\n"}, "Who coaches Pim at rowing?")
    old = [h for h in hits if h["path"] == "memory/2026-03-04.md"]
    assert old and old[0].get("supersededBy") == {"path": "memory/2026-06-20.md", "startLine": 3, "endLine": 3}
    paths = [h["path"] for h in hits]
    assert paths.index("memory/2026-06-20.md") < paths.index("memory/2026-03-04.md")


def test_status_question_the_later_stage_is_marked_current(tmp_path) -> None:  # type: ignore[no-untyped-def]
    hits = _search(tmp_path, {
        "memory/2026-03-04.md": "# 2026-03-04\n\n- Call with the notary at 10:30: the house purchase deed needs the "
                                "bank's final mortgage offer first.\n",
        "memory/2026-06-20.md": "# 2026-06-20\n\n- The house purchase deed went to the notary's review board; signing "
                                "planned for July.\n"}, "What is the status of the house purchase deed?")
    old = [h for h in hits if h["path"] == "memory/2026-03-04.md"]
    assert old and old[0].get("supersededBy") == {"path": "memory/2026-06-20.md", "startLine": 3, "endLine": 3}


# ---- Review (branch ``revst``): what a user would not call moved on.

TEACHER = "- Ilse's teacher in groep 5 is Juf Marloes; she reads with the class every morning."


def test_an_ending_supposed_not_said_supersedes_nothing() -> None:
    for new in ("- If Juf Marloes retires, Ilse gets Meester Daan as teacher.",
                "- Nobody knows yet whether Juf Marloes leaves the school; Meester Daan would be Ilse's teacher then."):
        assert _pair(TEACHER, new, "Who is Ilse's teacher?", 0.3) == {}, new
    assert ended_names("If Juf Marloes retires, Ilse gets Meester Daan.") == frozenset()
    assert ended_names("If Meester Daan takes over from Juf Marloes, Ilse stays in groep 5.") == frozenset()
    assert ended_names("If needed, Meester Daan took over from Juf Marloes.") == {"marloes"}  # another clause
    assert ended_names("Juf Marloes retires; if needed Ilse gets Meester Daan.") == {"marloes"}


def test_the_ending_of_someone_else_the_older_line_names_keeps_the_asked_persons_line() -> None:
    # The older line names Ilse's and Sam's teachers; Sam's teacher leaving does not end Ilse's.
    older = "- Teachers this year: Ilse has Juf Marloes, Sam has Meester Joris."
    new = "- Meester Joris leaves the school; Sam gets Juf Anna as teacher."
    assert _pair(older, new, "Who is Ilse's teacher?", 0.3) == {}
    assert list(_pair(older, new, "Who is Sam's teacher?", 0.3)) == [0]


def test_a_stage_not_reached_or_supposed_is_no_later_stage() -> None:
    query = "Where is the work visa application for Oslo?"
    for old, new in (
            ("- The work visa application for Oslo was submitted in March.",
             "- The work visa application for Oslo: not approved yet, the embassy is still waiting."),
            (VISA, "- The work visa application for Oslo hasn't been submitted; the diploma copy is still at the notary."),
            (VISA, "- The work visa application for Oslo will be approved once the diploma copy is in, the embassy said."),
            (VISA, "- If the work visa application for Oslo is submitted before June, it is handled faster.")):
        assert _pair(old, new, query, 0.3) == {}, new
    asked = salient("work visa application")
    assert case_stage("The work visa application was not approved yet.", asked) == 0
    assert case_stage("The work visa application was approved, not rejected.", asked) == 5


def test_a_stand_in_for_a_while_is_no_ending() -> None:
    for new in ("- Juf Marloes is replaced by Meester Daan during her maternity leave; Ilse's teacher is back in May.",
                "- Coach Wouter was replaced by Trainer Femke Dijk for today's lesson; Pim liked her drills."):
        old = TEACHER if "Marloes" in new else COACH
        query = "Who is Ilse's teacher?" if "Marloes" in new else "Who coaches Pim at rowing?"
        assert _pair(old, new, query, 0.3) == {}, new
    # Endings that say why or when stay endings.
    assert ended_names("Trainer Henk retires for health reasons; Femke takes the group.") == {"henk"}
    assert ended_names("Ms. Peel is replaced by Mr. Osei.") == {"peel"}


def test_someone_of_the_same_family_name_ending_in_a_role_is_another_person() -> None:
    query = "Who is Pim's hockey coach?"
    older = "- Pim's hockey coach is Femke Jansen, training on Wednesdays."
    assert _pair(older, "- Henk Jansen retires as hockey coach of the under-12s; Pim's team gets Trainer Bas.",
                 query, 0.3) == {}
    # The same person, with or without a title or her first name, still ends in the role.
    for new in ("- Femke Jansen retires as hockey coach; Pim's team gets Trainer Bas.",
                "- Coach Jansen retires; Pim's hockey team gets Trainer Bas."):
        assert list(_pair(older, new, query, 0.3)) == [0], new


def test_the_ending_of_a_person_the_older_line_gives_for_another_role_keeps_the_asked_role() -> None:
    older = "- Ilse's class teacher is Juf Marloes; Meester Joris teaches her gym on Thursdays."
    marloes_leaves = "- Juf Marloes leaves the school; Ilse gets Meester Daan as class teacher."
    assert _pair(older, marloes_leaves, "Who teaches Ilse gym?", 0.3) == {}
    assert _pair(older, "- Meester Joris retires; Ilse's gym teacher is now Juf Anna.",
                 "Who is Ilse's class teacher?", 0.3) == {}
    assert list(_pair(older, marloes_leaves, "Who is Ilse's class teacher?", 0.3)) == [0]
    # A title's full stop ends no clause: Mr. Bakker is the building manager of the one clause asked about.
    assert list(_pair("- Building manager Mr. Bakker fixed the boiler at 08:30; rent questions go to him as well.",
                      "- Tenants meeting: Mr. Bakker left the housing company; Ms. Osei runs our building now.",
                      "Who is the building manager?", 0.3)) == [0]
