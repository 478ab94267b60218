"""Dedup on write: is new text a restatement of stored memory, a change of it, or new?

``memory_append`` (tool, API, MCP) and ``symi-memory append`` call
:func:`check_append` before writing. It searches the index with the new
text, then compares the new text with the lines of the best hits: by
meaning when the backend can embed (:class:`~symi_memory.specs.EmbedsTexts`), and by salient terms
and values (numbers, names, identifiers) always. Thresholds live in
:data:`symi_memory.supersession.THRESHOLDS`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal

import attrs

from .specs import EmbedsTexts
from .supersession import (
    THRESHOLDS,
    Line,
    Thresholds,
    cosine,
    line_overlap,
    salient,
    split_lines,
    states_change,
    values,
)

if TYPE_CHECKING:
    from .manager import MemoryManager

__all__ = ["AppendCheck", "check_append"]

log = logging.getLogger("symi_memory.dedup")

Kind = Literal["duplicate", "change", "new"]


@attrs.frozen(kw_only=True)
class AppendCheck:
    """What the index says about text about to be appended; ``target`` is the stored line it matches."""

    kind: Kind
    target: dict[str, Any] | None = None
    similarity: float | None = None
    overlap: float | None = None
    same_values: bool | None = None
    states_change: bool | None = None
    by_vector: bool = False
    candidate: dict[str, Any] | None = None


def _strip_bullet(text: str) -> str:
    return text.strip().lstrip("-*+ ").strip()


def check_append(manager: MemoryManager, text: str, t: Thresholds = THRESHOLDS) -> AppendCheck:
    """Classify ``text`` against what the index holds (never raises for a search problem: ``new``)."""
    body = " ".join(_strip_bullet(ln) for ln in text.splitlines() if ln.strip())
    if not body:
        return AppendCheck(kind="new")
    try:
        resp = manager.search(body, max_results=t.dup_hits, min_score=0.0)
    except Exception as exc:  # dedup is a courtesy: a failing lookup must not block the write
        log.warning("dedup lookup failed (%s); appending without it", exc)
        return AppendCheck(kind="new")
    lines: list[Line] = []
    for hit in resp.results:
        if hit.score < t.dup_min_score:
            continue
        full = manager.read_file(hit.path, from_line=hit.start_line,
                                 lines=hit.end_line - hit.start_line + 1).text if hit.source == "memory" else hit.snippet
        lines += split_lines(hit.path, hit.start_line, full, None)
    if not lines:
        return AppendCheck(kind="new")
    new_terms, new_values = salient(body), values(body)
    # Embedding is the slow part: compare by meaning only the lines sharing the most words.
    lines = sorted(lines, key=lambda ln: -line_overlap(new_terms, ln.terms)[1])[: t.dup_lines]
    sims = _line_similarities(manager, body, lines)
    best: tuple[float, Line] | None = None
    for k, ln in enumerate(lines):
        _shared, share = line_overlap(new_terms, ln.terms)
        sim = sims[k] if sims is not None else share
        if best is None or sim > best[0]:
            best = (sim, ln)
    assert best is not None
    sim, ln = best
    _shared, share = line_overlap(new_terms, ln.terms)
    target = {"path": ln.path, "startLine": ln.line_no, "endLine": ln.line_no}
    same_values = new_values <= ln.values
    marked = states_change(body)
    if sims is not None:
        dup_sim = t.dup_vector
        change_sim = t.change_marked_vector if marked else t.change_vector
    else:
        dup_sim, change_sim = t.dup_lexical, t.change_overlap
    facts: dict[str, Any] = {"similarity": round(sim, 4), "overlap": round(share, 4), "same_values": same_values,
             "states_change": marked, "by_vector": sims is not None, "candidate": target}
    # Rewordings often spell values differently ("9 am", "09:00"), so differing values alone do not make a
    # change; saying that something changed, with a value the stored line lacks, does.
    if sim >= dup_sim and share >= t.dup_overlap and (same_values or not marked):
        return AppendCheck(kind="duplicate", target=target, **facts)
    if sim >= change_sim and share >= t.change_overlap and (marked or not same_values):
        return AppendCheck(kind="change", target=target, **facts)
    return AppendCheck(kind="new", **facts)


def _line_similarities(manager: MemoryManager, body: str, lines: list[Line]) -> list[float] | None:
    """Cosine of the new text with each stored line, when the backend can embed; else None."""
    backend = manager.backend
    if not isinstance(backend, EmbedsTexts):
        return None
    try:
        vecs = backend.embed_texts([body] + [ln.text for ln in lines])
    except Exception as exc:
        log.info("dedup could not embed (%s); comparing by terms only", exc)
        return None
    if not vecs or len(vecs) != len(lines) + 1:
        return None
    out = []
    for v in vecs[1:]:
        c = cosine(vecs[0], v)
        out.append(c if c is not None else 0.0)
    return out
