"""Merging keyword and vector candidates into one calibrated score (spec/behaviour.md §4).

Both sides arrive as probabilities of relevance: the vector side through the
provider's :class:`~symi_memory.specs.ScoreCalibration`, the keyword side
through :func:`symi_memory.index.analysis.keyword_probability`. Fusion keeps
that scale, so ``minScore`` means the same under every provider and fusion:

* weighted: the two sides' evidence adds in log-odds,
  ``p = sigmoid(k * (w_v * logit(p_v) + w_t * l_t) + c)`` with the weights
  normalised to sum 1, ``l_t`` the keyword side's log-odds
  (:func:`~symi_memory.index.analysis.keyword_log_odds`, finite when a chunk
  has none of the query's words) and ``(k, c)`` = :data:`FUSION_CALIBRATION`,
  fitted so that the fused score is itself a probability of relevance; a
  chunk holding none of the query's words scores ``w_v * p_v``. A
  query holding an identifier (hash, ticket, env var) mixes probabilities
  instead, ``0.3 * p_v + 0.7 * p_t``, so a chunk lacking the identifier does
  not pass ``minScore`` on a vague likeness. A chunk holding every query word
  or an identifier of the query keeps at least its keyword probability.
* rrf: reciprocal rank fusion decides the order; each chunk's score is its
  weighted calibrated score, capped by the score of the chunk ranked above it,
  so the scores fall down the ranking and a chunk RRF lifts high but nothing
  supports never scores above what its evidence says.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from itertools import islice
from math import isnan
from operator import eq, itemgetter
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

if TYPE_CHECKING:
    from .index.analysis import QueryAnalysis

__all__ = [
    "FUSION_CALIBRATION",
    "IDENTIFIER_TEXT_SHARE",
    "ScoredHits",
    "fuse",
    "fuse_rrf",
    "fuse_weighted",
    "query_weights",
    "rrf_order",
    "score_hits",
]

K = TypeVar("K", bound=Hashable)

# Share of the keyword side for a query holding an identifier (hash, ticket, env var):
# embeddings represent such needles poorly, keyword search nails them.
IDENTIFIER_TEXT_SHARE = 0.7

# Weighted fusion: P(relevant) = sigmoid(k * (w_v * vector log-odds + w_t * keyword log-odds) + c), (k, c) fitted
# by bench/calibration_fit.py --fusion on devmem and convmem together for the default weights.
FUSION_CALIBRATION = (1.327, 0.841)  # (k, c)
_COUNTS = itemgetter(0)  # the term counts of a (counts, length) pair
# Probabilities are clipped to this distance from 0 and 1 before their log-odds are taken.
_LOGIT_EPS = 1e-6


def _logit(p: float) -> float:
    p = min(1.0 - _LOGIT_EPS, max(_LOGIT_EPS, p))
    return math.log(p / (1.0 - p))


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
    vector: Mapping[K, float],
    text: Mapping[K, float],
    *,
    vector_weight: float,
    text_weight: float,
    exact: frozenset[K] | set[K] = frozenset(),
    text_log_odds: Mapping[K, float] | None = None,
    log_odds: bool = True,
    before_floor: dict[K, float] | None = None,
) -> dict[K, float]:
    """Both sides' calibrated evidence added in log-odds, over the union of candidates (weights sum to 1).

    ``sigmoid(k * (vector_weight * logit(p_v) + text_weight * l_t) + c)``, ``(k, c)`` =
    :data:`FUSION_CALIBRATION`. ``text_log_odds`` is each chunk's keyword log-odds before any floor
    (:func:`~symi_memory.index.analysis.keyword_log_odds` of its evidence); a chunk missing from it
    takes ``logit(p_t)``. A chunk holding none of the query's words scores ``vector_weight * p_v``, its
    vector side alone as the probability mix has it (the log-odds sum would keep about 0.015 for a chunk
    with no evidence on either side, above a ``minScore`` that keeps reworded answers); a chunk without a
    vector score (its vector is not stored yet) scores ``text_weight * p_t``, its keyword side alone.
    ``log_odds`` False mixes the probabilities instead, ``vector_weight * p_v + text_weight * p_t``: an
    identifier look-up, where a chunk without the identifier must not pass ``minScore`` on a vague
    likeness alone.

    ``exact`` holds candidates that contain every query word, or an identifier-like one (a hash,
    ticket ID, env var): their keyword probability stands on its own, so their score is at least that.
    ``before_floor``, when given, receives each candidate's score before that floor: several chunks holding
    every query word often share the floor's 0.5, and this is what tells them apart.
    """
    from .index.analysis import keyword_log_odds

    k, c = FUSION_CALIBRATION
    no_words = keyword_log_odds(0.0)
    logs = text_log_odds or {}
    # One pass, with _logit written out (this runs for every candidate of every search).
    lo, hi = _LOGIT_EPS, 1.0 - _LOGIT_EPS
    log, exp = math.log, math.exp
    out: dict[K, float] = {}
    for key in set(vector) | set(text):
        t = text.get(key, 0.0)
        if not log_odds:
            score = vector_weight * max(0.0, vector.get(key, 0.0)) + text_weight * t
        elif key not in vector:
            score = text_weight * t
        elif t <= 0 and logs.get(key, no_words) <= no_words:
            # None of the query's words: the vector side alone, at its weight, as the probability mix has it.
            score = vector_weight * max(0.0, vector[key])
        else:
            if key in logs:
                lt = logs[key]
            else:
                q = min(hi, max(lo, t))
                lt = log(q / (1.0 - q))
            pv = min(hi, max(lo, max(0.0, vector[key])))
            z = k * (vector_weight * log(pv / (1.0 - pv)) + text_weight * lt) + c
            score = 1.0 / (1.0 + exp(-z))
        if before_floor is not None:
            before_floor[key] = min(1.0, max(0.0, score))
        if key in exact:
            score = max(score, t)
        out[key] = min(1.0, max(0.0, score))
    return out


def rrf_order(
    vector_ranked: list[K],
    text_ranked: list[K],
    *,
    k: int = 60,
    vector_weight: float = 0.5,
    text_weight: float = 0.5,
) -> list[K]:
    """Candidates ordered by weighted reciprocal rank fusion (ties by id)."""
    out: dict[K, float] = {}
    for ranked, weight in ((vector_ranked, vector_weight), (text_ranked, text_weight)):
        if weight <= 0:
            continue
        for rank, key in enumerate(ranked, start=1):
            out[key] = out.get(key, 0.0) + weight / (k + rank)
    return sorted(out, key=lambda key: (-out[key], key))


def fuse_rrf(
    vector: Mapping[K, float],
    text: Mapping[K, float],
    *,
    k: int = 60,
    vector_weight: float,
    text_weight: float,
    exact: frozenset[K] | set[K] = frozenset(),
    text_log_odds: Mapping[K, float] | None = None,
    log_odds: bool = True,
) -> dict[K, float]:
    """RRF order over the calibrated scores of each side, with scores on the calibrated scale.

    Each side is ranked by its own probability; RRF merges the ranks. The
    score of the chunk at position ``i`` is ``min(calibrated score, score at
    i - 1)``: monotone in the RRF order, and never above the chunk's own
    evidence, so ``minScore`` keeps its meaning.
    """
    calibrated = fuse_weighted(vector, text, vector_weight=vector_weight, text_weight=text_weight, exact=exact,
                               text_log_odds=text_log_odds, log_odds=log_odds)
    vr = [key for key, _ in sorted(vector.items(), key=lambda kv: (-kv[1], kv[0]))]
    tr = [key for key, _ in sorted(text.items(), key=lambda kv: (-kv[1], kv[0])) if text[key] > 0]
    out: dict[K, float] = {}
    cap = 1.0
    for key in rrf_order(vr, tr, k=k, vector_weight=vector_weight, text_weight=text_weight):
        cap = min(cap, calibrated.get(key, 0.0))
        out[key] = cap
    return out


def fuse(hybrid: Mapping[str, Any], vector: Mapping[K, float], text: Mapping[K, float], exact: set[K] | frozenset[K],
         *, has_identifier: bool, text_log_odds: Mapping[K, float] | None = None,
         before_floor: dict[K, float] | None = None) -> dict[K, float]:
    """Both calibrated sides into one score as ``memorySearch.query.hybrid`` says (fusion, weights, ``rrfK``).

    ``before_floor`` (weighted fusion only; RRF orders ties itself) receives each candidate's score before
    the exact-match floor (:func:`fuse_weighted`)."""
    vw, tw = query_weights(hybrid["vectorWeight"], hybrid["textWeight"], has_identifier=has_identifier)
    # An identifier look-up (hash, ticket, env var) mixes probabilities, leaning on keywords: see fuse_weighted.
    log_odds = not has_identifier
    if hybrid["fusion"] == "rrf":
        return fuse_rrf(vector, text, k=hybrid["rrfK"], vector_weight=vw, text_weight=tw, exact=exact,
                        text_log_odds=text_log_odds, log_odds=log_odds)
    return fuse_weighted(vector, text, vector_weight=vw, text_weight=tw, exact=exact, text_log_odds=text_log_odds,
                         log_odds=log_odds, before_floor=before_floor)


@attrs.frozen
class ScoredHits:
    """What :func:`score_hits` decided for one search.

    ``mode`` is ``fts-only``, ``vector`` or ``hybrid``; ``scores`` the final
    calibrated score of each candidate; ``text_scores`` and ``vector_scores``
    each side's probability (what ``Candidate.text_score`` / ``vector_score``
    report); ``identifiers`` the candidates holding an identifier of the query.
    ``tie_scores``: under the weighted hybrid fusion, each candidate's fused
    score before the exact-match floor; a backend orders candidates of equal
    score by it (larger first), then by its keyword ranking. Several chunks
    holding every query word often share the floor (0.5): their evidence
    still differs, on the vector side most of all. Under RRF, minus the
    candidate's RRF position: equal scores (a chunk capped by the one above
    it) keep the RRF order.
    """

    mode: str
    scores: dict[Any, float]
    text_scores: dict[Any, float]
    vector_scores: dict[Any, float]
    identifiers: set[Any]
    tie_scores: dict[Any, float] = attrs.field(factory=dict)

    def order(self, tie: Callable[[Any], Any] | None = None) -> list[tuple[Any, float]]:
        """``scores`` best first: equal scores by ``tie_scores`` (larger first), then by ``tie(key)``
        (smaller first; the backend's keyword rank, say), then by key."""
        keys, scores = self.ranked(tie)
        return list(zip(keys, scores, strict=True))

    def ranked(self, tie: Callable[[Any], Any] | None = None) -> tuple[list[Any], list[float]]:
        """:meth:`order` as two lists, the keys and their scores (no pair is made for each candidate)."""
        scores = self.scores
        # Best first by score alone (a stable sort: equal scores keep the dict's order, which the full key below
        # then decides). No score NaN and no two next to each other equal (==; in the sorted scores, equal ones
        # are next to each other): the scores alone order the items totally, as the whole key (score first) does.
        keys = sorted(scores, key=scores.__getitem__, reverse=True)
        values = list(map(scores.__getitem__, keys))
        if not any(map(isnan, values)) and not any(map(eq, values, islice(values, 1, None))):
            return keys, values
        ties = self.tie_scores
        rest = tie or (lambda key: 0)
        # The keys sorted as they are, then their items (``-(-score)`` is the score, bit for bit): the order
        # ``sorted(items, key=...)`` gives with the same keys, since no two keys are equal.
        keyed = sorted([(-score, -ties.get(key, score), rest(key), key) for key, score in scores.items()])
        return [key for _, _, _, key in keyed], [-score for score, _, _, _ in keyed]


def score_hits(
    query: str,
    hybrid: Mapping[str, Any],
    *,
    texts: Mapping[K, str],
    keyword_ids: Collection[K],
    vector_hits: Mapping[K, float],
    term_weights: Mapping[str, float],
    term_counts: Callable[[K], tuple[Mapping[str, int], int]],
    chunk_chars: int,
    calibration: Any,
    use_vector: bool,
    analysis: QueryAnalysis | None = None,
    synonyms: Mapping[str, Sequence[tuple[str, float]]] | None = None,
    identifier_candidates: Collection[K] | None = None,
    identifier_candidates_by_token: Mapping[str, Collection[K]] | None = None,
) -> ScoredHits:
    """The scoring every hybrid backend shares, from raw side evidence to calibrated scores.

    ``texts``: every candidate's text; ``keyword_ids``: the ones the keyword
    search returned; ``vector_hits``: raw cosine similarities;
    ``term_weights``: the IDF of each query term, in the backend's own term
    space, which ``term_counts(key)`` (the chunk's term frequencies and its
    length in characters) also uses; ``chunk_chars``: the configured chunk
    size, the fixed length reference of BM25; ``calibration``: the provider's
    :class:`~symi_memory.specs.ScoreCalibration`. ``use_vector`` is False when
    there is no comparable query vector. The keyword evidence is
    :func:`symi_memory.index.analysis.keyword_evidence` mapped by
    :func:`~symi_memory.index.analysis.keyword_probability`, so every backend's
    scores share one scale. ``analysis``: the query already tokenized
    (:class:`~symi_memory.index.analysis.QueryAnalysis` of ``query``), when the
    caller has it. ``synonyms``: index terms standing in for query terms the
    index does not hold, as :func:`~symi_memory.index.analysis.keyword_evidence` takes them.
    ``identifier_candidates``: the candidates that may hold an identifier token of the query, when the caller
    knows the others hold none (from their term counts, say); only these texts are searched for one.
    ``identifier_candidates_by_token`` (instead): for each identifier token (as the query spells it), the
    candidates that may hold that one (:meth:`~symi_memory.index.keyword.ExactMatcher.identifier_holders`'s
    ``candidates``); each text is searched only for the tokens it may hold.
    """
    from .index.analysis import BM25_B, BM25_K1, EXACT_KEYWORD_FLOOR, KEYWORD_CALIBRATION, keyword_log_odds
    from .index.keyword import ExactMatcher, identifier_tokens
    from .specs import ScoreCalibration

    # Only the identifier tokens are matched against the texts (the "every word" test uses the term counts).
    idents_of_query = analysis.identifiers if analysis is not None else identifier_tokens(query)
    matcher = ExactMatcher.for_tokens((), idents_of_query)
    has_identifier = bool(matcher.idents)
    scored = texts if (use_vector and hybrid["enabled"]) or not use_vector else {}
    idents: set[K] = set()
    if has_identifier:
        if identifier_candidates_by_token is not None:
            idents = matcher.identifier_holders(scored, identifier_candidates_by_token)
        else:
            maybe = scored if identifier_candidates is None else {k: scored[k] for k in identifier_candidates
                                                                  if k in scored}
            idents = matcher.identifier_holders(maybe)
    exp, log = math.exp, math.log
    # Below, ``max(a, b)`` and ``min(a, b)`` are written as the comparison each makes (``b if b > a else a``,
    # ``b if b < a else a``): the same value, NaN and signed zeros included, without a call per candidate.
    if type(calibration) is ScoreCalibration:
        # calibration.probability written out (the same arithmetic), for every vector hit of every search.
        cs, cm = calibration.slope, calibration.midpoint
        # ``v`` clamped to [0, 1] (0 for NaN) as ``min(1.0, max(0.0, v))`` clamps it, then the logistic.
        vector_scores = {k: 0.0 if (x := cs * (((v if v < 1.0 else 1.0) if v > 0.0 else 0.0) - cm)) < -60
                         else 1.0 / (1.0 + exp(-x)) for k, v in vector_hits.items()}
    else:
        vector_scores = {k: calibration.probability(v) for k, v in vector_hits.items()}
    # The weighted fusion (the default) of each candidate is computed in the pass that weighs its keyword
    # evidence: fuse_weighted's arithmetic written out, in the same order (the scores are bit for bit fuse's).
    # Under RRF the keyword side is collected and handed to fuse; outside hybrid mode there is nothing to fuse.
    weighted = use_vector and hybrid["enabled"] and hybrid["fusion"] != "rrf"
    text_scores: dict[K, float] = {}
    text_log_odds: dict[K, float] = {}
    exact: set[K] = set()
    scores: dict[K, float] = {}
    before_floor: dict[K, float] = {}
    keyword = set(keyword_ids)
    ref = max(1, chunk_chars)
    # analysis.keyword_evidence, keyword_log_odds and keyword_probability written out in one pass over the
    # candidates, with the same arithmetic in the same order (the scores are bit for bit theirs).
    weights = list(term_weights.items())
    total = sum(term_weights.values())
    every = frozenset(t for t, _ in weights)
    # A chunk holding every query word has at least as many counts as the query has words (no words: none does).
    n_every = len(every) if weights else math.inf
    k1, b, k1p = BM25_K1, BM25_B, BM25_K1 + 1.0
    one_b = 1.0 - b  # ``1.0 - b + b * x`` adds ``1.0 - b`` first
    slope, mid = KEYWORD_CALIBRATION
    floor = EXACT_KEYWORD_FLOOR
    syn = synonyms or None
    vw, tw = query_weights(hybrid["vectorWeight"], hybrid["textWeight"], has_identifier=has_identifier) \
        if weighted else (0.0, 0.0)
    log_odds = not has_identifier  # an identifier look-up mixes probabilities (fuse)
    fk, fc = FUSION_CALIBRATION
    no_words = keyword_log_odds(0.0)
    lo, hi = _LOGIT_EPS, 1.0 - _LOGIT_EPS
    vget = vector_scores.get
    keys = list(scored)
    got = list(map(term_counts, keys))
    weighs = total > 0
    if weighs and syn is None:
        # A query term no candidate counts adds nothing to any (the loop skips a count of 0): its look-ups are
        # left out. Its weight stays in ``total``, and in ``every``: no candidate holds every query word then.
        held = set().union(*map(_COUNTS, got))
        weights = [(t, w) for t, w in weights if t in held]
    # The keyword log-odds are wanted unless the fusion mixes probabilities (an identifier look-up, weighted).
    want_lt = not weighted or log_odds
    lt = 0.0
    for k, (counts, length) in zip(keys, got, strict=True):
        is_exact = k in idents or (len(counts) >= n_every and counts.keys() >= every)
        evidence = 0.0
        if counts and weighs:
            x = length / ref
            norm = k1 * (one_b + b * (x if x > 0.0 else 0.0))
            acc = 0.0
            if syn is None:
                get = counts.get
                for t, w in weights:
                    tf = get(t, 0)
                    if tf:
                        acc += w * tf * k1p / (tf + norm)
            else:
                for t, w in weights:
                    tf = counts.get(t, 0)
                    stand_ins = syn.get(t)
                    if stand_ins:  # a query term no chunk holds: its best stand-in counts (analysis.keyword_evidence)
                        sat = tf * k1p / (tf + norm) if tf else 0.0
                        for s, factor in stand_ins:
                            stf = counts.get(s, 0)
                            if stf:
                                sat = max(sat, factor * stf * k1p / (stf + norm))
                        acc += w * sat
                    elif tf:
                        acc += w * tf * k1p / (tf + norm)
            evidence = acc / total
        if want_lt:
            lt = slope * ((evidence if evidence > 0.0 else 0.0) - mid)
        pt: float | None = None  # the keyword probability, None when the keyword side has no say
        if evidence > 0:
            pt = 1.0 / (1.0 + exp(-slope * (evidence - mid)))
            if is_exact and floor > pt:
                pt = floor
            text_scores[k] = pt
        elif k in keyword:
            pt = text_scores[k] = 0.0
        if not weighted:
            text_log_odds[k] = lt
            if is_exact:
                exact.add(k)
            continue
        # fuse_weighted of this candidate; a chunk on neither side is none.
        pv = vget(k)
        if pt is None:
            if pv is None:
                continue
            pt = 0.0
        if not log_odds:
            score = vw * (0.0 if pv is None else (pv if pv > 0.0 else 0.0)) + tw * pt
        elif pv is None:
            score = tw * pt
        elif pt <= 0 and lt <= no_words:
            score = vw * (pv if pv > 0.0 else 0.0)
        else:
            p = pv if pv > 0.0 else 0.0
            p = p if p > lo else lo
            p = p if p < hi else hi
            z = fk * (vw * log(p / (1.0 - p)) + tw * lt) + fc
            score = 1.0 / (1.0 + exp(-z))
        cut = score if score > 0.0 else 0.0
        before_floor[k] = cut if cut < 1.0 else 1.0
        if is_exact and pt > score:
            score = pt
        cut = score if score > 0.0 else 0.0
        scores[k] = cut if cut < 1.0 else 1.0
    if not use_vector:
        return ScoredHits("fts-only", {k: v for k, v in text_scores.items() if v > 0}, text_scores, {}, idents)
    if not hybrid["enabled"]:
        return ScoredHits("vector", dict(vector_scores), text_scores, vector_scores, idents)
    if weighted:
        if len(vector_scores.keys() - scored.keys()):
            # Vector hits that are no candidate of the keyword side: the vector side alone (fuse_weighted).
            alone = {k: v for k, v in vector_scores.items() if k not in scored}
            scores.update(fuse_weighted(alone, {}, vector_weight=vw, text_weight=tw, log_odds=log_odds,
                                        before_floor=before_floor))
        return ScoredHits("hybrid", scores, text_scores, vector_scores, idents, before_floor)
    scores = fuse(hybrid, vector_scores, text_scores, exact, has_identifier=has_identifier, text_log_odds=text_log_odds)
    # RRF's cap gives a chunk the score of the one above it: equal scores keep the RRF order (``scores``'s).
    before_floor = {key: -float(i) for i, key in enumerate(scores)}
    return ScoredHits("hybrid", scores, text_scores, vector_scores, idents, before_floor)
