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


def test_a_plans_day_named_again_with_another_day_is_rescheduled() -> None:
    from symi_memory.supersession import calendar_days, rescheduled

    march = split_lines("memory/2026-03-02.md", 3, "- Grandpa Tomasz plans to stay with us in Gdansk from "
                        "2026-05-20 for two weeks.", None)[0]
    april = split_lines("memory/2026-04-15.md", 3, "- Grandpa Tomasz is staying with us in Gdansk from "
                        "2026-06-03, for two weeks.", None)[0]
    assert march.ahead and april.ahead and rescheduled(march, april)
    # The same day named again moves nothing.
    again = split_lines("memory/2026-04-20.md", 3, "- Grandpa Tomasz lands on 05-20 at 14:10.", None)[0]
    assert again.days == frozenset({"05-20"}) and not rescheduled(march, again)
    # A day recorded as past is no plan: an undated note's "started on" (its mtime says nothing of when
    # the line was written), and a dated note's day before the note's own date.
    assert calendar_days("- The choir season started on 2026-09-01; rehearsals 10-05 and 10-12.", 0.0) == (
        frozenset({"09-01", "10-05", "10-12"}), False)
    past = split_lines("memory/2026-06-10.md", 3, "- Grandpa Tomasz stayed with us from 2026-06-03.", None)[0]
    assert not past.ahead and not rescheduled(march, past)
    # Not days: a range of numbers with an impossible month.
    assert calendar_days("- Scored 22-45 in the final.", 1.8e9) == (frozenset(), False)


def test_moved_days_with_the_same_other_values_are_one_plan_worded_differently() -> None:
    from symi_memory.supersession import THRESHOLDS, same_thing

    draft = split_lines("memory/2026-08-01.md", 3, "- Loyalty app rollout plan, draft: 25% of stores on 09-02, "
                        "100% on 09-09.", None)[0]
    confirmed = split_lines("memory/2026-08-20.md", 3, "- Loyalty app launch confirmed: 25% of stores on "
                            "09-16, 100% on 09-23.", None)[0]
    other = split_lines("memory/2026-08-20.md", 4, "- Loyalty app: the store survey closes on 09-16, "
                        "results on 09-23.", None)[0]
    chunks = [[draft], [confirmed, other]]
    w = term_weights(salient("When does the loyalty app rollout start?"), chunks)
    # The newer line lacks "rollout" but gives the same share of stores on other days: the plan moved.
    assert same_thing(draft, confirmed, 0.7, THRESHOLDS, w, line_cos=0.5)
    # Other days of the same app, with nothing else in common, move nothing.
    assert not same_thing(draft, other, 0.7, THRESHOLDS, w, line_cos=0.5)


def test_a_day_without_a_year_early_in_the_next_year_is_a_plan_in_a_december_note() -> None:
    from symi_memory.supersession import rescheduled

    # Written in December, "01-05" is next January's day, not one eleven months back.
    first = split_lines("memory/2026-12-10.md", 3, "- Grandpa Tomasz plans to stay with us from 01-05 "
                        "for two weeks.", None)[0]
    moved = split_lines("memory/2026-12-20.md", 3, "- Grandpa Tomasz is staying with us from 01-12, "
                        "for two weeks.", None)[0]
    assert first.ahead and moved.ahead and rescheduled(first, moved)
    # A day a few weeks back is still past, and a day later in the same year still ahead.
    assert not split_lines("memory/2026-12-10.md", 3, "- The school concert was on 11-20.", None)[0].ahead
    assert split_lines("memory/2026-06-10.md", 3, "- The school concert is on 11-20.", None)[0].ahead


def test_a_transcript_with_microsecond_timestamps_still_splits_into_lines(tmp_path) -> None:
    import json

    from symi_memory.sessions import message_times

    # Some exporters write epoch microseconds: read as milliseconds, they land ~55,000 years ahead.
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    (sessions / "a.jsonl").write_text(json.dumps({"type": "message", "timestamp": 1_796_000_000_000_000,
                                                  "message": {"role": "user", "content": "The visit is on 07-15."}})
                                      + "\n", encoding="utf-8")
    written = message_times(sessions, "sessions/a.jsonl", 1, 1)
    assert written is not None
    lines = split_lines("sessions/a.jsonl", 1, "User: The visit is on 07-15.", None, written)
    assert [ln.days for ln in lines] == [frozenset({"07-15"})]


