"""Merging keyword and vector candidates into one 0..1 score (spec/behaviour.md §4)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["EXACT_FLOOR", "exact_text_score", "fuse_rrf", "fuse_weighted"]

EXACT_FLOOR = 0.5


def exact_text_score(t: float) -> float:
    """The keyword score of an exact match: at least ``EXACT_FLOOR``, still ordered by BM25.

    FTS5's BM25 gives a term found in more than half of the chunks an IDF of
    ~0, so in a small workspace (one ``MEMORY.md``) even a chunk holding every
    query word scores ~1e-6 and ``minScore`` would drop it. Holding every query
    token (or an identifier token) is a strong signal on its own, so it lifts
    the score into ``[0.5, 1)``, keeping the BM25 order among exact matches.
    """
    return EXACT_FLOOR + (1.0 - EXACT_FLOOR) * t


def fuse_weighted(
    vector: Mapping[int, float],
    text: Mapping[int, float],
    *,
    vector_weight: float,
    text_weight: float,
    exact: frozenset[int] | set[int] = frozenset(),
) -> dict[int, float]:
    """``vectorWeight * v + textWeight * t`` over the union of candidates.

    ``exact`` holds candidates that contain every query token, or an
    identifier-like one (a hash, ticket ID, env var). Embeddings represent
    such needles poorly, so their keyword score stands on its own:
    their score is at least the text score. Without this, a keyword-only hit
    (at most 0.3 under default weights) could never pass ``minScore`` 0.35.
    """
    out: dict[int, float] = {}
    for key in set(vector) | set(text):
        v = max(0.0, vector.get(key, 0.0))
        t = text.get(key, 0.0)
        score = vector_weight * v + text_weight * t
        if key in exact:
            score = max(score, t)
        out[key] = min(1.0, score)
    return out


def fuse_rrf(
    vector_ranked: list[int],
    text_ranked: list[int],
    *,
    k: int = 60,
    vector_weight: float = 0.5,
    text_weight: float = 0.5,
) -> dict[int, float]:
    """Weighted reciprocal rank fusion, normalised by the best possible value.

    A chunk ranked first on both sides scores 1.0, so ``minScore`` keeps its
    0..1 meaning. With only one side active, that side alone defines the best.
    """
    sides = [(vector_ranked, vector_weight), (text_ranked, text_weight)]
    active = [(ranked, w) for ranked, w in sides if ranked and w > 0]
    best = sum(w / (k + 1) for _, w in active)
    out: dict[int, float] = {}
    if best <= 0:
        return out
    for ranked, weight in active:
        for rank, key in enumerate(ranked, start=1):
            out[key] = out.get(key, 0.0) + weight / (k + rank)
    return {key: value / best for key, value in out.items()}
