"""Merging keyword and vector candidates into one 0..1 score (spec/behaviour.md §4)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, TypeVar

__all__ = ["EXACT_FLOOR", "exact_text_score", "fuse_hybrid", "fuse_rrf", "fuse_weighted", "score_hits"]

K = TypeVar("K", bound=Hashable)

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
    vector: Mapping[K, float],
    text: Mapping[K, float],
    *,
    vector_weight: float,
    text_weight: float,
    exact: frozenset[K] | set[K] = frozenset(),
) -> dict[K, float]:
    """``vectorWeight * v + textWeight * t`` over the union of candidates.

    ``exact`` holds candidates that contain every query token, or an
    identifier-like one (a hash, ticket ID, env var). Embeddings represent
    such needles poorly, so their keyword score stands on its own:
    their score is at least the text score. Without this, a keyword-only hit
    (at most 0.3 under default weights) could never pass ``minScore`` 0.35.
    """
    out: dict[K, float] = {}
    for key in set(vector) | set(text):
        v = max(0.0, vector.get(key, 0.0))
        t = text.get(key, 0.0)
        score = vector_weight * v + text_weight * t
        if key in exact:
            score = max(score, t)
        out[key] = min(1.0, score)
    return out


def fuse_rrf(
    vector_ranked: list[K],
    text_ranked: list[K],
    *,
    k: int = 60,
    vector_weight: float = 0.5,
    text_weight: float = 0.5,
) -> dict[K, float]:
    """Weighted reciprocal rank fusion, normalised by the best possible value.

    A chunk ranked first on both sides scores 1.0, so ``minScore`` keeps its
    0..1 meaning. With only one side active, that side alone defines the best.
    """
    sides = [(vector_ranked, vector_weight), (text_ranked, text_weight)]
    active = [(ranked, w) for ranked, w in sides if ranked and w > 0]
    best = sum(w / (k + 1) for _, w in active)
    out: dict[K, float] = {}
    if best <= 0:
        return out
    for ranked, weight in active:
        for rank, key in enumerate(ranked, start=1):
            out[key] = out.get(key, 0.0) + weight / (k + rank)
    return {key: value / best for key, value in out.items()}


def fuse_hybrid(hybrid: Mapping[str, Any], vector: Mapping[K, float], text: Mapping[K, float],
                exact: set[K] | frozenset[K] = frozenset()) -> dict[K, float]:
    """Fuse both sides as ``memorySearch.query.hybrid`` says (``fusion``, weights, ``rrfK``).

    Exact keyword matches keep their text score under either fusion (see
    :func:`fuse_weighted`). Every backend that fuses keyword and vector
    candidates itself should call this, so they all score alike.
    """
    vw, tw = hybrid["vectorWeight"], hybrid["textWeight"]
    if hybrid["fusion"] == "rrf":
        vr = [k for k, _ in sorted(vector.items(), key=lambda kv: -kv[1])]
        tr = [k for k, _ in sorted(text.items(), key=lambda kv: -kv[1])]
        fused = fuse_rrf(vr, tr, k=hybrid["rrfK"], vector_weight=vw, text_weight=tw)
        return {k: max(v, text[k]) if k in exact else v for k, v in fused.items()}
    return fuse_weighted(vector, text, vector_weight=vw, text_weight=tw, exact=exact)


def score_hits(
    query: str,
    hybrid: Mapping[str, Any],
    *,
    text_hits: Mapping[K, float],
    vector_hits: Mapping[K, float],
    texts: Mapping[K, str],
    use_vector: bool,
) -> tuple[str, dict[K, float], dict[K, float], set[K]]:
    """The scoring every hybrid backend shares, from raw side scores to final ones.

    ``text_hits`` are keyword scores in 0..1 (higher is better), ``vector_hits``
    cosine similarities, ``texts`` the chunk text of every keyword hit (to find
    exact and identifier matches). ``use_vector`` is False when there is no
    query vector. Returns ``(mode, scores, text_scores, identifier_ids)``:
    ``mode`` is ``fts-only``, ``vector`` or ``hybrid``; ``text_scores`` are the
    keyword scores after the exact-match floor (what ``Candidate.text_score``
    reports); ``identifier_ids`` the hits holding an identifier-like token.
    """
    from .index.keyword import ExactMatcher

    matcher = ExactMatcher.for_query(query)
    exact: set[K] = set()
    idents: set[K] = set()
    for k in text_hits:
        full, ident = matcher.classify(texts[k])
        if full:
            exact.add(k)
        if ident:
            idents.add(k)
    text_scores = {k: (exact_text_score(t) if k in exact else t) for k, t in text_hits.items()}
    if not use_vector:
        return "fts-only", dict(text_scores), text_scores, idents
    if not hybrid["enabled"]:
        return "vector", {k: max(0.0, v) for k, v in vector_hits.items()}, text_scores, idents
    return "hybrid", fuse_hybrid(hybrid, vector_hits, text_scores, exact), text_scores, idents
