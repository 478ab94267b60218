"""In an "as of" search, a past state that still held on the date ("Until 2026-05-31 the gardener was Kees ...")
answers in the place of its later version, which the search leaves out as written after the date (issue 16,
branch ``asof16b``; devmem a009). Workspace in original wording; real files, real index, the public search tool
with the default config and the local model. Held-out cases: bench/supersession_heldout.py, rule ``until``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from support.sqlite_memory import local_search, open_mem, write

from symi_memory import hookimpl, tools
from symi_memory.specs import RerankerSpec

pytest.importorskip("symi_memory_local")

FILLER = {f"memory/2026-0{1 + k % 5}-{10 + k:02d}.md": f"# Day\n\n- {text}\n" for k, text in enumerate([
    "Paid the water bill and the school trip.", "Sofia has a cold; stayed home.", "Fixed the bike's rear light.",
    "Dinner with Anna and Bram at the Thai place.", "Booked the dentist for Sofia.", "Renewed the passport photos."])}
PAST = ("# Past states\n\n- Until 2025-11-01 we drove a red Toyota Yaris.\n"
        "- Until 2025-09-30 Sofia went to the Regenboog daycare on Fridays.\n"
        "- Until 2026-01-15 our dentist was Dr. Bakker on the Oudegracht.\n"
        "- Until {end} the gardener was Kees from Groenrijk, every second Thursday.\n"
        "- Until 2025-12-01 the gym was the SportCity on the Amsterdamsestraatweg.\n")
NOTES = {
    # Before the date: mentions the gardener, does not say who it is.
    "memory/2026-03-24.md": "# 2026-03-24\n\n- Rain all week; the gardener did not come, and the hedge, the lawn and "
                            "the borders are a mess. Bought slug pellets and a new hose.\n",
    # After the date: the later version, left out of an "as of" search.
    "memory/2026-06-02.md": "# 2026-06-02\n\n- Our gardener is now Lotte from Tuinhulp; Kees retired.\n",
}


def _first(tmp_path: Path, end: str) -> str:
    notes = {**FILLER, **NOTES, "memory/history.md": PAST.format(end=end)}
    paths = [h["path"] for h in local_search(tmp_path, notes, "Who is our gardener?", asOf="2026-04-01")]
    assert "memory/2026-06-02.md" not in paths  # written after the date
    return paths[0]


def test_a_past_state_that_held_on_the_date_answers_in_the_place_of_its_later_version(tmp_path: Path) -> None:
    # Kees was the gardener until 2026-05-31, so on 2026-04-01: the past-states note ranks first, above the March
    # note that only mentions the gardener (without the rule the March note was first).
    assert _first(tmp_path, "2026-05-31") == "memory/history.md"


def test_a_past_state_that_ended_before_the_date_is_not_lifted(tmp_path: Path) -> None:
    # Kees stopped on 2026-03-01: on 2026-04-01 that line no longer held, so it takes nothing from the June note.
    assert _first(tmp_path, "2026-03-01") == "memory/2026-03-24.md"


class _WordReranker:
    """A reranker plugin scoring on its own scale (at most 0.3: the share of the query's words in a document,
    times 0.3), as a hosted cross-encoder's scores sit on theirs."""

    @hookimpl
    def symi_memory_register_rerankers(self, register: Callable[[Any], None]) -> None:
        class Words:
            def rerank(self, query: str, documents: Sequence[str], top_n: int) -> list[tuple[int, float]]:
                asked = set(re.findall(r"\w+", query.lower()))
                scored = [(i, 0.3 * len(asked & set(re.findall(r"\w+", d.lower()))) / len(asked))
                          for i, d in enumerate(documents)]
                return sorted(scored, key=lambda p: -p[1])[:top_n]

            def close(self) -> None:
                pass

        register(RerankerSpec(name="words", factory=lambda ctx: Words()))


def test_with_a_reranker_the_past_state_takes_its_later_versions_reranked_score(tmp_path: Path) -> None:
    # The later version's score given to the past state is on the reranker's scale like every result's: not its
    # fused score, which no reranked result is comparable with (it put the past state far above the rest).
    ws = tmp_path / "ws"
    for rel, text in {**FILLER, **NOTES, "memory/history.md": PAST.format(end="2026-05-31")}.items():
        write(ws, rel, text)
    with open_mem(tmp_path, ws, {"provider": "local", "query": {"rerank": {"provider": "words"}}},
                  plugins=[("words", _WordReranker())]) as mem:
        if mem.status()["provider"] != "local":
            pytest.skip("the local model is not installed")
        mem.sync()
        out = tools.memory_search(mem, {"query": "Who is our gardener?", "asOf": "2026-04-01", "minScore": 0})
    assert out["results"]
    assert "memory/2026-06-02.md" not in [h["path"] for h in out["results"]]
    assert max(h["score"] for h in out["results"]) <= 0.3 + 1e-9, out["results"]
