"""Query analysis for the keyword side: stop words, stemming, and a calibrated keyword score.

The index tokenizes with FTS5 ``porter`` over ``unicode61 remove_diacritics 2``;
:func:`terms` runs that same tokenizer in-process (an in-memory SQLite
connection per thread), so a query word and a chunk word are compared
exactly as FTS5 compares them ("flights" and "flight" are one term).

The keyword evidence of a chunk is BM25 normalised by the query: each query
term's BM25 contribution (IDF x saturated term frequency, with length
normalisation against the configured chunk size) divided by the sum of the
query terms' IDFs, so a full-size chunk holding every query term once scores
1.0 whatever the size of the index, and the IDFs only say which terms of the
query matter more.
It is mapped to a probability of relevance by a logistic fitted on the dev
sets (``bench/calibration_fit.py``). Unlike the old squashed BM25 rank
(``|r| / (1 + |r|)``) it does not grow with the size of the index: a chunk
holding every rare word of the query scores the same in a 3-file workspace
and in a 3,000-file one.
"""

from __future__ import annotations

import functools
import math
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import apsw
import attrs

from .keyword import CJK_RUN_RE, WORD_RE, cjk_bigrams, identifier_tokens, query_tokens

__all__ = [
    "BM25_B",
    "BM25_K1",
    "EXACT_KEYWORD_FLOOR",
    "KEYWORD_CALIBRATION",
    "STOP_WORDS",
    "MAX_QUERY_WORDS",
    "QueryAnalysis",
    "capped_query",
    "content_words",
    "counts_in",
    "idf",
    "keyword_evidence",
    "keyword_log_odds",
    "keyword_probability",
    "needles",
    "query_terms",
    "stem",
    "stem_tokens",
    "stem_word",
    "term_counts",
    "term_string",
    "terms",
    "terms_in",
]

TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])

# English function words and question words. A query made only of these has
# nothing to look for; in a longer query they match nearly every chunk and
# would only add noise to the keyword side. Compared after lower-casing.
STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both but
by can could did do does doing down during each few for from further had has have having he her here hers herself
him himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only or
other our ours ourselves out over own same she should so some such than that the their theirs them themselves then
there these they this those through to too under until up very was we were what when where which while who whom why
will with would you your yours yourself yourselves s t don doesn didn isn wasn aren weren ll ve re d m o y also
tell know anything something thing things get got ever still much many
""".split())

# Least keyword probability of a chunk holding every content word of the query or its identifier.
EXACT_KEYWORD_FLOOR = 0.5

# BM25's term-frequency saturation and length normalisation (the usual values, FTS5's too).
BM25_K1 = 1.2
BM25_B = 0.75

# Logistic mapping of the keyword evidence to P(relevant): fitted by bench/calibration_fit.py.
KEYWORD_CALIBRATION = (3.41, 1.102)  # (slope, midpoint)

_local = threading.local()


def _tokenizer() -> object:
    tok = getattr(_local, "tok", None)
    if tok is None:
        conn = apsw.Connection(":memory:")
        tok = conn.fts5_tokenizer(*TOKENIZER)
        _local.conn, _local.tok = conn, tok
    return tok


def _stem_all(text: str) -> list[str]:
    tok = _tokenizer()
    out: list[str] = tok(text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None,  # type: ignore[operator]
                         include_offsets=False, include_colocated=False)
    # Without offsets or colocated tokens, apsw hands back each token as a plain str.
    return out


def stem_tokens(text: str) -> list[str]:
    """The index terms of ``text`` in order, as the index's tokenizer makes them (no CJK bigrams)."""
    return _stem_all(text)


def stem(word: str) -> str:
    """The index term of one word (folded, stemmed); the word folded when it yields none."""
    out = _stem_all(word)
    return out[0] if out else word.lower()


@functools.lru_cache(maxsize=65536)
def stem_word(word: str) -> str:
    """``word`` as the index's porter stemmer writes it when it is made of letters only; else unchanged.

    For backends that tokenize text themselves (a word run with digits or underscores, an
    identifier, stays one token there) but want the builtin side's stemming: "flights" and
    "flight" become one term.
    """
    if not word.isalpha() or CJK_RUN_RE.search(word):
        return word
    out = _stem_all(word)
    return out[0] if len(out) == 1 else word


