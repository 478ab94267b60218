"""The backend conformance suite: what every memory backend must do.

Run it with ``pytest --pyargs symi_memory.testing.conformance --symi-backend NAME``.
The fixtures come from :mod:`symi_memory.testing.pytest_plugin`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from symi_memory import hookimpl
from symi_memory.errors import PathRefused
from symi_memory.types import SearchQuery


def _lines_hit(results: list, path: str, line: int) -> bool:
    return any(r.path == path and r.start_line <= line <= r.end_line for r in results)


def test_sync_then_search_finds_a_distinctive_line(conformance_workspace: Path, open_conformance_memory) -> None:
    mem = open_conformance_memory(conformance_workspace)
    mem.sync()
    resp = mem.search("quokka harbour", min_score=0)
    assert _lines_hit(list(resp.results), "memory/2026-01-01.md", 3)


def test_results_are_bounded_sorted_and_scored(conformance_workspace: Path, open_conformance_memory) -> None:
    mem = open_conformance_memory(conformance_workspace)
    mem.sync()
    resp = mem.search("memory line project release", max_results=2, min_score=0)
    assert len(resp.results) <= 2
    scores = [r.score for r in resp.results]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)
    data = resp.to_dict()
    assert set(data) >= {"results", "provider", "model", "fallback", "citations", "mode"}
    for hit in data["results"]:
        assert set(hit) >= {"path", "startLine", "endLine", "score", "snippet", "source"}
        assert 1 <= hit["startLine"] <= hit["endLine"]


def test_min_score_filters(conformance_workspace: Path, open_conformance_memory) -> None:
    mem = open_conformance_memory(conformance_workspace)
    mem.sync()
    probe = mem.backend.search(SearchQuery(text="quokka", max_results=6, min_score=0.0, candidate_limit=24))
    if not probe.calibrated:
        pytest.skip("this backend's scores are not calibrated to 0..1, so minScore is not applied to them")
    loose = mem.search("quokka", min_score=0.0).results
    assert loose, "a distinctive word must be found with minScore 0"
    cut = loose[0].score + 1e-9
    strict = mem.search("quokka", min_score=min(1.0, cut)).results
    assert all(r.score >= cut for r in strict) and len(strict) < len(loose)


def test_read_file_rules(conformance_workspace: Path, open_conformance_memory, tmp_path: Path) -> None:
    mem = open_conformance_memory(conformance_workspace)
    whole = mem.read_file("MEMORY.md")
    assert whole.text == (conformance_workspace / "MEMORY.md").read_text(encoding="utf-8")
    assert mem.read_file("memory/2026-01-01.md", from_line=3, lines=1).text == "line two: quokka sighting at the harbour"
    missing = mem.read_file("memory/2099-01-01.md")
    assert (missing.text, missing.path) == ("", "memory/2099-01-01.md")
    outside = tmp_path / "outside.md"
    outside.write_text("secret", encoding="utf-8")
    (conformance_workspace / "NOTES.md").write_text("not memory", encoding="utf-8")
    (conformance_workspace / "memory" / "x.txt").write_text("not markdown", encoding="utf-8")
    os.symlink(outside, conformance_workspace / "memory" / "link.md")
    for bad in ("../etc/passwd", "NOTES.md", "memory/x.txt", "memory/link.md", str(outside), "memory/../NOTES.md"):
        with pytest.raises(PathRefused):
            mem.read_file(bad)


def test_deleted_and_edited_files_are_reflected(conformance_workspace: Path, open_conformance_memory) -> None:
    mem = open_conformance_memory(conformance_workspace)
    mem.sync()
    assert _lines_hit(list(mem.search("zx81build", min_score=0).results), "memory/2026-01-02.md", 3)
    (conformance_workspace / "memory" / "2026-01-02.md").unlink()
    atlas = conformance_workspace / "memory" / "projects" / "atlas.md"
    atlas.write_text("# Atlas\n\nThe atlas project now targets the narwhal cluster.\n", encoding="utf-8")
    mem.sync()
    assert not any(r.path == "memory/2026-01-02.md" for r in mem.search("zx81build", min_score=0).results)
    assert _lines_hit(list(mem.search("narwhal", min_score=0).results), "memory/projects/atlas.md", 3)
    assert not any("ledger" in r.snippet for r in mem.search("ledger billing", min_score=0).results)


def test_snippets_are_capped(conformance_workspace: Path, open_conformance_memory) -> None:
    (conformance_workspace / "memory" / "long.md").write_text("walrus " * 600 + "\n", encoding="utf-8")
    mem = open_conformance_memory(conformance_workspace, memory={"citations": "off"})
    mem.sync()
    results = mem.search("walrus", min_score=0).results
    assert results and all(len(r.snippet) <= 700 for r in results)


def test_status_names_the_backend(conformance_workspace: Path, open_conformance_memory) -> None:
    mem = open_conformance_memory(conformance_workspace)
    mem.sync()
    st = mem.status()
    assert isinstance(st.get("backend"), str) and st["backend"]
    assert st.get("workspaceDir") == str(conformance_workspace.resolve())


CAR_FILES = {
    "memory/2026-03-01.md": "# 2026-03-01\n\n- The car is a blue hatchback.\n",
    "memory/2026-06-01.md": "# 2026-06-01\n\n- Sold the hatchback; now the car is a red SUV.\n",
}


def _car_workspace(ws: Path) -> None:
    for rel, text in CAR_FILES.items():
        (ws / rel).write_text(text, encoding="utf-8")


def test_as_of_leaves_out_later_dated_notes(conformance_workspace: Path, open_conformance_memory) -> None:
    """Every backend: memory dated after the "as of" date is not returned; memory up to that day is."""
    _car_workspace(conformance_workspace)
    mem = open_conformance_memory(conformance_workspace)
    mem.sync()
    now = [r.path for r in mem.search("car hatchback", min_score=0).results]
    assert "memory/2026-06-01.md" in now and "memory/2026-03-01.md" in now
    then = [r.path for r in mem.search("car hatchback", min_score=0, as_of="2026-04-01").results]
    assert "memory/2026-03-01.md" in then and "memory/2026-06-01.md" not in then
    assert "memory/2026-06-01.md" in [r.path for r in mem.search("car hatchback", min_score=0,
                                                                 as_of="2026-06-01").results]


class _LeftOutRecorder:
    """A third-party post-processor: records what each search hands it as ``left_out``, changes nothing."""

    def __init__(self) -> None:
        self.seen: list[tuple[list[str], list[str]]] = []  # (results' paths, left-out paths) per search

    @hookimpl
    def symi_memory_register_postprocessors(self, register: Any) -> None:
        from symi_memory.specs import PostProcessorSpec

        recorder = self

        class Record:
            def process(self, candidates: Any, ctx: Any) -> Any:
                recorder.seen.append(([c.path for c in candidates], [c.path for c in ctx.left_out]))
                return candidates

        register(PostProcessorSpec(name="conformance-left-out", factory=lambda hybrid: Record(), order=300))


def test_as_of_hands_post_processors_what_it_left_out(conformance_workspace: Path, open_conformance_memory) -> None:
    """Every backend: in an "as of" search, post-processors get the hits left out as written after the date
    (``PostProcessContext.left_out``), none of them among the results; in any other search it is empty."""
    _car_workspace(conformance_workspace)
    recorder = _LeftOutRecorder()
    mem = open_conformance_memory(conformance_workspace, plugins=[("left-out-recorder", recorder)])
    mem.sync()
    mem.search("car hatchback", min_score=0)
    mem.search("car hatchback", min_score=0, as_of="2026-04-01")
    (now_results, now_left), (then_results, then_left) = recorder.seen
    assert "memory/2026-06-01.md" in now_results and now_left == []
    assert "memory/2026-06-01.md" in then_left and "memory/2026-06-01.md" not in then_results
    assert "memory/2026-03-01.md" in then_results and not set(then_left) & set(then_results)


def test_supersession_demotes_the_older_version_or_status_says_why_not(conformance_workspace: Path,
                                                                        open_conformance_memory) -> None:
    """A backend that stores vectors ranks the newer version first and marks the older one
    ``supersededBy``; one that does not says so in ``status()["supersession"]``."""
    from symi_memory.specs import StoredVectors

    _car_workspace(conformance_workspace)
    mem = open_conformance_memory(conformance_workspace, agents={"defaults": {"memorySearch": {
        "query": {"hybrid": {"supersession": {"enabled": True}}}}}})
    mem.sync()
    st = mem.status()["supersession"]
    if not isinstance(mem.backend, StoredVectors):
        assert st["storedVectors"] is False and st["applied"] is False and st["unavailable"]
        return
    assert st["applied"] is True and st["unavailable"] == []
    results = [r.to_dict() for r in mem.search("what car do I drive?", min_score=0).results]
    assert results[0]["path"] == "memory/2026-06-01.md"
    older = [r for r in results if r["path"] == "memory/2026-03-01.md"]
    assert older and older[0]["supersededBy"] == {"path": "memory/2026-06-01.md", "startLine": 3, "endLine": 3}
    # As of April, June did not exist yet: March is current and carries no mark.
    then = [r.to_dict() for r in mem.search("what car do I drive?", min_score=0, as_of="2026-04-01").results]
    assert then[0]["path"] == "memory/2026-03-01.md" and "supersededBy" not in then[0]


def _synced_backend(ws: Path, open_memory: Any, capability: type, why: str) -> Any:
    """The backend of a memory opened on ``ws`` and synced, when it has ``capability``; else the check is skipped
    with ``why``."""
    mem = open_memory(ws)
    mem.sync()
    if not isinstance(mem.backend, capability):
        pytest.skip(why)
    return mem.backend


def _quokka_candidates(backend: Any) -> Any:
    """The candidates of a wide "quokka harbour" search (6 results of 24 candidates, no score floor)."""
    return backend.search(SearchQuery(text="quokka harbour", max_results=6, min_score=0.0,
                                      candidate_limit=24)).candidates


def test_stored_vectors_come_back_for_every_candidate(conformance_workspace: Path, open_conformance_memory) -> None:
    """``candidate_vectors`` (backends that store vectors) returns each candidate's vector, all one size."""
    from symi_memory.specs import StoredVectors

    backend = _synced_backend(conformance_workspace, open_conformance_memory, StoredVectors,
                              "this backend stores no vectors (status()['supersession'] says so)")
    cands = _quokka_candidates(backend)
    vecs = backend.candidate_vectors([c.id for c in cands])
    assert set(vecs) == {c.id for c in cands}
    assert len({len(v) for v in vecs.values()}) == 1


