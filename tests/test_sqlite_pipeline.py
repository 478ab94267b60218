"""The search tail over builtin-sqlite: RRF, minScore, maxResults, decay, MMR, rerankers (issue 3, item 10)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.sqlite_memory import add_filler, open_mem, write

from symi_memory import hookimpl
from symi_memory.pipeline import Pipeline
from symi_memory.plugins import load_plugins
from symi_memory.specs import PostProcessContext, RerankerSpec
from symi_memory.types import Candidate
from symi_memory_postprocess.decay import TemporalDecay, file_date, is_evergreen
from symi_memory_postprocess.mmr import Mmr, jaccard, tokens

DAY = 86_400.0


def ts(y: int, m: int, d: int) -> float:
    return datetime(y, m, d, tzinfo=UTC).timestamp()


def cand(path: str, score: float, text: str = "", mtime: float | None = None) -> Candidate:
    return Candidate(id=path + text, path=path, start_line=1, end_line=1, score=score, text=text or path, mtime=mtime)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    add_filler(w)
    write(w, "MEMORY.md", "# Memory\n\n- The sourdough starter is fed with rye flour every morning.\n")
    write(w, "memory/2026-01-10.md", "# Jan 10\n\n- Sourdough starter smelled of acetone; fed it rye flour twice.\n")
    write(w, "memory/baking.md", "# Baking\n\n- Sourdough loaves need a long cold proof.\n")
    return w


# ----------------------------------------------------------------------- fusion and limits


def test_rrf_scores_stay_in_0_1_and_min_score_keeps_its_meaning(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws, {"query": {"hybrid": {"fusion": "rrf"}}}) as mem:
        mem.sync()
        res = mem.search("sourdough starter rye flour", min_score=0.0, max_results=20)
        scores = [h.score for h in res.results]
        assert res.mode == "hybrid" and len(scores) >= 3
        assert all(0.0 < s <= 1.0 for s in scores)
        assert scores == sorted(scores, reverse=True)
        assert scores[0] >= 0.35  # first on both sides: a confident calibrated score
        cut = (scores[1] + scores[2]) / 2
        kept = mem.search("sourdough starter rye flour", min_score=cut, max_results=20).results
        assert [h.score for h in kept] == scores[:2]


def test_max_results_and_min_score_from_config_and_per_call(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws, {"query": {"maxResults": 2, "minScore": 0.0}}) as mem:
        mem.sync()
        assert len(mem.search("weekly review budget notes").results) == 2
        assert len(mem.search("weekly review budget notes", max_results=5).results) == 5
        res = mem.search("sourdough", min_score=0.5, max_results=10).results
        assert res and all(h.score >= 0.5 for h in res)
        with pytest.raises(ValueError):
            mem.search("sourdough", max_results=0)


def test_min_score_compares_against_the_decayed_score(tmp_path: Path, ws: Path) -> None:
    now = ts(2026, 3, 11)  # the dated note is 60 days old: multiplier 0.25
    with open_mem(tmp_path, ws, {"query": {"hybrid": {"temporalDecay": {"enabled": True}}}}) as mem:
        mem.sync()
        plain = {h.path: h.score for h in mem.search("sourdough starter acetone", min_score=0.0, now=now).results}
    with open_mem(tmp_path, ws) as mem:
        raw = {h.path: h.score for h in mem.search("sourdough starter acetone", min_score=0.0).results}
    dated = "memory/2026-01-10.md"
    assert raw[dated] >= 0.35, "the dated note passes minScore 0.35 before decay"
    assert plain[dated] == pytest.approx(raw[dated] * 0.25, abs=1e-5)
    assert plain["MEMORY.md"] == pytest.approx(raw["MEMORY.md"], abs=1e-6)
    with open_mem(tmp_path, ws, {"query": {"minScore": 0.35, "hybrid": {"temporalDecay": {"enabled": True}}}}) as mem:
        assert dated not in {h.path for h in mem.search("sourdough starter acetone", now=now).results}
        assert dated in {h.path for h in mem.search("sourdough starter acetone", now=ts(2026, 1, 10)).results}


# ----------------------------------------------------------------------------- decay


def test_decay_half_life_numbers() -> None:
    decay = TemporalDecay(30.0)
    assert decay.multiplier(0) == 1.0
    assert decay.multiplier(7) == pytest.approx(0.85, abs=0.005)
    assert decay.multiplier(30) == pytest.approx(0.5)
    assert decay.multiplier(60) == pytest.approx(0.25)
    assert decay.multiplier(-5) == 1.0
    assert TemporalDecay.from_config({"temporalDecay": {"enabled": False}}) is None
    assert TemporalDecay.from_config({"temporalDecay": {"enabled": True, "halfLifeDays": 0.2}}).half_life_days == 1.0


def test_decay_dates_evergreen_and_mtime() -> None:
    for path in ("memory/2026-02-10.md", "memory/2026-02-10-topic.md", "memory/sub/2026-02-10.md"):
        assert file_date(path) == ts(2026, 2, 10), path
    for path in ("MEMORY.md", "memory.md", "memory/projects.md", "memory/2026-13-40.md"):
        assert file_date(path) is None
        assert is_evergreen(path)
    assert file_date("notes/2026-02-10.md") is None and not is_evergreen("notes/2026-02-10.md")

    now = ts(2026, 3, 12)  # 30 days after 2026-02-10
    old_mtime = now - 7 * DAY
    items = [
        cand("memory/2026-02-10-topic.md", 0.8),
        cand("memory/sub/2026-02-10.md", 0.8),
        cand("MEMORY.md", 0.8, mtime=now - 400 * DAY),
        cand("memory/projects.md", 0.8, mtime=now - 400 * DAY),
        cand("../team/notes.md", 0.8, mtime=old_mtime),
        cand("memory/2026-04-01.md", 0.8),  # in the future: age 0
        cand("../team/unknown.md", 0.8),
    ]
    out = {c.path: c.score for c in TemporalDecay(30.0).process(items, PostProcessContext(query="q", now=now))}
    assert out["memory/2026-02-10-topic.md"] == pytest.approx(0.4)
    assert out["memory/sub/2026-02-10.md"] == pytest.approx(0.4)
    assert out["MEMORY.md"] == 0.8 and out["memory/projects.md"] == 0.8
    assert out["../team/notes.md"] == pytest.approx(0.8 * 2 ** (-7 / 30))
    assert out["memory/2026-04-01.md"] == 0.8
    assert out["../team/unknown.md"] == 0.8


def test_undated_extra_file_decays_by_its_real_mtime(tmp_path: Path, ws: Path) -> None:
    extra = tmp_path / "team"
    p = write(extra, "handbook.md", "- Sourdough starter jars live on the top shelf.\n")
    stamp = ts(2026, 1, 1)
    os.utime(p, (stamp, stamp))
    ms = {"extraPaths": [str(extra)], "query": {"hybrid": {"temporalDecay": {"enabled": True}}}}
    with open_mem(tmp_path, ws, ms) as mem:
        mem.sync()
        a = {h.path: h.score for h in mem.search("starter jars shelf", min_score=0, now=stamp).results}
        b = {h.path: h.score for h in mem.search("starter jars shelf", min_score=0, now=stamp + 30 * DAY).results}
    assert b["../team/handbook.md"] == pytest.approx(a["../team/handbook.md"] / 2, abs=1e-5)


# ------------------------------------------------------------------------------- MMR


def test_mmr_tokens_and_jaccard_are_unicode_aware() -> None:
    assert tokens("Über STRASSE straße 金银价格 ok_2") == frozenset({"über", "strasse", "straße", "金银价格", "ok_2"})
    assert jaccard(frozenset(), frozenset()) == 1.0
    assert jaccard(frozenset({"a"}), frozenset()) == 0.0
    assert jaccard(tokens("Ärger über Öl"), tokens("ärger ÜBER öl")) == 1.0
    assert jaccard(tokens("a b"), tokens("b c")) == pytest.approx(1 / 3)


def test_mmr_lambda_one_keeps_order_and_duplicates_go_down() -> None:
    items = [
        cand("memory/a.md", 0.90, "über den grünen fluss mit dem boot"),
        cand("memory/b.md", 0.88, "über den grünen fluss mit dem boot heute"),
        cand("memory/c.md", 0.80, "bergwanderung im nebel"),
    ]
    ctx = PostProcessContext(query="fluss", now=0.0)
    assert [c.path for c in Mmr(1.0).process(items, ctx)] == ["memory/a.md", "memory/b.md", "memory/c.md"]
    assert [c.path for c in Mmr(0.5).process(items, ctx)] == ["memory/a.md", "memory/c.md", "memory/b.md"]
    # Scores are untouched; only the order changes.
    assert sorted(c.score for c in Mmr(0.5).process(items, ctx)) == [0.8, 0.88, 0.9]
    # Equal relevance: ties go to the higher raw score.
    same = [cand("memory/x.md", 0.5, "one"), cand("memory/y.md", 0.5, "two")]
    assert [c.path for c in Mmr(0.7).process(same, ctx)] == ["memory/x.md", "memory/y.md"]


def test_pipeline_runs_decay_then_sort_then_mmr_then_min_score() -> None:
    hybrid = {"temporalDecay": {"enabled": True, "halfLifeDays": 30}, "mmr": {"enabled": True, "lambda": 0.3}}
    ms = {"query": {"hybrid": hybrid, "rerank": {"topN": 20}}}
    pipe = Pipeline.from_settings(load_plugins([]), ms)
    assert [name for _, name, _ in pipe.processors] == ["temporal-decay", "month-cue", "mmr"]
    items = [
        cand("memory/2026-01-01.md", 0.95, "alpha beta gamma"),  # top before decay; 60 days old
        cand("MEMORY.md", 0.80, "alpha beta gamma"),
        cand("memory/c.md", 0.70, "zeta eta theta"),
        cand("memory/d.md", 0.78, "alpha beta gamma delta"),
    ]
    now = ts(2026, 3, 2)
    out = pipe.run("alpha", items, max_results=10, min_score=0.0, now=now)
    assert [c.path for c in out] == ["MEMORY.md", "memory/c.md", "memory/d.md", "memory/2026-01-01.md"]
    assert out[-1].score == pytest.approx(0.95 * 0.25)
    out = pipe.run("alpha", items, max_results=10, min_score=0.3, now=now)
    assert [c.path for c in out] == ["MEMORY.md", "memory/c.md", "memory/d.md"]
    assert [c.path for c in pipe.run("alpha", items, max_results=2, min_score=0.0, now=now)] == ["MEMORY.md", "memory/c.md"]


# -------------------------------------------------------------------------- rerankers


class RerankPlugin:
    """Registers ``boom`` (always raises) and ``backwards`` (reverses the order)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    @hookimpl
    def symi_memory_register_rerankers(self, register: Callable[[Any], None]) -> None:
        plugin = self

        class Boom:
            def rerank(self, query: str, documents: Sequence[str], top_n: int) -> list[tuple[int, float]]:
                plugin.calls.append(("boom", len(documents)))
                raise RuntimeError("rerank service returned HTTP 503")

            def close(self) -> None:
                pass

        class Backwards:
            def rerank(self, query: str, documents: Sequence[str], top_n: int) -> list[tuple[int, float]]:
                plugin.calls.append(("backwards", len(documents)))
                n = len(documents)
                return [(i, 0.5 + 0.4 * i / max(1, n - 1)) for i in reversed(range(n))]

            def close(self) -> None:
                pass

        register(RerankerSpec(name="boom", factory=lambda ctx: Boom()))
        register(RerankerSpec(name="backwards", factory=lambda ctx: Backwards()))