def terms(text: str) -> set[str]:
    """The set of index terms (folded, stemmed) in ``text``, plus the bigrams of its CJK runs."""
    out = set(_stem_all(text))
    out.update(cjk_bigrams(text).split())
    return out


def term_counts(text: str) -> Counter[str]:
    """How often each index term (folded, stemmed; CJK bigrams too) occurs in ``text``."""
    out = Counter(_stem_all(text))
    out.update(cjk_bigrams(text).split())
    return out


def term_string(text: str) -> str:
    """The index terms of ``text`` (as :func:`term_counts` counts them), each as `` term `` in one string.

    A compact form of the counts to keep per chunk (about the text's own size; a ``Counter`` of a
    400-token chunk takes several kilobytes): :func:`terms_in` reads a term's count back from it.
    """
    tokens = _stem_all(text)
    if not text.isascii():  # CJK bigrams: none in ASCII text
        tokens.extend(cjk_bigrams(text).split())
    return f" {'  '.join(tokens)} " if tokens else ""


def terms_in(packed: str, terms: Iterable[str]) -> dict[str, int]:
    """``{term: count}`` of these terms in a :func:`term_string`, the absent ones left out.

    Index terms hold no spaces, so `` term `` matches whole terms only, and each occurrence
    carries its own spaces, so adjacent repeats are all counted.
    """
    return counts_in(packed, needles(terms))


def needles(terms: Iterable[str]) -> list[tuple[str, str]]:
    """``(term, " term ")`` of each term: what :func:`counts_in` looks for in a :func:`term_string`."""
    return [(t, f" {t} ") for t in terms if t]


def counts_in(packed: str, found: Sequence[tuple[str, str]]) -> dict[str, int]:
    """:func:`terms_in` with the :func:`needles` made once for many chunks."""
    return {t: n for t, needle in found if (n := packed.count(needle))}


def content_words(words: Iterable[str]) -> list[str]:
    """Query words that are not stop words, in order."""
    return [w for w in words if w.lower() not in STOP_WORDS]


def query_terms(words: Iterable[str]) -> list[str]:
    """The distinct stemmed index terms of the content words, in order."""
    return _terms_of(content_words(words))


def _terms_of(content: Iterable[str]) -> list[str]:
    """:func:`query_terms` of words that are content words already."""
    seen: dict[str, None] = {}
    for w in content:
        if CJK_RUN_RE.search(w):
            # A CJK run is one unicode61 token; as a substring it is the set of its bigrams.
            for t in cjk_bigrams(w).split():
                seen.setdefault(t, None)
            continue
        for t in _stem_all(w):
            seen.setdefault(t, None)
    return list(seen)


#: The most distinct content words of one query that are looked up (the first ones): a question has a few dozen, and
#: a document pasted as a query (tens of thousands) would cost seconds per search for nothing it could rank by.
MAX_QUERY_WORDS = 1024


#: A text shorter than this cannot hold more than :data:`MAX_QUERY_WORDS` distinct words (each takes a character and
#: is parted from the next by one): :func:`capped_query` answers it without a look.
_CAP_MIN_CHARS = 2 * MAX_QUERY_WORDS + 1


def capped_query(text: str, limit: int = MAX_QUERY_WORDS) -> tuple[str, str | None]:
    """``text`` cut before its first content word past ``limit`` distinct ones, and the warning saying so (None: whole).

    The words looked up are those :class:`QueryAnalysis` keeps (the first ``limit`` distinct content words, folded
    to lower case), so a backend handed the cut text searches for the same words builtin-sqlite does: the core cuts
    every search's query so (:meth:`~symi_memory.manager.MemoryManager.search`), whatever its backend, since a
    backend that looks every word up (postgres: one document-frequency probe per word; qmd: the query as one
    argument, refused by the OS past 128 KiB) took minutes or failed on a document pasted as the query.
    """
    if len(text) < _CAP_MIN_CHARS:
        return text, None
    seen: set[str] = set()
    for m in WORD_RE.finditer(text):
        w = m.group().lower()
        if w in STOP_WORDS or w in seen:
            continue
        if len(seen) == limit:
            return text[:m.start()].rstrip(), (
                f"the query has more than {limit:,} distinct words: only its first {limit:,} were searched for (the "
                f"text from {w[:40]!r} on, {len(text) - m.start():,} characters, was left out)")
        seen.add(w)
    return text, None


