"""Keyword terms for PostgreSQL full-text search, independent of the server's locale.

The server's text-search parser decides what a word is from its locale, so a
server initialised with ``C`` would not see Cyrillic or CJK letters as words.
The terms are therefore made here, with the core's tokenizer
(:func:`symi_memory.indexing.query_tokens` over :func:`~symi_memory.indexing.fold`,
as the builtin FTS5 side does), and each is sent hex-encoded behind a ``t``:
plain ASCII words that the ``simple`` configuration keeps as they are.

Words made of letters are stemmed as the builtin index stems them
(:func:`symi_memory.indexing.stem_word`, porter), so "flights" finds "flight"
on both backends; words with digits or underscores (identifiers) stay whole.

CJK runs are also indexed as overlapping bigrams after the words; a CJK query
token becomes a phrase of its bigrams (``<->``), which is a substring match.
"""

from __future__ import annotations

from symi_memory.indexing import cjk_bigrams, fold, query_tokens, stem_word

__all__ = ["document_terms", "query_expression", "token_expressions", "word_terms"]


def _term(token: str) -> str:
    return "t" + token.encode("utf-8").hex()


#: PostgreSQL refuses a tsvector whose lexemes and positions take more than 1 MB (1048575 bytes): "string is too
#: long for tsvector", which failed the whole sync. A chunk of CJK text is the way there (each distinct bigram is
#: a 13-byte term) once chunks are large (``chunking.tokens`` of about 20000 and more).
TSVECTOR_BUDGET = 1_000_000
#: Longer words are dropped by the server ("word is too long to be indexed"): they take no room.
MAX_LEXEME = 2047


def document_terms(text: str) -> str:
    """The text handed to ``to_tsvector('simple', ...)`` for one chunk.

    Terms that would take the tsvector beyond PostgreSQL's limit are left out (in order of first
    occurrence, the later ones): the chunk stays findable by the rest instead of failing the sync.
    """
    words = [_term(t) for t in word_terms(text)]
    bigrams = [_term(b) for b in cjk_bigrams(text).split()]
    terms = words + (["x"] if bigrams else []) + bigrams
    counts: dict[str, int] = {}
    for t in terms:
        counts[t] = counts.get(t, 0) + 1
    size = 0
    kept: set[str] = set()
    for t, n in counts.items():  # the server's size: each distinct term, aligned, then up to 256 positions
        if len(t) > MAX_LEXEME:
            continue
        cost = len(t) + 3 + 2 * min(n, 256)
        if size + cost > TSVECTOR_BUDGET:
            break
        size += cost
        kept.add(t)
    return " ".join(terms if len(kept) == len(counts) else [t for t in terms if t in kept])


def word_terms(text: str) -> list[str]:
    """The index terms of ``text``'s words in order, repeats kept: folded, and stemmed when made of letters."""
    return [stem_word(t) for t in query_tokens_all(fold(text))]


def query_tokens_all(text: str) -> list[str]:
    """Every word token in order, repeats kept (term frequency and positions count for ranking)."""
    import re

    return re.findall(r"\w+", text)


def query_expression(text: str) -> str | None:
    """A ``to_tsquery('simple', ...)`` expression: every query token, OR-joined; None without tokens."""
    return " | ".join(dict.fromkeys(token_expressions(text).values())) or None


def token_expressions(text: str, skip: frozenset[str] = frozenset()) -> dict[str, str]:
    """Each query term (folded, stemmed) and the ``to_tsquery('simple', ...)`` expression matching it.

    Tokens whose folded form is in ``skip`` (stop words) are left out.
    """
    alts: dict[str, str] = {}
    for token in query_tokens(text):
        folded = fold(token)
        if folded in skip:
            continue
        bigrams = cjk_bigrams(token).split()
        if bigrams:
            term = _term(folded)
            phrase = " <-> ".join(_term(b) for b in bigrams)
            # One CJK character: any bigram starting with it (a prefix match on its encoding).
            alts[folded] = f"({term} | ({phrase}))" if len(bigrams) > 1 else f"({term} | {phrase}:*)"
        else:
            key = stem_word(folded)
            alts.setdefault(key, _term(key))
    return alts