def test_failing_reranker_never_fails_the_search(tmp_path: Path, ws: Path, caplog: pytest.LogCaptureFixture) -> None:
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        plain = [(h.path, h.score) for h in mem.search("sourdough starter rye", max_results=4).results]
    assert len(plain) >= 2
    plugin = RerankPlugin()
    with open_mem(tmp_path, ws, {"query": {"rerank": {"provider": "boom"}}}, plugins=[("rr", plugin)]) as mem:
        got = [(h.path, h.score) for h in mem.search("sourdough starter rye", max_results=4).results]
    assert plugin.calls and plugin.calls[0][0] == "boom"
    assert got == plain
    assert "reranker failed" in caplog.text and "503" in caplog.text
    plugin = RerankPlugin()
    with open_mem(tmp_path, ws, {"query": {"rerank": {"provider": "backwards"}}}, plugins=[("rr", plugin)]) as mem:
        flipped = [h.path for h in mem.search("sourdough starter rye", max_results=4, min_score=0.0).results]
    assert plugin.calls and plugin.calls[0][0] == "backwards"
    # A working reranker does change the order (so the comparison above can fail).
    assert flipped[0] != plain[0][0]


def test_pipeline_orders_best_first_keeping_ties_in_order_and_cuts_at_min_score() -> None:
    # Candidates already best first are kept as they come (ties too); others are sorted stably; the first
    # max_results at min_score or above are returned either way, and a NaN score (a buggy plugin) fails nothing.
    pipe = Pipeline(processors=[])
    ranked = [cand(f"memory/{k}.md", s, "x") for k, s in zip("abcdef", (0.9, 0.7, 0.7, 0.5, 0.3, 0.3), strict=True)]
    assert pipe.run("x", ranked, max_results=3, min_score=0.0) == ranked[:3]
    assert pipe.run("x", ranked, max_results=10, min_score=0.5) == ranked[:4]
    shuffled = [ranked[4], ranked[2], ranked[0], ranked[5], ranked[1], ranked[3]]
    assert [c.path for c in pipe.run("x", shuffled, max_results=10, min_score=0.0)] == [
        "memory/a.md", "memory/c.md", "memory/b.md", "memory/d.md", "memory/e.md", "memory/f.md"]
    assert [c.path for c in pipe.run("x", shuffled, max_results=2, min_score=0.6)] == ["memory/a.md", "memory/c.md"]
    odd = [*ranked[:2], cand("memory/n.md", float("nan"), "x"), *ranked[2:]]
    want = [c for c in sorted(odd, key=lambda c: -c.score) if c.score >= 0.0][:4]
    assert pipe.run("x", odd, max_results=4, min_score=0.0) == want


def test_pipeline_cut_at_a_negative_max_results_is_the_slice_of_what_passes_min_score() -> None:
    # ``history(max_results=-1)`` reaches the pipeline unchecked: the answer is every candidate at min_score or above,
    # best first, cut as ``[:max_results]`` cuts them (all but the last), whether or not they came best first.
    pipe = Pipeline(processors=[])
    ranked = [cand(f"memory/{k}.md", s, "x") for k, s in zip("abcd", (0.9, 0.7, 0.5, 0.3), strict=True)]
    for n in (-1, -2):
        assert pipe.run("x", ranked, max_results=n, min_score=0.0) == ranked[:n]
        assert pipe.run("x", ranked, max_results=n, min_score=0.4) == ranked[:3][:n]
        assert pipe.run("x", ranked[::-1], max_results=n, min_score=0.0) == ranked[:n]
