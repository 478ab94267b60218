"""A question that names a month favours the dated notes of that month (docs/search-scores.md, "Month cue")."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from symi_memory import load_config, open_memory
from symi_memory_postprocess.monthcue import MonthCue, months_named


def _mem(tmp_path: Path, ws: Path, **ms: Any):
    cfg = load_config(None, state_dir=tmp_path / "state", overrides={"agents": {"defaults": {"memorySearch": ms}}})
    return open_memory(cfg, workspace=ws, start=False)


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    # Both notes hold the question's words; July's says them more often, so the keyword side prefers it.
    (ws / "memory" / "2026-05-04.md").write_text(
        "# 2026-05-04\n\n- Wei sold four prints at the art fair in the old church.\n"
        "- Booked the car for the weekend.\n", encoding="utf-8")
    (ws / "memory" / "2026-07-12.md").write_text(
        "# 2026-07-12\n\n- Wei sold prints at the summer art fair; the art fair prints sold well, Wei sold more "
        "prints than planned.\n- Watered the garden.\n", encoding="utf-8")
    (ws / "MEMORY.md").write_text("# Memory\n\n- Wei is an illustrator.\n",
                                  encoding="utf-8")
    return ws


def _paths(mem: Any, query: str) -> list[str]:
    return [r.path for r in mem.search(query, min_score=0, max_results=10).results]


def test_a_question_naming_a_month_puts_that_months_note_first(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    with _mem(tmp_path / "on", ws, provider="none") as mem:
        mem.sync()
        # Without a month the July note, which says it most, comes first ...
        assert _paths(mem, "How many prints did Wei sell at the art fair?")[0] == "memory/2026-07-12.md"
        # ... and naming May brings May's note first, with the default config.
        assert _paths(mem, "How many prints did Wei sell at the art fair in May?")[0] == "memory/2026-05-04.md"
        assert mem.search("How many prints did Wei sell at the art fair in early May?").results[0].path == \
            "memory/2026-05-04.md"
        # "may" the verb is not a month, nor is May the person.
        assert _paths(mem, "Which prints may Wei sell at the art fair?")[0] == "memory/2026-07-12.md"
        assert _paths(mem, "How many prints did May Chen sell at the art fair?")[0] == "memory/2026-07-12.md"
        # "after May" asks about the months after it.
        assert _paths(mem, "How many prints did Wei sell at the art fair after May?")[0] == "memory/2026-07-12.md"
        # Naming the year asks for that year's May (the year is not an identifier look-up) ...
        assert _paths(mem, "How many prints did Wei sell at the art fair in May 2026?")[0] == "memory/2026-05-04.md"
        # ... and another year's May is not this one.
        assert _paths(mem, "How many prints did Wei sell at the art fair in May 2025?")[0] == "memory/2026-07-12.md"
    with _mem(tmp_path / "off", ws, provider="none", query={"hybrid": {"monthCue": {"enabled": False}}}) as mem:
        mem.sync()
        assert _paths(mem, "How many prints did Wei sell at the art fair in May?")[0] == "memory/2026-07-12.md"


def test_the_boost_is_in_log_odds_and_leaves_other_notes_and_identifier_lookups_alone(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    (ws / "memory" / "2026-05-20.md").write_text("# 2026-05-20\n\n- Deployed build 7f3a9c21 to staging.\n",
                                                  encoding="utf-8")
    with _mem(tmp_path / "on", ws, provider="none") as on, \
            _mem(tmp_path / "off", ws, provider="none", query={"hybrid": {"monthCue": {"enabled": False}}}) as off:
        on.sync()
        off.sync()
        q = "How many prints did Wei sell at the art fair in May?"
        a = {r.path: r.score for r in on.search(q, min_score=0, max_results=10).results}
        b = {r.path: r.score for r in off.search(q, min_score=0, max_results=10).results}
        logit = lambda p: math.log(p / (1 - p))  # noqa: E731
        assert logit(a["memory/2026-05-04.md"]) - logit(b["memory/2026-05-04.md"]) == pytest.approx(0.4)
        assert a["memory/2026-07-12.md"] == b["memory/2026-07-12.md"]
        assert a["MEMORY.md"] == b["MEMORY.md"]  # undated
        ident = "What did 7f3a9c21 change in May?"
        assert [(r.path, r.score) for r in on.search(ident, min_score=0).results] == \
            [(r.path, r.score) for r in off.search(ident, min_score=0).results]


@pytest.mark.parametrize(("query", "named"), [
    ("What happened in early May?", {(5, None)}),
    ("the mid-May outage", {(5, None)}),
    ("Plans for June 2026 and July", {(6, 2026), (7, None)}),
    ("May I ask what Nadia said?", set()),
    ("What may have caused it?", set()),
    ("What did Priya say about her marchers?", set()),
    # Names, verbs and sentence openings are not months ...
    ("When did May Chen move to Berlin?", set()),
    ("What did June say about the garden?", set()),
    ("Where did we march last week?", set()),
    ("an august gathering", set()),
    ("Thanks! May I ask what Nadia said?", set()),
    ("What did Jan say about the roof?", set()),
    ("What changed after June and before September?", set()),
    # ... while a day, a year, a short form after a preposition and lower-case months in a range are.
    ("May 5, 2026 meeting notes", {(5, 2026)}),
    ("What did we spend in Sept?", {(9, None)}),
    ("the Oct. 3rd release", {(10, None)}),
    ("budget for Jan 2026", {(1, 2026)}),
    ("what happened between march and may", {(3, None), (5, None)}),
    ("in may of 2025", {(5, 2025)}),
])
def test_months_named(query: str, named: set[tuple[int, int | None]]) -> None:
    assert months_named(query) == named


def test_month_cue_config() -> None:
    assert MonthCue.from_config({}) == MonthCue(0.4)
    assert MonthCue.from_config({"monthCue": {"enabled": False}}) is None
    assert MonthCue.from_config({"monthCue": {"enabled": True, "boost": 0}}) is None


def test_a_month_written_with_a_long_s_is_named_as_the_pattern_reads_it() -> None:
    # The pattern matches case-insensitively, and the long s (U+017F) is an "s" to it, the dotless and dotted i an
    # "i": such a month word is that month (lowered alone it was none, and raised), and the quick look for a month's
    # letters, made before the pattern, must find "sep" in it too (in the query lowered it does not).
    assert months_named("what changed in \u017feptember 2026?") == {(9, 2026)}
    assert months_named("what changed in Apr\u0131l?") == {(4, None)}
    assert months_named("what changed in APR\u0130L?") == {(4, None)}
    assert months_named("what changed in SEPTEMBER?") == {(9, None)}
    assert months_named("what changed in c16w5 common6?") == set()