def _first_distinct(words: list[str], limit: int) -> list[str]:
    """``words`` (repeats kept) up to the first of them past ``limit`` distinct ones (folded to lower case)."""
    seen: set[str] = set()
    for i, w in enumerate(words):
        seen.add(w.lower())
        if len(seen) > limit:
            return words[:i]
    return words


@attrs.frozen
class QueryAnalysis:
    """One query, tokenized once: what every step of a search needs from its text.

    ``tokens``: the word runs (:func:`~.keyword.query_tokens`); ``words``: those that are
    not stop words (:func:`content_words`); ``terms``: their index terms (:func:`query_terms`);
    ``identifiers``: the tokens that look like identifiers (:func:`~.keyword.identifier_tokens`).
    """

    text: str
    tokens: tuple[str, ...]
    words: tuple[str, ...]
    terms: tuple[str, ...]
    identifiers: tuple[str, ...]

    @classmethod
    def of(cls, text: str) -> QueryAnalysis:
        tokens = query_tokens(text)
        words = _first_distinct(content_words(tokens), MAX_QUERY_WORDS)
        return cls(text=text, tokens=tuple(tokens), words=tuple(words), terms=tuple(_terms_of(words)),
                   identifiers=tuple(identifier_tokens(tokens)))


def idf(df: int, n: int) -> float:
    """A positive IDF (BM25's, plus one inside the log): rarer terms weigh more, absent ones the most."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))




def keyword_evidence(counts: Mapping[str, int], length_ratio: float, weights: Mapping[str, float],
                     synonyms: Mapping[str, Sequence[tuple[str, float]]] | None = None) -> float:
    """BM25 of a chunk normalised by the query (see the module docstring); 0 when no term is present.

    ``counts`` are the chunk's term frequencies, ``length_ratio`` its length over the configured
    chunk size (a fixed reference, so the score does not depend on what else is indexed),
    ``weights`` the query terms' IDFs. Each present term adds
    ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length_ratio))``; the sum is divided by the
    sum of the IDFs. One occurrence in a full-size chunk counts 1, in a shorter chunk or repeated
    more, up to ``k1 + 1``.

    ``synonyms``: ``{query term: ((index term, factor), ...)}`` (:mod:`.synonyms`, for query words the
    index does not hold); a term then counts the best of its own contribution and each stand-in's
    times its factor.
    """
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    norm = BM25_K1 * (1.0 - BM25_B + BM25_B * max(0.0, length_ratio))
    score = 0.0
    for t, w in weights.items():
        tf = counts.get(t, 0)
        stand_ins = synonyms.get(t) if synonyms else None
        if stand_ins:
            sat = tf * (BM25_K1 + 1.0) / (tf + norm) if tf else 0.0
            for s, factor in stand_ins:
                stf = counts.get(s, 0)
                if stf:
                    sat = max(sat, factor * stf * (BM25_K1 + 1.0) / (stf + norm))
            score += w * sat
        elif tf:
            score += w * tf * (BM25_K1 + 1.0) / (tf + norm)
    return score / total


def keyword_log_odds(evidence: float) -> float:
    """The log-odds of relevance that :data:`KEYWORD_CALIBRATION` gives this evidence (no floor, no cut at 0).

    Weighted fusion adds it to the vector side's log-odds; no keyword evidence is a finite value
    (``-slope * midpoint``, about -3.8), not minus infinity: having none of the query's words is
    evidence against a chunk, not a veto.
    """
    slope, mid = KEYWORD_CALIBRATION
    return slope * (max(0.0, evidence) - mid)


def keyword_probability(evidence: float, *, exact: bool = False) -> float:
    """Keyword evidence mapped to P(relevant) with :data:`KEYWORD_CALIBRATION`; no evidence is 0.

    ``exact``: the chunk holds every content word of the query, or an identifier of it (a hash,
    ticket, env var); its probability is at least :data:`EXACT_KEYWORD_FLOOR`, whatever the
    chunk's length (a long chunk dilutes BM25 but not the fact that the needle is in it).
    """
    if evidence <= 0:
        return 0.0
    slope, mid = KEYWORD_CALIBRATION
    p = 1.0 / (1.0 + math.exp(-slope * (evidence - mid)))
    return max(p, EXACT_KEYWORD_FLOOR) if exact else p
