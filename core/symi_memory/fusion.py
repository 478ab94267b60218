"""Merging keyword and vector candidates into one calibrated score (spec/behaviour.md §4).

Both sides arrive as probabilities of relevance: the vector side through the
provider's :class:`~symi_memory.specs.ScoreCalibration`, the keyword side
through :func:`symi_memory.index.analysis.keyword_probability`. Fusion keeps
that scale, so ``minScore`` means the same under every provider and fusion:

* weighted: ``w_v * p_v + w_t * p_t`` with the weights normalised to sum 1;
  a chunk holding every query word or an identifier of the query keeps at
  least its keyword probability.
* rrf: reciprocal rank fusion decides the order; each chunk's score is its
  weighted calibrated score, capped by the score of the chunk ranked above it,
  so the scores fall down the ranking and a chunk RRF lifts high but nothing
  supports never scores above what its evidence says.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["IDENTIFIER_TEXT_SHARE", "fuse_rrf", "fuse_weighted", "query_weights", "rrf_order"]

# Share of the keyword side for a query holding an identifier (hash, ticket, env var):
# embeddings represent such needles poorly, keyword search nails them.
IDENTIFIER_TEXT_SHARE = 0.7


def query_weights(vector_weight: float, text_weight: float, *, has_identifier: bool) -> tuple[float, float]:
    """Weights normalised to sum 1; a query with an identifier leans on the keyword side."""
    total = vector_weight + text_weight
    if total <= 0:
        vw, tw = 0.5, 0.5
    else:
        vw, tw = vector_weight / total, text_weight / total
    if has_identifier and tw > 0 and tw < IDENTIFIER_TEXT_SHARE:
        vw, tw = 1.0 - IDENTIFIER_TEXT_SHARE, IDENTIFIER_TEXT_SHARE
    return vw, tw


def fuse_weighted(
    vector: Mapping[int, float],
    text: Mapping[int, float],
    *,
    vector_weight: float,
    text_weight: float,
    exact: frozenset[int] | set[int] = frozenset(),
) -> dict[int, float]:
    """``vector_weight * p_v + text_weight * p_t`` over the union of candidates (weights sum to 1).

    ``exact`` holds candidates that contain every query word, or an
    identifier-like one (a hash, ticket ID, env var): their keyword
    probability stands on its own, so their score is at least that.
    """
    out: dict[int, float] = {}
    for key in set(vector) | set(text):
        v = max(0.0, vector.get(key, 0.0))
        t = text.get(key, 0.0)
        score = vector_weight * v + text_weight * t
        if key in exact:
            score = max(score, t)
        out[key] = min(1.0, max(0.0, score))
    return out


def rrf_order(
    vector_ranked: list[int],
    text_ranked: list[int],
    *,
    k: int = 60,
    vector_weight: float = 0.5,
    text_weight: float = 0.5,
) -> list[int]:
    """Candidates ordered by weighted reciprocal rank fusion (ties by id)."""
    out: dict[int, float] = {}
    for ranked, weight in ((vector_ranked, vector_weight), (text_ranked, text_weight)):
        if weight <= 0:
            continue
        for rank, key in enumerate(ranked, start=1):
            out[key] = out.get(key, 0.0) + weight / (k + rank)
    return sorted(out, key=lambda key: (-out[key], key))


def fuse_rrf(
    vector: Mapping[int, float],
    text: Mapping[int, float],
    *,
    k: int = 60,
    vector_weight: float,
    text_weight: float,
    exact: frozenset[int] | set[int] = frozenset(),
) -> dict[int, float]:
    """RRF order over the calibrated scores of each side, with scores on the calibrated scale.

    Each side is ranked by its own probability; RRF merges the ranks. The
    score of the chunk at position ``i`` is ``min(calibrated score, score at
    i - 1)``: monotone in the RRF order, and never above the chunk's own
    evidence, so ``minScore`` keeps its meaning.
    """
    calibrated = fuse_weighted(vector, text, vector_weight=vector_weight, text_weight=text_weight, exact=exact)
    vr = [key for key, _ in sorted(vector.items(), key=lambda kv: (-kv[1], kv[0]))]
    tr = [key for key, _ in sorted(text.items(), key=lambda kv: (-kv[1], kv[0])) if text[key] > 0]
    out: dict[int, float] = {}
    cap = 1.0
    for key in rrf_order(vr, tr, k=k, vector_weight=vector_weight, text_weight=text_weight):
        cap = min(cap, calibrated.get(key, 0.0))
        out[key] = cap
    return out