def _cosine(a: Any, b: Any) -> float:
    """Cosine of two equal-length vectors (plain Python: backends hand out lists or arrays)."""
    import math

    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def test_embedded_texts_compare_with_the_stored_vectors(conformance_workspace: Path, open_conformance_memory) -> None:
    """``embed_texts`` (dedup on write) gives vectors of the same kind as the stored ones: a chunk's text
    embedded now is the same direction as its stored vector, so dedup and supersession agree."""
    from symi_memory.specs import EmbedsTexts, StoredVectors

    mem = open_conformance_memory(conformance_workspace)
    mem.sync()
    if not (isinstance(mem.backend, StoredVectors) and isinstance(mem.backend, EmbedsTexts)):
        pytest.skip("this backend does not both store vectors and embed texts")
    backend: Any = mem.backend
    cand = backend.search(SearchQuery(text="quokka harbour", max_results=1, min_score=0.0,
                                          candidate_limit=8)).candidates[0]
    stored = list(backend.candidate_vectors([cand.id])[cand.id])
    fresh = backend.embed_texts([cand.text])
    assert fresh is not None and len(fresh[0]) == len(stored)
    assert _cosine(fresh[0], stored) > 0.99


def test_stored_line_analyses_give_the_lines_of_a_fresh_analysis(conformance_workspace: Path,
                                                                  open_conformance_memory) -> None:
    """``candidate_line_analysis`` (backends that store supersession's line analysis) gives, for every
    candidate, what analysing its text at query time gives (terms, values, quantities, moments, days)."""
    from symi_memory.specs import StoredLineAnalysis
    from symi_memory.supersession import _split, lines_from_analysis

    backend = _synced_backend(conformance_workspace, open_conformance_memory, StoredLineAnalysis,
                              "this backend stores no line analyses (supersession analyses candidates at query time)")
    cands = _quokka_candidates(backend)
    got = backend.candidate_line_analysis([c.id for c in cands])
    assert set(got) == {c.id for c in cands}
    for c in cands:
        lines = lines_from_analysis(got[c.id], c.path, c.start_line, c.text, c.mtime)
        fresh = _split(c.path, c.start_line, c.text, c.mtime, None)
        assert lines == fresh and [ln.quantities for ln in lines] == [ln.quantities for ln in fresh]


