"""Supersession: demote a hit that a newer hit restates or changes, and say so.

Among the best ``window`` candidates, the lines most about the query are
compared pairwise (:func:`symi_memory.supersession.same_thing`, which needs
the chunks' stored vectors from ``ctx.vectors``). When a newer line states
the same thing as an older one, the older hit's score drops just below the
newer hit's and it carries ``superseded_by``; the newer one lists what it
``supersedes``. Hits that nothing newer restates are left exactly as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from symi_memory.specs import LineVector, PostProcessContext
from symi_memory.supersession import (
    THRESHOLDS,
    Line,
    Thresholds,
    asks_about_past,
    best_lines,
    cosine,
    focus_lines,
    query_score,
    salient,
    same_thing,
    split_lines,
    term_weights,
)
from symi_memory.types import Candidate

__all__ = ["Supersession", "find_supersessions"]


def find_supersessions(candidates: Sequence[Candidate], vectors: Mapping[str, Sequence[float]], query: str,
                       t: Thresholds = THRESHOLDS,
                       written: Mapping[str, tuple[float, float]] | None = None,
                       as_of: float | None = None,
                       line_vectors: Mapping[str, Sequence[LineVector]] | None = None,
                       query_vector: Sequence[float] | None = None,
                       ) -> dict[int, tuple[int, Line, Line]]:
    """``{older index: (newer index, older line, newer line)}`` for candidates a newer one supersedes.

    The newer candidate chosen is the newest of those that restate it. With
    ``as_of``, a line dated at or after it (an undated note changed later)
    has no known date then and supersedes nothing. With ``line_vectors``
    (the candidates' stored line vectors), two lines are compared by their
    own vectors where both have one, else by their chunks'; with the
    ``query_vector`` too, a hit is superseded only through the lines that
    answer the query (their vectors closest to the query's), not through a
    side remark that a newer note changes.
    """
    qterms = salient(query)
    if asks_about_past(query):
        return {}
    all_lines = [split_lines(c.path, c.start_line, c.text, c.mtime, (written or {}).get(c.id)) for c in candidates]
    weights = term_weights(qterms, all_lines)
    focus: dict[int, list[Line]] = {}
    best: dict[int, list[Line]] = {}
    for i, lines in enumerate(all_lines):
        found = focus_lines(lines, qterms)
        if found:
            focus[i] = found
            best[i] = best_lines(lines, weights, share=t.best_share)
    newest = {i: max(ln.moment for ln in lines) for i, lines in focus.items()}
    sims = _cosines([vectors.get(c.id) for c in candidates])
    lines = _LineVectors.of(candidates, all_lines, focus, best, vectors, line_vectors, query_vector)
    if lines is not None and lines.to_query is not None:
        for i in focus:
            # Lines naming the query's subject, if any do; of those, the ones closest to the query by meaning.
            about = [ln for ln in all_lines[i] if query_score(ln, weights) > 0] or all_lines[i]
            answer = lines.answer_lines(i, about, t.answer_margin)
            if answer:
                best[i] = answer
    line_cos = lines.cos if lines is not None else None
    out: dict[int, tuple[int, Line, Line]] = {}
    idx = list(focus)
    floor = t.chunk_vector_lines if line_cos is not None else t.chunk_vector
    for i in idx:
        vi = vectors.get(candidates[i].id)
        if vi is None:
            continue
        chosen: tuple[int, Line, Line] | None = None
        for j in idx:
            if j == i or newest[j] <= newest[i]:
                continue
            if candidates[j].path == candidates[i].path and candidates[j].start_line == candidates[i].start_line:
                continue
            if candidates[j].score < t.score_ratio * candidates[i].score:
                continue
            cos = sims[i][j] if sims is not None else cosine(vi, vectors.get(candidates[j].id))
            if cos is None or cos < min(floor, t.chunk_vector):
                continue
            for a in best[i]:  # only a line the hit is returned for makes the whole hit superseded
                for b in focus[j]:
                    if as_of is not None and b.moment[0] >= as_of:
                        continue
                    if b.moment > a.moment and same_thing(a, b, cos, t, weights,
                                                          line_cos(i, a, j, b) if line_cos else None):
                        if chosen is None or b.moment > chosen[2].moment:
                            chosen = (j, a, b)
        if chosen is not None:
            out[i] = chosen
    return out


@attrs.frozen
class _LineVectors:
    """The candidates' stored line vectors for one search: line against line, and line against the query."""

    rows: dict[tuple[int, int], int]
    sim: Any
    to_query: Any

    @classmethod
    def of(cls, candidates: Sequence[Candidate], all_lines: Sequence[Sequence[Line]],
           focus: Mapping[int, Sequence[Line]], best: Mapping[int, Sequence[Line]],
           vectors: Mapping[str, Sequence[float]], line_vectors: Mapping[str, Sequence[LineVector]] | None,
           query_vector: Sequence[float] | None) -> _LineVectors | None:
        """None when no candidate has line vectors (or numpy is missing).

        A line's vector is that of the unit starting at it (or covering it); a chunk without units whose
        only line is the chunk has its chunk vector as the line's.
        """
        if not line_vectors:
            return None
        try:
            import numpy as np
        except ImportError:  # pragma: no cover - numpy comes with every vector backend
            return None
        rows: dict[tuple[int, int], int] = {}
        mats: list[Any] = []
        for i in focus:
            cid = candidates[i].id
            units = line_vectors.get(cid)
            if units:
                for ln in all_lines[i]:
                    n = ln.line_no
                    vec = next((v for a, b, v in units if a <= n <= b), None)
                    if vec is not None:
                        rows[(i, n)] = len(mats)
                        mats.append(vec)
            elif len(all_lines[i]) == 1 and vectors.get(cid) is not None:
                rows[(i, all_lines[i][0].line_no)] = len(mats)
                mats.append(vectors[cid])
        if not mats or len({len(v) for v in mats}) != 1:
            return None
        m = np.asarray(mats, dtype=np.float32)
        norms = np.linalg.norm(m, axis=1)
        norms[norms == 0] = 1.0
        m /= norms[:, None]
        to_query = None
        if query_vector is not None and len(query_vector) == m.shape[1]:
            q = np.asarray(query_vector, dtype=np.float32)
            qn = float(np.linalg.norm(q))
            if qn > 0:
                to_query = m @ (q / qn)
        return cls(rows=rows, sim=m @ m.T, to_query=to_query)

    def cos(self, i: int, a: Line, j: int, b: Line) -> float | None:
        """Cosine of line ``a`` of candidate ``i`` and line ``b`` of ``j``; None where either has no vector."""
        ra, rb = self.rows.get((i, a.line_no)), self.rows.get((j, b.line_no))
        if ra is None or rb is None:
            return None
        return float(self.sim[ra, rb])

    def answer_lines(self, i: int, lines: Sequence[Line], margin: float) -> list[Line]:
        """The lines of candidate ``i`` closest to the query (within ``margin`` of the best), best first;
        empty when its lines have no vectors."""
        scored = [(float(self.to_query[r]), ln) for ln in lines if (r := self.rows.get((i, ln.line_no))) is not None]
        if not scored:
            return []
        top = max(sc for sc, _ in scored)
        return [ln for sc, ln in sorted(scored, key=lambda p: -p[0]) if sc >= top - margin]


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
        lines = ctx.line_vectors([c.id for c in head]) if ctx.line_vectors is not None else None
        found = find_supersessions(head, vectors, ctx.query, self.thresholds, written, ctx.as_of, lines,
                                   ctx.query_vector)
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
