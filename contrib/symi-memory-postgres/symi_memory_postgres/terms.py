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


def document_terms(text: str) -> str:
    """The text handed to ``to_tsvector('simple', ...)`` for one chunk."""
    words = [_term(t) for t in word_terms(text)]
    bigrams = [_term(b) for b in cjk_bigrams(text).split()]
    return " ".join(words + (["x"] if bigrams else []) + bigrams)


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