def test_stored_plain_answers_are_those_of_the_texts_handed_out(conformance_workspace: Path,
                                                                open_conformance_memory) -> None:
    """``candidate_plain`` (backends that store supersession's plain-chunk answer) gives, for the candidates of
    the last search on this thread, what ``plain_chunk`` says of the text each was handed out with, and nothing
    for an id that search did not hand out."""
    from symi_memory.specs import StoredPlain
    from symi_memory.supersession import plain_chunk

    backend = _synced_backend(conformance_workspace, open_conformance_memory, StoredPlain,
                              "this backend stores no plain-chunk answers (supersession tells the texts at query time)")
    cands = _quokka_candidates(backend)
    got = backend.candidate_plain([c.id for c in cands] + ["no such id"])
    assert set(got) <= {c.id for c in cands}
    assert all(got[c.id] is plain_chunk(c.text) for c in cands if c.id in got)


def test_stored_line_vectors_are_the_lines_own(conformance_workspace: Path, open_conformance_memory) -> None:
    """``candidate_line_vectors`` (backends that store line vectors) gives, per candidate, vectors of lines
    inside the chunk, in line order, each the same direction as that line's text embedded now."""
    from symi_memory.specs import EmbedsTexts, StoredLineVectors

    backend = _synced_backend(conformance_workspace, open_conformance_memory, StoredLineVectors,
                              "this backend stores no line vectors (supersession judges by chunk vectors)")
    cands = _quokka_candidates(backend)
    got = backend.candidate_line_vectors([c.id for c in cands])
    assert got, "no candidate has line vectors"
    by_id = {c.id: c for c in cands}
    for cid, units in got.items():
        c = by_id[cid]
        starts = [a for a, _b, _v in units]
        assert starts == sorted(starts)
        assert all(c.start_line <= a <= b <= c.end_line for a, b, _v in units)
        if isinstance(backend, EmbedsTexts):
            a, b, vec = units[0]
            text = "\n".join(ln.strip() for ln in c.text.split("\n")[a - c.start_line : b - c.start_line + 1])
            fresh = backend.embed_texts([text])
            assert fresh is not None and len(fresh[0]) == len(vec)
            assert _cosine(fresh[0], vec) > 0.99
