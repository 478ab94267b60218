"""Supersession, "as of" search, history and dedup on write, through the real pipeline and index (issue 16)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.sqlite_memory import open_mem, write

from symi_memory import tools

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
    from support.sqlite_memory import settings

    from symi_memory.config import load_config
    from symi_memory.manager import open_memory

    cfg = load_config(None, state_dir=tmp_path / "state",
                      overrides=settings(ON, plugins={"slots": {"memory": backend}}))
    return open_memory(cfg, workspace=ws, start=False)


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


def test_supersession_is_off_by_default_and_then_gives_exactly_the_plain_results(tmp_path: Path,
                                                                                 car_ws: Path) -> None:
    # Off by default: on devmem it cost "as of" answers (bench/supersession.py); see docs/benchmarks.md.
    with open_mem(tmp_path, car_ws) as mem:
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
    assert code == 0 and "supersession  off" in out
    code, data, err = cli(*base, "status", "--json", env=env, json_out=True)
    assert data["supersession"] == {"enabled": False, "applied": False, "storedVectors": True, "asOf": True,
                                    "unavailable": []}
