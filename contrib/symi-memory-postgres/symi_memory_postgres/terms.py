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
    return " | ".join(dict.fromkeys(token_expressions(text).values())) or None


def token_expressions(text: str) -> dict[str, str]:
    """Each query token (folded) and the ``to_tsquery('simple', ...)`` expression matching it."""
    alts: dict[str, str] = {}
    for token in query_tokens(text):
        term = _term(fold(token))
        bigrams = cjk_bigrams(token).split()
        if bigrams:
            phrase = " <-> ".join(_term(b) for b in bigrams)
            # One CJK character: any bigram starting with it (a prefix match on its encoding).
            alts[fold(token)] = f"({term} | ({phrase}))" if len(bigrams) > 1 else f"({term} | {phrase}:*)"
        else:
            alts[fold(token)] = term
    return alts


K1, B = 1.2, 0.75


def bm25(query_terms: list[str], doc_freq: list[int], total: int, texts: dict[int, str]) -> dict[int, float]:
    """Okapi BM25 of each text (k1 1.2, b 0.75, as FTS5) for the folded query tokens.

    ``doc_freq`` holds how many of the agent's ``total`` chunks match each
    token (from the server); term frequencies and lengths come from the texts,
    tokenized as they were indexed. CJK tokens count as substring occurrences.
    Returns the FTS5-style rank magnitude (higher is better).
    """
    import math

    if not texts:
        return {}
    idf = [max(1e-6, math.log(1 + (total - n + 0.5) / (n + 0.5))) for n in doc_freq]
    tokens = {k: query_tokens_all(fold(t)) for k, t in texts.items()}
    avgdl = max(1.0, sum(len(v) for v in tokens.values()) / len(tokens))
    out: dict[int, float] = {}
    for k, words in tokens.items():
        counts: dict[str, int] = {}
        for w in words:
            counts[w] = counts.get(w, 0) + 1
        folded = fold(texts[k]) if any(cjk_bigrams(t) for t in query_terms) else ""
        norm = K1 * (1 - B + B * len(words) / avgdl)
        score = 0.0
        for term, weight in zip(query_terms, idf, strict=True):
            tf = counts.get(term, 0) or (folded.count(term) if cjk_bigrams(term) else 0)
            if tf:
                score += weight * tf * (K1 + 1) / (tf + norm)
        out[k] = score
    return out
