"""Supersession: demote a hit that a newer hit restates or changes, and say so.

Among the best ``window`` candidates, the lines most about the query are
compared pairwise (:func:`symi_memory.supersession.same_thing`, which needs
the chunks' stored vectors from ``ctx.vectors``). When a newer line states
the same thing as an older one, the older hit's score drops just below the
newer hit's and it carries ``superseded_by``; the newer one lists what it
``supersedes``. Hits that nothing newer restates are left exactly as they were.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from symi_memory.specs import PostProcessContext
from symi_memory.supersession import (
    THRESHOLDS,
    Line,
    Thresholds,
    asks_about_past,
    cosine,
    focus_lines,
    salient,
    same_thing,
    split_lines,
)
from symi_memory.types import Candidate

__all__ = ["Supersession", "find_supersessions"]


def find_supersessions(candidates: Sequence[Candidate], vectors: Mapping[str, Sequence[float]], query: str,
                       t: Thresholds = THRESHOLDS,
                       written: Mapping[str, tuple[float, float]] | None = None,
                       as_of: float | None = None) -> dict[int, tuple[int, Line, Line]]:
    """``{older index: (newer index, older line, newer line)}`` for candidates a newer one supersedes.

    The newer candidate chosen is the newest of those that restate it. With
    ``as_of``, a line dated at or after it (an undated note changed later)
    has no known date then and supersedes nothing.
    """
    qterms = salient(query)
    if asks_about_past(query):
        return {}
    focus: dict[int, list[Line]] = {}
    for i, c in enumerate(candidates):
        lines = split_lines(c.path, c.start_line, c.text, c.mtime, (written or {}).get(c.id))
        found = focus_lines(lines, qterms)
        if found:
            focus[i] = found
    newest = {i: max(ln.moment for ln in lines) for i, lines in focus.items()}
    sims = _cosines([vectors.get(c.id) for c in candidates])
    out: dict[int, tuple[int, Line, Line]] = {}
    idx = list(focus)
    for i in idx:
        vi = vectors.get(candidates[i].id)
        if vi is None:
            continue
        best: tuple[int, Line, Line] | None = None
        for j in idx:
            if j == i or newest[j] <= newest[i]:
                continue
            if candidates[j].path == candidates[i].path and candidates[j].start_line == candidates[i].start_line:
                continue
            if candidates[j].score < t.score_ratio * candidates[i].score:
                continue
            cos = sims[i][j] if sims is not None else cosine(vi, vectors.get(candidates[j].id))
            if cos is None or cos < t.chunk_vector:
                continue
            for a in focus[i]:
                for b in focus[j]:
                    if as_of is not None and b.moment[0] >= as_of:
                        continue
                    if b.moment > a.moment and same_thing(a, b, cos, t):
                        if best is None or b.moment > best[2].moment:
                            best = (j, a, b)
        if best is not None:
            out[i] = best
    return out


def _cosines(vecs: list[Sequence[float] | None]) -> Any:
    """Pairwise cosines of the stored vectors (None where a vector is missing), or None without numpy."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with every vector backend
        return None
    dims = {len(v) for v in vecs if v is not None}
    if len(dims) != 1:
        return None
    d = dims.pop()
    m = np.zeros((len(vecs), d), dtype=np.float32)
    for k, v in enumerate(vecs):
        if v is not None:
            m[k] = v
    norms = np.linalg.norm(m, axis=1)
    norms[norms == 0] = 1.0
    m /= norms[:, None]
    sims = (m @ m.T).tolist()
    return [[None if vecs[a] is None or vecs[b] is None else sims[a][b] for b in range(len(vecs))]
            for a in range(len(vecs))]


def _current(found: Mapping[int, tuple[int, Line, Line]], k: int) -> int:
    """The end of ``k``'s supersession chain: the version nothing newer supersedes."""
    while k in found:
        k = found[k][0]
    return k


@attrs.frozen
class Supersession:
    thresholds: Thresholds = THRESHOLDS

    @classmethod
    def from_config(cls, hybrid: Mapping[str, Any]) -> Supersession | None:
        cfg = hybrid.get("supersession") or {}
        if not cfg.get("enabled"):
            return None
        return cls(attrs.evolve(THRESHOLDS, window=int(cfg.get("window", THRESHOLDS.window))))

    def process(self, candidates: Sequence[Candidate], ctx: PostProcessContext) -> list[Candidate]:
        if len(candidates) < 2 or ctx.vectors is None:
            return list(candidates)
        order = sorted(range(len(candidates)), key=lambda i: -candidates[i].score)
        top = order[: self.thresholds.window]
        head = [candidates[i] for i in top]
        vectors = ctx.vectors([c.id for c in head])
        written = ctx.written_at(head) if ctx.written_at is not None else None
        found = find_supersessions(head, vectors, ctx.query, self.thresholds, written, ctx.as_of)
        if not found:
            return list(candidates)
        # The current version takes the best place its older versions held, and each older version
        # ranks just below what supersedes it: hits in between keep their order, nothing unrelated climbs.
        score = {k: c.score for k, c in enumerate(head)}
        if self.thresholds.promote:
            for k in sorted(found, key=lambda k: -head[k].score):
                j = _current(found, k)
                score[j] = max(score[j], head[k].score)
        changed = True
        while changed:  # terminates: "supersedes" only points at strictly newer hits
            changed = False
            for k, (j, _a, _b) in found.items():
                cap = score[j] * self.thresholds.demote
                if score[k] > cap:
                    score[k], changed = cap, True
        supersedes: dict[int, list[dict[str, Any]]] = {}
        for j, a, _b in found.values():
            supersedes.setdefault(j, []).append({"path": a.path, "startLine": a.line_no, "endLine": a.line_no})
        out = list(candidates)
        for k, c in enumerate(head):
            changes: dict[str, Any] = {}
            if k in found:
                b = found[k][2]
                changes["superseded_by"] = {"path": b.path, "startLine": b.line_no, "endLine": b.line_no}
            if score[k] != c.score:
                changes["score"] = score[k]
            if k in supersedes:
                changes["supersedes"] = tuple(supersedes[k])
            if changes:
                out[top[k]] = attrs.evolve(c, **changes)
        return out
