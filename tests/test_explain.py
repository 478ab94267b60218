"""``MemoryManager.explain``: the per-stage score breakdown the inspector shows, without changing search."""

from __future__ import annotations

from pathlib import Path

from symi_memory import load_config, open_memory


def _open(tmp_path: Path, workspace: Path, **query: object):
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    extra = "".join(f"{k} = {v}\n" for k, v in query.items())
    (state / "symi.toml").write_text(
        '[agents.defaults.memorySearch]\nprovider = "hash"\n'
        f"[agents.defaults.memorySearch.query]\n{extra}"
        "[agents.defaults.memorySearch.query.hybrid.mmr]\nenabled = true\n"
        "[agents.defaults.memorySearch.query.hybrid.temporalDecay]\nenabled = true\n", encoding="utf-8")
    mem = open_memory(load_config(state_dir=state), workspace=workspace, start=False)
    mem.sync()
    return mem


def test_explain_returns_the_search_answer_and_why_each_candidate_ranked(tmp_path: Path, workspace: Path) -> None:
    for day in range(1, 9):
        (workspace / "memory" / f"2026-02-0{day}.md").write_text(f"# Feb {day}\n\n- tea note {day} with biscuits\n")
    mem = _open(tmp_path, workspace, maxResults=3, minScore=0.3)
    with mem:
        now = 1_770_681_600.0  # 2026-02-10: the notes are 2 to 9 days old
        plain = mem.search("tea biscuits", now=now)
        out = mem.explain("tea biscuits", now=now)
        assert out["response"] == plain.to_dict()  # explain changes nothing in the answer
        assert out["stages"] == ["fused", "temporal-decay", "supersession", "month-cue", "mmr", "final"]
        rows = out["candidates"]
        returned = [r for r in rows if r["outcome"] == "returned"]
        assert [(r["path"], r["startLine"]) for r in returned] == [(h.path, h.start_line) for h in plain.results]
        assert len(returned) == 3
        beyond = [r for r in rows if r["outcome"] == "beyond maxResults"]
        below = [r for r in rows if r["outcome"] == "below minScore"]
        assert beyond and all(r["stages"]["final"]["score"] >= 0.3 for r in beyond)
        assert all(r["stages"]["final"]["score"] < 0.3 for r in below)
        for r in rows:
            # Decay only lowers a score; the final score is the one after the last post-processor.
            assert r["stages"]["temporal-decay"]["score"] <= r["stages"]["fused"]["score"] + 1e-9
            assert r["stages"]["final"]["score"] == r["stages"]["mmr"]["score"]
            assert r["keyword"] is not None or r["vector"] is not None
        assert out["minScore"] == 0.3 and out["maxResults"] == 3


def test_explain_shows_supersession_demotions_and_what_as_of_left_out(tmp_path: Path) -> None:
    from support.sqlite_memory import open_mem, write

    ws = tmp_path / "ws"
    write(ws, "memory/2026-03-01.md", "# 2026-03-01\n\n- The car is a blue hatchback.\n- Booked the dentist.\n")
    write(ws, "memory/2026-06-01.md", "# 2026-06-01\n\n- Sold the hatchback; now the car is a red SUV.\n")
    with open_mem(tmp_path, ws, {"query": {"hybrid": {"supersession": {"enabled": True}}}}) as mem:
        mem.sync()
        plain = mem.search("what car do I drive?", min_score=0)
        out = mem.explain("what car do I drive?", min_score=0)
        assert out["response"] == plain.to_dict()
        assert "supersession" in out["stages"]
        rows = {r["path"]: r for r in out["candidates"]}
        march, june = rows["memory/2026-03-01.md"], rows["memory/2026-06-01.md"]
        # The older line ranked first on words, then supersession put it below the newer one and says why.
        assert march["stages"]["fused"]["rank"] < june["stages"]["fused"]["rank"]
        demoted = march["stages"]["supersession"]
        assert demoted["score"] < march["stages"]["fused"]["score"]
        assert demoted["score"] < june["stages"]["supersession"]["score"]
        assert demoted["supersededBy"] == {"path": "memory/2026-06-01.md", "startLine": 3, "endLine": 3}
        assert june["stages"]["supersession"]["supersedes"] == [
            {"path": "memory/2026-03-01.md", "startLine": 3, "endLine": 3}]
        assert "supersededBy" not in march["stages"]["fused"]

        # As of April the June note did not exist yet: it is listed as left out, and nothing is superseded.
        then = mem.explain("what car do I drive?", min_score=0, as_of="2026-04-01")
        assert then["response"] == mem.search("what car do I drive?", min_score=0, as_of="2026-04-01").to_dict()
        assert then["asOf"] is not None and then["stages"][:2] == ["fused", "asOf"]
        rows = {r["path"]: r for r in then["candidates"]}
        assert rows["memory/2026-06-01.md"]["outcome"] == "written after asOf"
        assert "asOf" not in rows["memory/2026-06-01.md"]["stages"]
        assert rows["memory/2026-03-01.md"]["outcome"] == "returned"
        assert "supersededBy" not in rows["memory/2026-03-01.md"]["stages"]["final"]
