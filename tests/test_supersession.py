"""Supersession, "as of" search, history and dedup on write, through the real pipeline and index (issue 16)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.sqlite_memory import open_local, open_mem, write

from symi_memory import tools
from symi_memory.config.fields import deep_merge

ON = {"query": {"hybrid": {"supersession": {"enabled": True}}}}

MARCH = "memory/2026-03-01.md"
JUNE = "memory/2026-06-01.md"


@pytest.fixture
def car_ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    write(ws, MARCH, "# 2026-03-01\n\n- The car is a blue hatchback.\n- Booked the dentist for Tuesday.\n")
    write(ws, JUNE, "# 2026-06-01\n\n- Sold the hatchback; now the car is a red SUV.\n- Bought running shoes.\n")
    write(ws, "memory/2026-02-01.md", "# 2026-02-01\n\n- The bike is a green gravel bike.\n")
    return ws


def _open_backend(tmp_path: Path, ws: Path, backend: str):  # type: ignore[no-untyped-def]
    return open_mem(tmp_path, ws, ON, backend=backend)


def _hits(out: dict) -> list[dict]:
    assert "error" not in out, out
    return out["results"]


@pytest.mark.parametrize("backend", ["builtin-sqlite", "faiss"])
def test_acceptance_current_car_first_and_old_one_marked(tmp_path: Path, car_ws: Path, backend: str) -> None:
    with _open_backend(tmp_path, car_ws, backend) as mem:
        mem.sync()
        hits = _hits(tools.memory_search(mem, {"query": "what car do I drive?", "minScore": 0}))
        assert hits[0]["path"] == JUNE
        march = [h for h in hits if h["path"] == MARCH]
        assert march, "the March line is still returned, marked as superseded"
        assert march[0]["supersededBy"] == {"path": JUNE, "startLine": 3, "endLine": 3}
        assert hits[0]["supersedes"] == [{"path": MARCH, "startLine": 3, "endLine": 3}]
        # Unrelated old memory keeps its place and carries no marks.
        bike = _hits(tools.memory_search(mem, {"query": "which bike do I ride", "minScore": 0}))
        assert bike[0]["path"] == "memory/2026-02-01.md" and "supersededBy" not in bike[0]


# Issue 16's first acceptance item word for word: the June line shares no word with the question ("car", "drive"),
# so only its naming the March line's hatchback with "Sold" makes it the newer version. Judged with the offline
# local model, as the issue measured it (the hash provider's vectors do not bring June near the question at all).
ISSUE_QUERY = "what car do I drive?"


@pytest.fixture
def issue_car_ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    write(ws, MARCH, "# 2026-03-01\n\n- The car is a blue hatchback.\n")
    write(ws, JUNE, "# 2026-06-01\n\n- Sold the hatchback; now a red SUV.\n")
    write(ws, "MEMORY.md", "# Memory\n\n- Likes hiking in the Alps.\n")
    return ws


def _open_local_backend(tmp_path: Path, ws: Path, backend: str):  # type: ignore[no-untyped-def]
    """The default config with the local model on ``backend``; skips when the model is not installed."""
    return open_local(tmp_path, ws, backend=backend)


@pytest.mark.parametrize("backend", ["builtin-sqlite", "faiss"])
def test_acceptance_in_the_issues_own_words(tmp_path: Path, issue_car_ws: Path, backend: str) -> None:
    with _open_local_backend(tmp_path, issue_car_ws, backend) as mem:
        mem.sync()
        for args in ({"query": ISSUE_QUERY}, {"query": ISSUE_QUERY, "minScore": 0}):  # as configured; ranking view
            hits = _hits(tools.memory_search(mem, args))
            assert hits[0]["path"] == JUNE, hits
            assert hits[0]["supersedes"] == [{"path": MARCH, "startLine": 3, "endLine": 3}]
            march = [h for h in hits if h["path"] == MARCH]
            assert all(h["supersededBy"] == {"path": JUNE, "startLine": 3, "endLine": 3} for h in march)
            if "minScore" in args:
                assert march, "the ranking view still returns the March line, marked"
        as_of = _hits(tools.memory_search(mem, {"query": ISSUE_QUERY, "asOf": "2026-04-01"}))
        assert as_of[0]["path"] == MARCH and "supersededBy" not in as_of[0]
        assert all(h["path"] != JUNE for h in as_of)


def test_history_dates_versions_written_before_1970_and_on_its_first_day(tmp_path: Path) -> None:
    # Notes dated before 1970 (a family history, a digitised diary) were listed with no date at all.
    ws = tmp_path / "ws"
    write(ws, "memory/1968-03-01.md", "# 1968-03-01\n\n- The car is a blue hatchback.\n")
    write(ws, "memory/1970-01-01.md", "# 1970-01-01\n\n- Sold the hatchback; now the car is a red SUV.\n")
    write(ws, "MEMORY.md", "# Memory\n\n- Likes hiking in the Alps.\n")
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        got = [(v["date"], v["current"]) for v in mem.history("what car do I drive?", min_score=0)]
    assert got == [("1968-03-01", False), ("1970-01-01", True)]


@pytest.mark.parametrize("backend", ["builtin-sqlite", "faiss"])
def test_history_of_what_memory_never_said_is_empty(tmp_path: Path, issue_car_ws: Path, backend: str) -> None:
    # It listed the best-scoring line however unrelated ("Likes hiking in the Alps" as the current version of
    # the dentist appointment) where search, with the same floor, answers nothing.
    with _open_local_backend(tmp_path, issue_car_ws, backend) as mem:
        mem.sync()
        for query in ("when is my dentist appointment?", "quarterly tax filing deadline"):
            assert _hits(tools.memory_search(mem, {"query": query})) == []
            assert mem.history(query) == []
            assert mem.history(query, as_of="2026-04-01") == []
        assert [(v["path"], v["current"]) for v in mem.history(ISSUE_QUERY)] == [(MARCH, False), (JUNE, True)]
        assert [(v["path"], v["current"]) for v in mem.history(ISSUE_QUERY, as_of="2026-04-01")] == [(MARCH, True)]


@pytest.mark.parametrize("june", [
    "Washed the hatchback and vacuumed the seats.",  # the thing, but nothing ends
    "The hatchback needs new tyres before winter.",  # "new" is no ending of the hatchback
    "Sold my old bike to a neighbour; now I walk to the bakery.",  # another thing sold
    "Replaced the hatchback's wiper blades; now it is ready for the rain.",  # a part of it replaced
    "Tom sold his hatchback; he now drives a red SUV.",  # someone else's
])
def test_a_newer_line_naming_the_thing_without_ending_it_supersedes_nothing(tmp_path: Path, june: str) -> None:
    ws = tmp_path / "ws"
    write(ws, MARCH, "# 2026-03-01\n\n- The car is a blue hatchback.\n")
    write(ws, JUNE, f"# 2026-06-01\n\n- {june}\n")
    with _open_local_backend(tmp_path, ws, "builtin-sqlite") as mem:
        mem.sync()
        hits = _hits(tools.memory_search(mem, {"query": ISSUE_QUERY, "minScore": 0}))
        assert hits[0]["path"] == MARCH and "supersededBy" not in hits[0]


def test_cli_search_in_the_issues_own_words(cli, issue_car_ws: Path) -> None:  # type: ignore[no-untyped-def]
    env = {"SYMI_MEMORY_TESTING": "1"}
    base = ("--workspace", str(issue_car_ws))
    code, data, err = cli(*base, "search", "--json", ISSUE_QUERY, env=env, json_out=True)
    assert code == 0, err
    if data["provider"] != "local":
        pytest.skip("the local model is not installed")
    hits = data["results"]
    assert hits[0]["path"] == JUNE
    assert all(h["supersededBy"] == {"path": JUNE, "startLine": 3, "endLine": 3} for h in hits if h["path"] == MARCH)
    code, data, err = cli(*base, "search", "--json", "--as-of", "2026-04-01", ISSUE_QUERY, env=env, json_out=True)
    assert code == 0, err
    assert data["results"][0]["path"] == MARCH and "supersededBy" not in data["results"][0]
    assert all(h["path"] != JUNE for h in data["results"])
    code, data, err = cli(*base, "history", "--json", ISSUE_QUERY, env=env, json_out=True)
    assert code == 0, err
    assert [(v["path"], v["startLine"], v["current"]) for v in data["versions"]] == [(MARCH, 3, False), (JUNE, 3, True)]


def test_acceptance_as_of_answers_as_memory_stood(tmp_path: Path, car_ws: Path) -> None:
    with open_mem(tmp_path, car_ws, ON) as mem:
        mem.sync()
        out = tools.memory_search(mem, {"query": "what car do I drive?", "minScore": 0, "asOf": "2026-04-01"})
        hits = _hits(out)
        assert hits[0]["path"] == MARCH and "supersededBy" not in hits[0]
        assert all(h["path"] != JUNE for h in hits)
        # The day itself counts: a note dated on the as-of day was written by then.
        on_day = _hits(tools.memory_search(mem, {"query": "what car do I drive?", "minScore": 0, "asOf": "2026-06-01"}))
        assert on_day[0]["path"] == JUNE


def test_supersession_is_on_by_default(tmp_path: Path, car_ws: Path) -> None:
    # On by default since line vectors: on devmem and convmem it costs neither hit@5 nor paraphrase MRR
    # (bench/supersession.py, docs/benchmarks.md).
    with open_mem(tmp_path, car_ws) as mem:
        mem.sync()
        hits = _ranked(mem, "what car do I drive?")
        assert hits[0]["path"] == JUNE
        assert [h["supersededBy"] for h in hits if h["path"] == MARCH] == [
            {"path": JUNE, "startLine": 3, "endLine": 3}]


def test_supersession_disabled_gives_exactly_the_plain_results(tmp_path: Path, car_ws: Path) -> None:
    off_cfg = {"query": {"hybrid": {"supersession": {"enabled": False}}}}
    with open_mem(tmp_path, car_ws, off_cfg) as mem:
        mem.sync()
        off = mem.search("what car do I drive?", min_score=0)
        plain = mem.pipeline.run("what car do I drive?", mem.backend.search(  # type: ignore[union-attr]
            __import__("symi_memory.types", fromlist=["SearchQuery"]).SearchQuery(
                text="what car do I drive?", max_results=6, min_score=0, candidate_limit=24)).candidates,
            max_results=6, min_score=0)
        assert [(h.path, h.start_line, h.score) for h in off.results] == [(c.path, c.start_line, c.score) for c in plain]
        assert all("supersededBy" not in h.to_dict() for h in off.results)
        assert off.results[0].path == MARCH  # without supersession the old line wins on words


def test_bad_as_of_is_an_error_shape(tmp_path: Path, car_ws: Path) -> None:
    with open_mem(tmp_path, car_ws) as mem:
        out = tools.memory_search(mem, {"query": "car", "asOf": "next tuesday"})
        assert out["results"] == [] and "asOf" in out["error"]


def test_append_refuses_a_restatement_and_names_a_change(tmp_path: Path, car_ws: Path) -> None:
    with open_mem(tmp_path, car_ws) as mem:
        mem.sync()
        before = {p: p.read_bytes() for p in car_ws.rglob("*.md")}
        out = tools.memory_append(mem, {"text": "The car is a blue hatchback."})
        assert out["appended"] is False and out["bytesWritten"] == 0
        assert out["duplicateOf"] == {"path": MARCH, "startLine": 3, "endLine": 3}
        assert {p: p.read_bytes() for p in car_ws.rglob("*.md")} == before
        forced = tools.memory_append(mem, {"text": "The car is a blue hatchback.", "allowDuplicate": True})
        assert forced["appended"] is True and forced["bytesWritten"] > 0
        changed = tools.memory_append(mem, {"text": "The dentist moved to Thursday.", "target": "long-term"})
        assert changed["appended"] is True and changed["path"] == "MEMORY.md"
        assert changed["supersedes"] == {"path": MARCH, "startLine": 4, "endLine": 4}
        assert "dentist moved to Thursday" in (car_ws / "MEMORY.md").read_text(encoding="utf-8")
        fresh = tools.memory_append(mem, {"text": "Started learning the cello.", "target": "long-term"})
        assert fresh["appended"] is True and "supersedes" not in fresh and "duplicateOf" not in fresh


def test_cli_search_as_of_history_and_append(cli, tmp_path: Path, car_ws: Path) -> None:  # type: ignore[no-untyped-def]
    env = {"SYMI_MEMORY_TESTING": "1"}
    base = ("--workspace", str(car_ws))
    code, out, err = cli(*base, "config", "set", "agents.defaults.memorySearch.provider", "hash", env=env)
    assert code == 0, err
    code, out, err = cli(*base, "config", "set", "agents.defaults.memorySearch.query.hybrid.supersession.enabled",
                         "true", env=env)
    assert code == 0, err
    code, data, err = cli(*base, "search", "what car do I drive?", "--min-score", "0", "--json", env=env, json_out=True)
    assert code == 0, err
    assert data["results"][0]["path"] == JUNE
    code, data, err = cli(*base, "search", "what car do I drive?", "--min-score", "0", "--as-of", "2026-04-01",
                          "--json", env=env, json_out=True)
    assert code == 0 and data["results"][0]["path"] == MARCH
    assert all(h["path"] != JUNE for h in data["results"])
    code, out, err = cli(*base, "search", "car", "--as-of", "April", env=env)
    assert code == 2 and "--as-of" in err and "Traceback" not in err
    code, data, err = cli(*base, "history", "what car do I drive?", "--json", env=env, json_out=True)
    assert code == 0, err
    assert [(v["path"], v["startLine"], v["date"], v["current"]) for v in data["versions"]] == [
        (MARCH, 3, "2026-03-01", False), (JUNE, 3, "2026-06-01", True)]
    code, out, err = cli(*base, "history", "what car do I drive?", "--as-of", "2026-04-01", env=env)
    assert code == 0 and MARCH in out and JUNE not in out
    code, data, err = cli(*base, "append", "The car is a blue hatchback.", "--json", env=env, json_out=True)
    assert code == 0 and data["appended"] is False and data["duplicateOf"]["path"] == MARCH
    code, out, err = cli(*base, "append", "Started learning the cello.", "--long-term", env=env)
    assert code == 0 and "appended" in out and "MEMORY.md" in out
    assert "cello" in (car_ws / "MEMORY.md").read_text(encoding="utf-8")
    code, out, err = cli(*base, "append", "   ", env=env)
    assert code == 2 and "empty" in err


def test_status_says_whether_supersession_is_applied(cli, tmp_path: Path, car_ws: Path) -> None:  # type: ignore[no-untyped-def]
    env = {"SYMI_MEMORY_TESTING": "1"}
    base = ("--workspace", str(car_ws))
    assert cli(*base, "config", "set", "agents.defaults.memorySearch.provider", "hash", env=env)[0] == 0
    code, out, err = cli(*base, "status", env=env)
    assert code == 0 and "supersession  applied" in out
    code, data, err = cli(*base, "status", "--json", env=env, json_out=True)
    assert data["supersession"] == {"enabled": True, "applied": True, "storedVectors": True, "asOf": True,
                                    "unavailable": []}
    assert cli(*base, "config", "set", "agents.defaults.memorySearch.query.hybrid.supersession.enabled", "false",
               env=env)[0] == 0
    code, out, err = cli(*base, "status", env=env)
    assert code == 0 and "supersession  off" in out


def _ranked(mem, query: str) -> list[dict]:  # type: ignore[no-untyped-def]
    return _hits(tools.memory_search(mem, {"query": query, "minScore": 0}))


def test_a_hit_is_judged_by_the_line_it_answers_with_not_a_side_remark(tmp_path: Path) -> None:
    # Every chat line starts with the speaker's name, so the name alone says nothing about the subject:
    # a newer chat that changes the migraine count must not demote the line about the allergy.
    ws = tmp_path / "ws"
    write(ws, "memory/2026-01-11.md", "# 2026-01-11\n\nPriya: I am allergic to penicillin, I got a rash as a kid.\n"
                                      "Priya: Migraine attacks this month: 4 attacks.\n")
    write(ws, "memory/2026-06-19.md", "# 2026-06-19\n\nPriya: Migraine attacks this month: now 2 attacks, "
                                      "since candesartan.\n")
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        hits = _ranked(mem, "What is Priya allergic to?")
        assert hits[0]["path"] == "memory/2026-01-11.md" and "supersededBy" not in hits[0]
        # Asked about the migraines, the newer count does supersede the older one.
        count = _ranked(mem, "How many migraines does Priya have?")
        assert count[0]["path"] == "memory/2026-06-19.md"
        assert [h["supersededBy"] for h in count if h["path"] == "memory/2026-01-11.md"] == [
            {"path": "memory/2026-06-19.md", "startLine": 3, "endLine": 3}]


def test_a_different_quantity_of_the_same_kind_is_a_change(tmp_path: Path) -> None:
    # No "moved to" or "now": the time itself differs (09:45, then 10:00), so the standup changed.
    ws = tmp_path / "ws"
    write(ws, "memory/2026-05-01.md", "# 2026-05-01\n\n- Team standup is daily at 09:45 in the huddle room.\n")
    write(ws, "memory/2026-08-03.md", "# 2026-08-03\n\n- Team standup at 10:00 in the huddle room, Monday to "
                                      "Friday.\n")
    write(ws, "memory/2026-08-04.md", "# 2026-08-04\n\n- Team lunch at 12:30 in the canteen.\n")
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        hits = _ranked(mem, "What time is the team standup?")
        assert hits[0]["path"] == "memory/2026-08-03.md"
        older = [h for h in hits if h["path"] == "memory/2026-05-01.md"]
        assert older and older[0]["supersededBy"] == {"path": "memory/2026-08-03.md", "startLine": 3, "endLine": 3}
        # A different time of something else (lunch) changes nothing.
        assert all("supersededBy" not in h for h in hits if h["path"] == "memory/2026-08-04.md")


def test_a_newer_line_without_the_identifier_asked_for_replaces_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "memory/2026-08-15.md", "# 2026-08-15\n\n- The restic cache filled the root disk; moved the "
                                      "restic cache with RESTIC_CACHE_DIR=/srv/cache/restic.\n")
    write(ws, "memory/2026-08-30.md", "# 2026-08-30\n\n- The restic cache now lives on the new Samsung data disk "
                                      "instead of the root disk.\n")
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        hits = _ranked(mem, "RESTIC_CACHE_DIR restic cache")
        assert hits[0]["path"] == "memory/2026-08-15.md" and "supersededBy" not in hits[0]
        # Asked without the identifier, the newer statement of where the cache lives wins.
        where = _ranked(mem, "where does the restic cache live")
        assert where[0]["path"] == "memory/2026-08-30.md"


def test_a_plans_day_moved_by_a_newer_plan_is_superseded(tmp_path: Path) -> None:
    # No change word and no quantity: the newer note names another day for the same visit.
    ws = tmp_path / "ws"
    write(ws, "memory/2026-03-02.md", "# 2026-03-02\n\n- Grandpa Tomasz plans to stay with us in Gdansk from "
                                      "2026-05-20 for two weeks.\n- Replaced the kitchen tap.\n")
    write(ws, "memory/2026-04-15.md", "# 2026-04-15\n\n- Grandpa Tomasz is staying with us in Gdansk from "
                                      "2026-06-03, for two weeks.\n- The tomato seedlings are up.\n")
    write(ws, "memory/2026-06-20.md", "# 2026-06-20\n\n- Lena's summer holiday runs 07-18 to 08-30.\n")
    write(ws, "memory/2026-09-02.md", "# 2026-09-02\n\n- Lena's autumn holiday runs 10-17 to 10-25.\n")
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        hits = _ranked(mem, "When is Grandpa Tomasz coming to stay with us?")
        assert hits[0]["path"] == "memory/2026-04-15.md"
        older = [h for h in hits if h["path"] == "memory/2026-03-02.md"]
        assert older and older[0]["supersededBy"] == {"path": "memory/2026-04-15.md", "startLine": 3, "endLine": 3}
        # Another event's days (the autumn holiday) do not move the summer holiday's.
        summer = _ranked(mem, "When is Lena's summer holiday?")
        assert summer[0]["path"] == "memory/2026-06-20.md" and "supersededBy" not in summer[0]


TEAM = "- Team Flow notes: Pieter de Wit, Nadia Kessler, Jonas Berg and Samira Haddad at the Croeselaan office.\n"


@pytest.mark.parametrize("units", ["lines", "off"])
def test_lines_are_judged_by_their_own_vectors_when_the_index_has_them(tmp_path: Path, units: str) -> None:
    # The two notes share a long line, so their chunk vectors are close; the standup line and the snack
    # budget line are not about the same thing. With line vectors (chunking.units = lines, the default)
    # the newer line does not supersede the standup time; by chunk vectors alone (units off) it did.
    ws = tmp_path / "ws"
    write(ws, "memory/2026-05-01.md", f"# 2026-05-01\n\n{TEAM}- Standup with Pieter at 09:45.\n")
    write(ws, "memory/2026-08-03.md", f"# 2026-08-03\n\n{TEAM}- Standup snacks: Pieter now has a new budget "
                                      "of 12 euros.\n")
    with open_mem(tmp_path, ws, deep_merge(ON, {"chunking": {"units": units}})) as mem:
        mem.sync()
        hits = _ranked(mem, "When is the standup with Pieter?")
        older = [h for h in hits if h["path"] == "memory/2026-05-01.md"]
        assert older
        if units == "lines":
            assert hits[0]["path"] == "memory/2026-05-01.md" and "supersededBy" not in older[0]
        else:
            assert older[0]["supersededBy"] == {"path": "memory/2026-08-03.md", "startLine": 4, "endLine": 4}


@pytest.mark.parametrize("query", [
    "What car did I have? Can you remind me?",
    "What car did I have and do my errands with?",
])
def test_a_past_question_with_a_request_or_a_second_verb_keeps_the_old_memory(tmp_path: Path, car_ws: Path,
                                                                             query: str) -> None:
    # A request to the assistant or a verb shared with the past clause is not a question about now: the March
    # line is what is asked for, and supersession leaves it unmarked, as for any past question.
    with open_mem(tmp_path, car_ws, ON) as mem:
        mem.sync()
        march = [h for h in _hits(tools.memory_search(mem, {"query": query, "minScore": 0})) if h["path"] == MARCH]
        assert march and "supersededBy" not in march[0]
        # A second question about now still asks for the current car.
        now = _hits(tools.memory_search(mem, {"query": "What car did I have, and what car do I drive now?",
                                              "minScore": 0}))
        assert [h["supersededBy"] for h in now if h["path"] == MARCH] == [{"path": JUNE, "startLine": 3, "endLine": 3}]


def test_a_month_named_in_the_query_does_not_undo_the_supersession_of_its_notes(tmp_path: Path,
                                                                                 car_ws: Path) -> None:
    # The March note answers the first question and is lifted by the month cue, but the second asks what is
    # true now: the March car is still marked as replaced by June's, as it is with the cue off.
    q = {"query": "What car did I drive in March? What car do I drive now?", "minScore": 0}
    for cue in (True, False):
        with open_mem(tmp_path / str(cue), car_ws, deep_merge(ON, {"query": {"hybrid": {"monthCue": {"enabled": cue}}}})) as mem:
            mem.sync()
            march = [h for h in _hits(tools.memory_search(mem, q)) if h["path"] == MARCH]
            assert march[0].get("supersededBy") == {"path": JUNE, "startLine": 3, "endLine": 3}, cue


def test_a_keyword_only_index_judges_supersession_by_the_lines_terms(tmp_path: Path, car_ws: Path) -> None:
    # Without an embedding provider the index stores no vectors; the newer line that says the car changed still
    # puts the current car first and marks the old line, by the lines' own terms (as history has it).
    with open_mem(tmp_path, car_ws, {**ON, "provider": "none"}) as mem:
        mem.sync()
        assert mem.status()["provider"] in (None, "none")
        hits = _ranked(mem, "which car is it?")
        assert hits[0]["path"] == JUNE, hits
        assert hits[0]["supersedes"] == [{"path": MARCH, "startLine": 3, "endLine": 3}]
        march = [h for h in hits if h["path"] == MARCH]
        assert march and march[0]["supersededBy"] == {"path": JUNE, "startLine": 3, "endLine": 3}
        # A question the newer note does not change keeps its answer unmarked.
        bike = _ranked(mem, "which bike do I ride")
        assert bike[0]["path"] == "memory/2026-02-01.md" and "supersededBy" not in bike[0]


@pytest.mark.parametrize("provider", ["none", "hash"])
def test_a_note_of_the_same_day_in_another_file_supersedes_nothing(tmp_path: Path, provider: str) -> None:
    # Two notes of one day: the date says nothing of which was written later, and a line's number in one file says
    # nothing of when it was written against a line of another file. Neither is marked as the other's newer version.
    ws = tmp_path / "ws"
    write(ws, "memory/2026-03-01.md", "# 2026-03-01\n\n- Standup is at 09:45.\n- Standup moved to 10:00 instead.\n")
    write(ws, "memory/2026-03-01-evening.md", "# 2026-03-01\n\n- Standup now at 10:15 instead.\n")
    with open_mem(tmp_path, ws, {**ON, "provider": provider}) as mem:
        mem.sync()
        hits = _ranked(mem, "what time is standup?")
        assert len(hits) == 2, hits
        for h in hits:
            assert "supersededBy" not in h and "supersedes" not in h, hits


def test_hits_without_stored_vectors_are_paired_by_their_terms_beside_hits_with_them() -> None:
    # An index whose newest notes are not embedded yet (the provider was down when they were written): the two car
    # notes have no stored vector, an unrelated note has one. The car notes are judged by their lines' terms, as in
    # an index with no vectors at all; one embedded hit in the window does not turn that off.
    from symi_memory.types import Candidate
    from symi_memory_postprocess.supersede import find_supersessions

    march = Candidate(id="m", path=MARCH, start_line=1, end_line=3, score=0.8,
                      text="# 2026-03-01\n\n- The car is a blue hatchback.")
    june = Candidate(id="j", path=JUNE, start_line=1, end_line=3, score=0.7,
                     text="# 2026-06-01\n\n- Sold the hatchback; now the car is a red SUV.")
    hike = Candidate(id="h", path="memory/2026-01-05.md", start_line=1, end_line=3, score=0.2,
                     text="# 2026-01-05\n\n- Hiked 12 km with the car parked at the lake.")
    query = "which car is it?"
    alone = find_supersessions([march, june], {}, query)
    assert list(alone) == [0] and alone[0][0] == 1
    mixed = find_supersessions([march, june, hike], {"h": [0.1, 0.9, 0.3]}, query)
    assert list(mixed) == [0] and mixed[0][0] == 1, mixed
    # An "as of" search keeps to pairs with vectors, as before.
    assert find_supersessions([march, june, hike], {"h": [0.1, 0.9, 0.3]}, query, as_of=1.9e9) == {}
