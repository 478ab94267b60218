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
        assert out["stages"] == ["fused", "temporal-decay", "mmr", "final"]
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
