"""Dates inside undated notes: headings, section intros and the lines themselves date what "as of" leaves out
(issue 16), and a changed quantity is recognised even when the two lines read differently."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from support.sqlite_memory import open_mem, write

from symi_memory import tools
from symi_memory.chronology import event_dates, file_line_since
from symi_memory.config.fields import deep_merge
from symi_memory.supersession import THRESHOLDS, asks_about_past, same_thing, split_lines

# Small chunks, so that each section of a note is a hit of its own.
SMALL = {"chunking": {"tokens": 40, "overlap": 0}}
ON = deep_merge(SMALL, {"query": {"hybrid": {"supersession": {"enabled": True}}}})


def _day(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, tz=UTC).date().isoformat()


def _as_of(mem, query: str, day: str) -> list[dict]:  # type: ignore[no-untyped-def]
    out = tools.memory_search(mem, {"query": query, "minScore": 0, "asOf": day})
    assert "error" not in out, out
    return out["results"]


GARDEN = """# Balcony garden

## Spring (2026-03-01)
- The balcony tomatoes are watered by hand with the green can every morning.

## Drip system (2026-07-01)
- The balcony tomatoes are watered by the drip valve every evening at 21:00.
"""


def test_as_of_leaves_out_the_section_a_later_heading_dates(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "memory/garden.md", GARDEN)
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        query = "how are the balcony tomatoes watered?"
        may = _as_of(mem, query, "2026-05-01")
        assert may and may[0]["startLine"] <= 4 <= may[0]["endLine"]
        assert all(not (h["startLine"] <= 7 <= h["endLine"]) for h in may), "the July section is left out"
        # After the July heading's date both sections are memory; nothing is left out.
        august = _as_of(mem, query, "2026-08-01")
        assert any(h["startLine"] <= 7 <= h["endLine"] for h in august)


NETWORK = """# Home network

Current setup since the router swap on 2026-06-20. The old setup is under History.

## Router
- Router: gatekeeper, an OPNsense box on the shelf in the meter cupboard.