def test_transcript_stamps_in_any_epoch_unit_give_the_same_time(tmp_path) -> None:
    import json

    from symi_memory.sessions import message_times

    sessions = tmp_path / "sessions"
    sessions.mkdir()
    seconds = 1_796_000_000  # 2026-11-30
    for name, stamp in [("s", seconds), ("ms", seconds * 1000), ("us", seconds * 1_000_000),
                        ("ns", seconds * 1_000_000_000), ("iso", "2026-11-30T00:53:20Z")]:
        (sessions / f"{name}.jsonl").write_text(json.dumps({"type": "message", "timestamp": stamp}) + "\n",
                                                encoding="utf-8")
        assert message_times(sessions, f"sessions/{name}.jsonl", 1, 1) == (seconds, seconds), name


def test_a_question_that_also_asks_about_now_is_not_about_the_past() -> None:
    from symi_memory.supersession import asks_about_past

    assert not asks_about_past("What did Ravi's uncle bring back in June, and when is he flying home?")
    assert not asks_about_past("How heavy was the beagle at his check-up, and how heavy should he be?")
    # A clause with no tense of its own goes with the past one.
    assert asks_about_past("How much rice did Ravi's uncle order in June, and from where?")
    assert asks_about_past("Where did the choir sing in Ghent and who paid for the bus?")
    assert asks_about_past("When did the Harbourline service first carry live orders?")


def _lesson(older_text: str, newer_text: str,
            query: str = "When is the Japanese lesson now?") -> dict:  # type: ignore[type-arg]
    from symi_memory.types import Candidate
    from symi_memory_postprocess.supersede import find_supersessions

    # The older note's second line is closest to the query by meaning (a gift idea naming "Japanese"); its first
    # line, about the lesson, holds more of the query's words and is close to the newer note's line.
    old = Candidate(id="a", path="memory/2026-05-27.md", start_line=3, end_line=4, score=0.7, text=older_text)
    new = Candidate(id="b", path="memory/2026-08-31.md", start_line=3, end_line=3, score=0.6, text=newer_text)
    lesson, gift, moved, to_query = [0.6, 0.8, 0.0], [0.9, 0.436, 0.0], [0.5, 0.866, 0.0], [1.0, 0.0, 0.0]
    return find_supersessions([old, new], {"a": [0.8, 0.6, 0.0], "b": [0.6, 0.8, 0.0]}, query,
                              line_vectors={"a": [(3, 3, lesson), (4, 4, gift)], "b": [(3, 3, moved)]},
                              query_vector=to_query)


def test_a_line_about_the_query_that_a_newer_line_gives_another_value_of_is_superseded() -> None:
    gift = "- Gift idea for Wei: a Japanese woodblock printing course."
    found = _lesson("- Japanese lesson at 20:00 with Yumiko: counters.\n" + gift,
                    "- Japanese lessons with Yumiko resume on a new slot: Tuesdays at 20:30.")
    assert list(found) == [0] and found[0][1].line_no == 3 and found[0][0] == 1
    # Through a change word alone (no other value of its quantity), such a line is not superseded: it may state
    # something else that did not change.
    assert _lesson("- Japanese lesson at 20:00 with Yumiko, who lives in Osaka.\n" + gift,
                   "- Japanese lessons with Yumiko now on Tuesdays, same time 20:00.") == {}
    # Nor by a newer line about another lesson, however many other words of the query it holds: it must hold
    # every query word of the line it replaces ("Japanese").
    assert _lesson("- Japanese lesson at 20:00 with Yumiko: counters.\n" + gift,
                   "- Nadia's piano lesson with Yumiko moved to Tuesdays at 20:30.",
                   "When is Nadia's Japanese lesson with Yumiko now?") == {}


def test_a_negative_or_non_integer_window_is_refused_with_its_name() -> None:
    """A library user building thresholds by hand gets a clear error, not a supersession that silently compares
    nothing (a negative ``window`` cut the candidates compared from the end: ``order[:-1]``)."""
    import attrs
    import pytest

    from symi_memory.supersession import THRESHOLDS, Thresholds

    for bad in (-1, -20):
        with pytest.raises(ValueError, match="window"):
            attrs.evolve(THRESHOLDS, window=bad)
    with pytest.raises(TypeError, match="window"):
        Thresholds(window=2.5)  # type: ignore[arg-type]
    assert attrs.evolve(THRESHOLDS, window=0).window == 0  # compares nothing, as asked
