"""Keyword search over FTS5: the MATCH query, common-term pruning, and term weights (IDF)."""

from __future__ import annotations

import logging

import apsw

from . import analysis
from .keyword import match_tokens, query_tokens
from .parts import StoreParts

__all__ = ["PRUNE_MIN_CHUNKS", "KeywordSearch"]

log = logging.getLogger("symi_memory.index")

# Below this many chunks, ranking every match is cheap and BM25's IDF is too coarse to prune by.
PRUNE_MIN_CHUNKS = 50


class KeywordSearch(StoreParts):
    """FTS5 candidates and the IDF of query terms."""

    def keyword_search(self, query: str, limit: int) -> list[tuple[int, float]]:
        """``(rowid, bm25 rank)`` best first (more negative is better), all sources.

        Only the query's content words are matched (stop words and question
        words left out); FTS5 stems them as it stemmed the chunks. The rank
        only picks keyword candidates: their score comes from
        :func:`analysis.keyword_evidence`.
        """
        if self.fts_error is not None:
            return []
        words = analysis.content_words(query_tokens(query))
        match = match_tokens(self._weighty_tokens(words))
        if match is None:
            return []
        try:
            rows = self._read("SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?",
                              (match, limit)).fetchall()
        except apsw.SQLError as exc:
            log.warning("keyword query failed (%s); query was %r", exc, query)
            return []
        return [(rowid, float(rank)) for rowid, rank in rows]

    def term_weights(self, terms: list[str]) -> dict[str, float]:
        """IDF of each index term in this index (absent terms weigh the most)."""
        if not terms:
            return {}
        n = self._chunk_count()
        df: dict[str, int] = {}
        if self.fts_error is None:
            try:
                marks = ",".join("?" * len(terms))
                df = dict(self._read(f"SELECT term, doc FROM chunks_vocab WHERE term IN ({marks})", terms).fetchall())
            except apsw.SQLError:
                df = {}
        return {t: analysis.idf(int(df.get(t, 0)), n) for t in terms}

    def _weighty_tokens(self, tokens: list[str]) -> list[str]:
        """Leave out tokens found in more than half of the chunks.

        FTS5's BM25 gives such a term an IDF of 1e-6, so it cannot change the
        ranking, but matching it makes FTS5 rank nearly every chunk: leaving
        it out keeps keyword search fast on a large index. If every token is
        that common, the rarest one stays.
        """
        if len(tokens) < 2 or self._chunk_count() < PRUNE_MIN_CHUNKS:
            return tokens
        try:
            stems = {t: analysis.stem(t) for t in tokens}
            terms = sorted(set(stems.values()))
            marks = ",".join("?" * len(terms))
            df = dict(self._read(f"SELECT term, doc FROM chunks_vocab WHERE term IN ({marks})", terms).fetchall())
        except apsw.SQLError:
            return tokens
        half = self._chunk_count() / 2
        kept = [t for t in tokens if df.get(stems[t], 0) <= half]
        present = [t for t in tokens if df.get(stems[t], 0) > 0]
        if present and not any(df.get(stems[t], 0) > 0 for t in kept):
            # Never leave only absent words: keep the rarest word that occurs.
            kept.append(min(present, key=lambda t: df[stems[t]]))
        return kept

    def _chunk_count(self) -> int:
        gen = self.generation()
        cached = getattr(self._local, "count", None)
        if cached is None or cached[0] != gen:
            cached = (gen, int(self._read("SELECT COUNT(*) FROM chunks").fetchone()[0]))
            self._local.count = cached
        return cached[1]
