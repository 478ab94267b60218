"""The public API with odd but legal input, as an integrator's runtime (or a hostile caller) hands it over."""

from __future__ import annotations

from pathlib import Path

import pytest

from symi_memory import ConfigError, open_memory


def test_agent_id_too_long_for_a_file_name_is_a_config_error(tmp_path: Path) -> None:
    # Before: sqlite's "unable to open database file" (the index file name is longer than the file system takes).
    with pytest.raises(ConfigError, match=r"agent id 'x{20}.*too long"):
        open_memory(agent_id="x" * 300, workspace=tmp_path / "ws", state_dir=tmp_path / "state", start=False)
    long_ok = "é" * 64  # 128 UTF-8 bytes: the longest id taken
    with open_memory(agent_id=long_ok, workspace=tmp_path / "ws", state_dir=tmp_path / "state", start=False) as m:
        assert m.sync().errors == ()
        assert Path(m.status()["dbPath"]).name == f"{long_ok}.sqlite"


def test_agent_id_that_is_not_a_string_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"agent id 5 must be a string"):
        open_memory(agent_id=5, workspace=tmp_path / "ws", state_dir=tmp_path / "state", start=False)  # type: ignore[arg-type]


def _one_long_line_and_five_days(tmp_path: Path, entries: int) -> Path:
    """A workspace: memory/log.md whose one line holds ``entries`` ledger entries (a line longer than a chunk), and
    five daily notes naming the ledger once each."""
    from support.sqlite_memory import write

    ws = tmp_path / "ws"
    write(ws, "memory/log.md", "# Log\n\n" + " ".join(f"ledger entry {i} settled" for i in range(entries)) + "\n")
    for i in range(5):
        write(ws, f"memory/2026-03-0{i + 1}.md", f"# Day {i}\n\n- The ledger was reconciled by team {i}.\n")
    return ws


def test_a_long_line_fills_one_result_not_many(tmp_path: Path) -> None:
    # A line longer than a chunk becomes several chunks that all cite it (behaviour §3). They were returned as
    # separate hits with the same path and lines (`memory/log.md#L3` four times): the same text for memory_get,
    # and the other notes pushed out of maxResults.
    from support.sqlite_memory import open_mem

    from symi_memory import tools

    ws = _one_long_line_and_five_days(tmp_path, 1500)
    with open_mem(tmp_path, ws, {"provider": "none"}) as mem:
        mem.sync()
        out = tools.memory_search(mem, {"query": "ledger", "maxResults": 6, "minScore": 0})
        cited = [(r["path"], r["startLine"], r["endLine"]) for r in out["results"]]
        assert len(cited) == 6 and len(set(cited)) == 6, cited
        # The line's pieces cite its first chunk (with the heading), the line alone, and its last piece with the
        # blank line after it: three ranges at most, so the daily notes get the other places.
        assert sum(p == "memory/log.md" for p, _, _ in cited) <= 3, cited
        assert sum(p.startswith("memory/2026-03-") for p, _, _ in cited) >= 3, cited
        assert mem.explain("ledger", max_results=6, min_score=0)["response"] == out


@pytest.mark.parametrize(("provider", "backend"), [("none", None), ("hash", None), ("hash", "faiss")])
def test_a_line_longer_than_the_candidate_pool_leaves_room_for_other_notes(tmp_path: Path, provider: str,
                                                                           backend: str | None) -> None:
    from support.sqlite_memory import open_mem

    from symi_memory import tools

    # A line of more pieces than the keyword side fetches (maxResults x candidateMultiplier x 3, 72 by default) took
    # every place of the pool before: the pieces share its lines and are collapsed only after retrieval, so the
    # search returned that line alone (the five daily notes holding the word were never fetched).
    ws = _one_long_line_and_five_days(tmp_path, 8000)
    if backend == "faiss":
        pytest.importorskip("faiss")
    with open_mem(tmp_path, ws, {"provider": provider}, backend=backend) as mem:
        mem.sync()
        out = tools.memory_search(mem, {"query": "ledger", "maxResults": 6, "minScore": 0})
        assert out["mode"] == ("fts-only" if provider == "none" else "hybrid")
        assert sum(r["path"].startswith("memory/2026-03-") for r in out["results"]) >= 3, out["results"]
        assert mem.explain("ledger", max_results=6, min_score=0)["response"] == out
