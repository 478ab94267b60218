"""Keyword terms for PostgreSQL full-text search, independent of the server's locale.

The server's text-search parser decides what a word is from its locale, so a
server initialised with ``C`` would not see Cyrillic or CJK letters as words.
The terms are therefore made here, with the core's tokenizer
(:func:`symi_memory.indexing.query_tokens` over :func:`~symi_memory.indexing.fold`,
as the builtin FTS5 side does), and each is sent hex-encoded behind a ``t``:
plain ASCII words that the ``simple`` configuration keeps as they are.

CJK runs are also indexed as overlapping bigrams after the words; a CJK query
token becomes a phrase of its bigrams (``<->``), which is a substring match.
"""

from __future__ import annotations

from symi_memory.indexing import cjk_bigrams, fold, query_tokens

__all__ = ["document_terms", "query_expression"]


def _term(token: str) -> str:
    return "t" + token.encode("utf-8").hex()


def document_terms(text: str) -> str:
    """The text handed to ``to_tsvector('simple', ...)`` for one chunk."""
    words = [_term(t) for t in query_tokens_all(fold(text))]
    bigrams = [_term(b) for b in cjk_bigrams(text).split()]
    return " ".join(words + (["x"] if bigrams else []) + bigrams)


def query_tokens_all(text: str) -> list[str]:
    """Every word token in order, repeats kept (term frequency and positions count for ranking)."""
    import re

    return re.findall(r"\w+", text)


def query_expression(text: str) -> str | None:
    """A ``to_tsquery('simple', ...)`` expression: every query token, OR-joined; None without tokens."""
    alts: list[str] = []
    for token in query_tokens(text):
        term = _term(fold(token))
        bigrams = cjk_bigrams(token).split()
        if bigrams:
            phrase = " <-> ".join(_term(b) for b in bigrams)
            # One CJK character: any bigram starting with it (a prefix match on its encoding).
            alts.append(f"({term} | ({phrase}))" if len(bigrams) > 1 else f"({term} | {phrase}:*)")
        else:
            alts.append(term)
    return " | ".join(dict.fromkeys(alts)) or None