## History
- Until 2026-06-20 the router was the FRITZ!Box 7530 from the internet provider.
"""


def test_a_note_opening_with_since_when_it_holds_answers_as_of_from_its_history(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "memory/network.md", NETWORK)
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        query = "which router do we have at home?"
        june = _as_of(mem, query, "2026-06-01")
        assert june and june[0]["startLine"] <= 9 <= june[0]["endLine"], "the FRITZ!Box line answers"
        assert all(not (h["startLine"] <= 6 <= h["endLine"]) for h in june), "the router bought later is left out"
        # Without a date the current router is memory like the rest.
        now = tools.memory_search(mem, {"query": query, "minScore": 0})["results"]
        assert any(h["startLine"] <= 6 <= h["endLine"] for h in now)


def test_a_line_saying_since_which_month_is_left_out_before_that_month(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\n- Passwords: the family password manager is Vaultwarden since June 2026.\n")
    write(ws, "memory/2026-05-04.md", "# 2026-05-04\n\n- The family password manager is 1Password for now.\n")
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        may = _as_of(mem, "which password manager does the family use?", "2026-05-20")
        assert [h["path"] for h in may] == ["memory/2026-05-04.md"]
        july = _as_of(mem, "which password manager does the family use?", "2026-07-01")
        assert "MEMORY.md" in [h["path"] for h in july]


def test_which_dates_in_a_line_count_as_already_happened() -> None:
    days = lambda line: [_day(d) for d in event_dates(line)]  # noqa: E731
    assert days("- Router: OPNsense named gatekeeper (10.20.0.1), since 2026-06-20.") == ["2026-06-20"]
    assert days("- Promotion case submitted in August 2026, decision expected 2026-10-15.") == ["2026-08-01"]
    assert days("- Until 2026-06-20 the router was the FRITZ!Box.") == []
    assert days("- His mother is visiting Utrecht from 2026-10-02 for three weeks.") == []
    assert days("- Production peak (2026-08-04): p99 450 ms.") == ["2026-08-04"]


def test_headings_and_openings_date_the_lines_under_them() -> None:
    text = ("# Notes\n\nCurrent as of 2026-04-01.\n\n- Plain line.\n\n## Versions (last checked 2026-08-28)\n"
            "- Proxmox 9.0.6.\n\n## History\n- Until 2026-03-01 it was Proxmox 8.\n")
    dated = {n: _day(d) for n, d in file_line_since(text).items()}
    assert dated == {3: "2026-04-01", 5: "2026-04-01", 8: "2026-08-28"}


def test_a_changed_time_is_the_same_fact_even_when_the_lines_read_differently() -> None:
    older = split_lines("memory/2026-05-01.md", 3, "- Team standup is daily at 09:45 in the huddle.", None)[0]
    newer = split_lines("memory/2026-06-08.md", 3, "- First day of the new standup time: 09:15, daily.", None)[0]
    lunch = split_lines("memory/2026-06-08.md", 4, "- Team standup snacks are daily now, new budget.", None)[0]
    weights = {"standup": 1.0, "daily": 1.0, "time": 1.0}
    # 0.45 apart by meaning: below line_vector, but the two give different times of the standup.
    assert 0.45 < THRESHOLDS.line_vector
    assert same_thing(older, newer, 0.6, THRESHOLDS, weights, line_cos=0.45)
    assert not same_thing(older, lunch, 0.6, THRESHOLDS, weights, line_cos=0.45)


def test_a_question_about_mid_may_asks_about_the_past() -> None:
    assert asks_about_past("What made the pipeline fall behind in mid-May?")
    assert not asks_about_past("What time is the standup?")


def _weak_newer(older_text: str, newer_text: str) -> dict:  # type: ignore[type-arg]
    from symi_memory.types import Candidate
    from symi_memory_postprocess.supersede import find_supersessions

    # The older note is the strong hit (0.8), the newer one weak (0.3, under score_ratio 0.5 of it);
    # chunks and lines close by their stored vectors (cosine 0.8).
    old = Candidate(id="a", path="memory/2026-05-07.md", start_line=3, end_line=3, score=0.8, text=older_text)
    new = Candidate(id="b", path="memory/2026-06-03.md", start_line=3, end_line=3, score=0.3, text=newer_text)
    va, vb = [1.0, 0.0, 0.0], [0.8, 0.6, 0.0]
    return find_supersessions([old, new], {"a": va, "b": vb}, "How much vitamin D does Nadia take per day?",
                              line_vectors={"a": [(3, 3, va)], "b": [(3, 3, vb)]}, query_vector=[1.0, 0.2, 0.0])


def test_a_weaker_newer_line_saying_the_measured_amount_changed_still_supersedes() -> None:
    found = _weak_newer("- Nadia takes 1000 IU of vitamin D3 a day.",
                        "- Vitamin D3 raised to 2000 IU a day for Nadia.")
    assert list(found) == [0] and found[0][0] == 1
    # A different clock time is not a measured change: two events at different times of day.
    assert _weak_newer("- Nadia takes vitamin D3 with breakfast at 07:15 each day.",
                       "- Vitamin D3 for Nadia: updated the pill box at 09:50 today.") == {}


def test_a_much_weaker_newer_line_saying_a_plans_day_moved_still_supersedes() -> None:
    from symi_memory.types import Candidate
    from symi_memory_postprocess.supersede import find_supersessions

    # The newer note scores a fifth of the older one (it says much else), but says the ferry was rebooked:
    # another day for the same trip. Under conflict_score_ratio of the older's score it would demote nothing.
    def found(newer_score: float) -> dict:  # type: ignore[type-arg]
        old = Candidate(id="a", path="memory/2026-02-10.md", start_line=3, end_line=3, score=1.0,
                        text="- Ferry to Texel for the Visser family on 2026-05-16, back on 2026-05-23.")
        new = Candidate(id="b", path="memory/2026-04-02.md", start_line=3, end_line=3, score=newer_score,
                        text="- Rebooked the Visser family ferry to Texel: now out on 2026-05-30, back on 2026-06-06.")
        va, vb = [1.0, 0.0, 0.0], [0.8, 0.6, 0.0]
        return find_supersessions([old, new], {"a": va, "b": vb}, "When does the Visser family take the ferry "
                                  "to Texel?", line_vectors={"a": [(3, 3, va)], "b": [(3, 3, vb)]},
                                  query_vector=[1.0, 0.2, 0.0])

    assert list(found(0.2)) == [0] and found(0.2)[0][0] == 1
    assert found(0.05) == {}  # below conflict_score_ratio: about something else for this query


def test_an_undated_line_is_no_older_than_the_first_known_date_of_the_identifier_it_names(tmp_path: Path) -> None:
    # MEMORY.md says where backups go without a date; the homelab note dates that bucket from 2026-07-03.
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\n- Backups: restic every night from hestia to the bucket kessler-backups-eu2.\n")
    write(ws, "memory/homelab.md", "# Homelab\n\n## Backups\n- Repository since 2026-07-03: bucket "
                                   "kessler-backups-eu2 on the object store.\n")
    write(ws, "memory/2026-05-15.md", "# 2026-05-15\n\n- Backups go to the bucket kessler-restic-2024 every night.\n")
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        query = "which bucket do the backups go to?"
        june = [h["path"] for h in _as_of(mem, query, "2026-06-01")]
        assert june[0] == "memory/2026-05-15.md" and "MEMORY.md" not in june
        assert "MEMORY.md" in [h["path"] for h in _as_of(mem, query, "2026-07-10")]


def test_a_newer_line_restating_a_date_in_short_changes_nothing() -> None:
    confirmed = split_lines("memory/2026-07-14.md", 3, "- Tidewater go-live confirmed for 2026-07-28 with 10% of "
                            "carriers.", None)[0]
    restated = split_lines("memory/2026-07-15.md", 3, "- Today was Tidewater's original go-live date; the new "
                           "go-live date is 07-28.", None)[0]
    moved = split_lines("memory/2026-07-15.md", 4, "- Tidewater go-live moved again; the new go-live date is "
                        "08-04.", None)[0]
    assert not same_thing(confirmed, restated, 0.8, THRESHOLDS, line_cos=0.7)
    assert same_thing(confirmed, moved, 0.8, THRESHOLDS, line_cos=0.7)


def test_a_date_after_the_note_was_last_written_is_a_plan_not_a_later_line(tmp_path: Path) -> None:
    import os

    ws = tmp_path / "ws"
    note = write(ws, "MEMORY.md", "# Memory\n\n- Race: the city 10K run on 2026-09-27, from the town hall.\n")
    june = datetime(2026, 6, 1, tzinfo=UTC).timestamp()
    os.utime(note, (june, june))  # the note was last written on 2026-06-01: it cannot record September as past
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        hits = _as_of(mem, "when is the city 10K run?", "2026-08-01")
        assert [h["path"] for h in hits] == ["MEMORY.md"]


def test_an_impossible_month_date_in_a_note_does_not_break_as_of(tmp_path: Path) -> None:
    # "May 0000" (year 0) and "ſeptember 2026" (a long s, which matches "s" ignoring case) once raised
    # ValueError and KeyError out of every "as of" search that met the note.
    ws = tmp_path / "ws"
    write(ws, "memory/odd.md", "# Odd dates\n\nSince May 0000 the archive box holds the tax papers.\n"
                                "- The archive box moved to the attic since ſeptember 2026.\n")
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        hits = _as_of(mem, "where is the archive box?", "2026-12-01")
        assert hits
    assert event_dates("Since May 0000 the box") == []
    assert event_dates("since ſeptember 2026") == []


def test_a_heading_or_line_with_a_word_ending_in_ing_is_still_dated(tmp_path: Path) -> None:
    # Any word ending in "ing" once made a date a plan: "## Evening watering (2026-07-01)" dated nothing,
    # so "as of" May answered from the July section.
    assert [_day(d) for d in event_dates("Spring (2026-03-01)")] == ["2026-03-01"]
    assert [_day(d) for d in event_dates("- Building B hosts the archive since 2026-08-03.")] == ["2026-08-03"]
    assert event_dates("- His mother is visiting Utrecht from 2026-10-02 for three weeks.") == []
    ws = tmp_path / "ws"
    write(ws, "memory/garden.md", GARDEN.replace("## Drip system", "## Evening watering"))
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        may = _as_of(mem, "how are the balcony tomatoes watered?", "2026-05-01")
        assert may and may[0]["startLine"] <= 4 <= may[0]["endLine"]
        assert all(not (h["startLine"] <= 7 <= h["endLine"]) for h in may), "the July section is left out"


def test_the_last_representable_day_is_refused_as_an_argument_error(tmp_path: Path) -> None:
    # "9999-12-31" is a date, but the day after it (the cutoff) is not: the search used to fail as a whole.
    ws = tmp_path / "ws"
    write(ws, "memory/garden.md", GARDEN)
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        out = tools.memory_search(mem, {"query": "tomatoes", "asOf": "9999-12-31"})
        assert out["error"].startswith("asOf must be"), out


def test_a_line_near_the_query_by_a_name_alone_does_not_keep_an_undated_hit_in_an_as_of_search() -> None:
    from symi_memory.chronology import parse_date
    from symi_memory.supersession import salient, written_after
    from symi_memory.types import Candidate

    query = "Where does Nadia's promotion case stand?"
    weights = {t: {"nadia": 0.2}.get(t, 2.0) for t in salient(query)}  # a name on every note weighs little
    case = "- Pieter: Flow's manager until 2026-07-03, now in the Platform group; sponsor of Nadia's promotion case."

    def left_out(first: str) -> bool:
        c = Candidate(id="p", path="memory/people.md", start_line=3, end_line=4, score=0.5, text=first + "\n" + case,
                      mtime=parse_date("2026-09-01"))
        lines = split_lines(c.path, c.start_line, c.text, c.mtime)
        return written_after(c, parse_date("2026-07-01") or 0.0, salient(query), weights=weights, answer=lines)

    # The line about the case was written after 2026-07-03 ("until ..., now"); the one naming only Nadia (a
    # retired teacher: a past state, but not of the case) says nothing about when the answer was written.
    assert left_out("- Brigitte: Nadia's mother in Hamburg, a retired teacher; calls on Sundays.")
    # A line near the query by meaning alone (no query word) may be the answer in other words: the hit stays.
    assert not left_out("- The review board meets in the autumn round.")


def test_a_date_in_iso_basic_or_week_form_means_the_end_of_that_day_like_yyyy_mm_dd(tmp_path: Path) -> None:
    # "20260304" (and the week date "2026-W10-3", the same Wednesday) parsed as that day's first
    # instant, so the note written that day was left out, while "2026-03-04" kept it.
    from symi_memory.manager import parse_as_of

    ws = tmp_path / "ws"
    write(ws, "memory/2026-03-04.md", "# 2026-03-04\n\n- Ledger p95 dropped to 210 ms.\n")
    write(ws, "memory/2026-03-05.md", "# 2026-03-05\n\n- Ledger p95 rose again to 260 ms.\n")
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        expected = [h["path"] for h in _as_of(mem, "ledger p95", "2026-03-04")]
        assert expected == ["memory/2026-03-04.md"]
        for day in ("20260304", "2026-W10-3", "2026W103"):
            assert parse_as_of(day) == parse_as_of("2026-03-04"), day
            assert [h["path"] for h in _as_of(mem, "ledger p95", day)] == expected, day


def test_a_week_or_an_ordinal_date_as_of_covers_that_whole_week_or_day(tmp_path: Path) -> None:
    # "2026-W10" (a week, no day) meant the end of its Monday, so the Wednesday note of that week was left out;
    # the ordinal date "2026-063" (4 March) was refused as not a date.
    from symi_memory.manager import parse_as_of

    ws = tmp_path / "ws"
    write(ws, "memory/2026-03-04.md", "# 2026-03-04\n\n- Ledger p95 dropped to 210 ms.\n")
    write(ws, "memory/2026-03-09.md", "# 2026-03-09\n\n- Ledger p95 rose again to 260 ms.\n")
    assert parse_as_of("2026-W10") == parse_as_of("2026W10") == parse_as_of("2026-03-08")  # its Sunday
    assert parse_as_of("2026-063") == parse_as_of("2026063") == parse_as_of("2026-03-04")
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        for value in ("2026-W10", "2026-063"):
            assert [h["path"] for h in _as_of(mem, "ledger p95", value)] == ["memory/2026-03-04.md"], value


def test_a_date_with_the_zone_z_is_that_whole_day_and_another_zone_is_refused(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    # "2026-03-04Z" was read as that day's first instant (the note written that day was left out), and
    # "2026-03-04+02:00" / "-05:00" as 02:00 / 05:00 UTC of it: the zone was taken for a time of day.
    ws = tmp_path / "ws"
    write(ws, "memory/2026-03-04.md", "# 2026-03-04\n\n- Ledger p95 dropped to 210 ms.\n")
    write(ws, "memory/2026-03-05.md", "# 2026-03-05\n\n- Ledger p95 rose again to 260 ms.\n")
    code, out, err = cli("--workspace", str(ws), "search", "ledger p95", "--min-score", "0", "--as-of", "2026-03-04Z", "--json",
                         json_out=True)
    assert code == 0, err
    assert [h["path"] for h in out["results"]] == ["memory/2026-03-04.md"]
    for zoned in ("2026-03-04+02:00", "2026-03-04-05:00"):
        code, out, err = cli("--workspace", str(ws), "search", "ledger p95", "--as-of", zoned)
        assert code == 2 and out == "", (zoned, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("symi-memory: error: --as-of: asOf must be a date alone"), err
        assert "T00:00" + zoned[-6:] in lines[0], "the message shows the datetime that cuts there"
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        for day in ("20260304Z", "2026-W10-3Z", "2026-063Z", "2026-03-04+00:00"):
            assert [h["path"] for h in _as_of(mem, "ledger p95", day)] == ["memory/2026-03-04.md"], day
        for zoned in ("20260304+0100", "2026-W10-3-05:00", "2026-063+02"):
            out = tools.memory_search(mem, {"query": "ledger p95", "asOf": zoned})
            assert out["results"] == [] and out["error"].startswith("asOf must be a date alone"), (zoned, out)
        # A datetime with a zone cuts at that instant, as before.
        assert [h["path"] for h in _as_of(mem, "ledger p95", "2026-03-05T00:00+02:00")] == ["memory/2026-03-04.md"]
