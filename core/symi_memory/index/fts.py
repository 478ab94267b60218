"""Keyword search over FTS5: the MATCH query, common-term pruning, and term weights (IDF)."""

from __future__ import annotations

import functools
import json
import logging
from collections import Counter
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import apsw

from .meta import Generation
from .parts import StoreParts

if TYPE_CHECKING:
    from .analysis import QueryAnalysis

# The query side (`analysis`, `keyword`) is imported by the methods that search: opening the store for
# `status` or `get` does not need it.

__all__ = ["PRUNE_MIN_CHUNKS", "KeywordSearch"]

log = logging.getLogger("symi_memory.index")

# Below this many chunks, ranking every match is cheap and BM25's IDF is too coarse to prune by.
PRUNE_MIN_CHUNKS = 50
# Document frequencies remembered per reading thread for the current generation (then forgotten).
DF_CACHE_MAX = 50_000
# Index terms looked up per statement (SQLite binds at most 32,766 variables).
TERM_BATCH = 5_000


@functools.lru_cache(maxsize=4096)
def _index_terms(word: str) -> tuple[str, ...]:
    """The index terms FTS5 makes of one query word (:func:`~.analysis.stem_tokens`), remembered: a search asks
    for each of its words twice (pruning, then leaving out absent words), and the same words come back."""
    from . import analysis as _analysis

    return tuple(_analysis.stem_tokens(word))


class KeywordSearch(StoreParts):
    """FTS5 candidates and the IDF of query terms."""

    def keyword_search(self, query: str, limit: int, *, analysis: QueryAnalysis | None = None,
                       generation: Generation | None = None) -> list[tuple[int, float]]:
        """``(rowid, bm25 rank)`` best first (more negative is better), all sources.

        Only the query's content words are matched (stop words and question
        words left out); FTS5 stems them as it stemmed the chunks. The rank
        only picks keyword candidates: their score comes from
        :func:`analysis.keyword_evidence`. ``analysis``: the query already
        tokenized (:class:`~.analysis.QueryAnalysis` of ``query``); ``generation``:
        the index generation key the caller read for this search (else it is read).
        """
        if self.fts_error is not None:
            return []
        from . import analysis as _analysis
        from .keyword import match_tokens, query_tokens

        words = list(analysis.words) if analysis is not None else _analysis.content_words(query_tokens(query))
        size = self._index_size(generation)
        tokens = self._weighty_tokens(words, size=size)
        # Their document frequencies were read just now. Only a keyword table of this tokenizer holds the index
        # terms the check looks up: one migrated from schema 3 holds words unstemmed until its rebuild.
        if len(words) >= 2 and size[1] >= PRUNE_MIN_CHUNKS and self._fts_current(size[0]):
            tokens = self._found_somewhere(tokens, size[0])
        match = match_tokens(tokens)
        if match is None:
            return []
        try:
            # bm25() ordered by SQLite, not FTS5's own `ORDER BY rank` sorter: the same ranks (rank is bm25
            # here) at about half the cost, and equal ranks in rowid order, as that sorter leaves them.
            rows = self._read("SELECT rowid, bm25(chunks_fts) AS r FROM chunks_fts WHERE chunks_fts MATCH ? "
                              "ORDER BY r, rowid LIMIT ?", (match, limit)).fetchall()
        except apsw.SQLError as exc:
            log.warning("keyword query failed (%s); query was %r", exc, query)
            return []
        return [(rowid, float(rank)) for rowid, rank in rows]

    def term_weights(self, terms: Sequence[str], *, generation: Generation | None = None) -> dict[str, float]:
        """IDF of each index term in this index (absent terms weigh the most); ``generation`` as in keyword_search."""
        if not terms:
            return {}
        generation, n = self._index_size(generation)
        df: dict[str, int] = {}
        if self.fts_error is None:
            try:
                df = self._doc_freqs(terms, generation)
            except apsw.SQLError:
                df = {}
        from . import analysis as _analysis

        return {t: _analysis.idf(int(df.get(t, 0)), n) for t in terms}

    def _weighty_tokens(self, tokens: list[str], *, size: tuple[Generation, int] | None = None) -> list[str]:
        """Leave out tokens found in more than half of the chunks.

        FTS5's BM25 gives such a term an IDF of 1e-6, so it cannot change the
        ranking, but matching it makes FTS5 rank nearly every chunk: leaving
        it out keeps keyword search fast on a large index. If every token is
        that common, the rarest one stays. ``size``: the index's
        ``(generation key, chunk count)`` when the caller has read it already.
        """
        generation, n = size if size is not None else self._index_size()
        if len(tokens) < 2 or n < PRUNE_MIN_CHUNKS:
            return tokens
        try:
            # analysis.stem of each token: its first index term, or the token folded when it has none.
            stems = {t: got[0] if (got := _index_terms(t)) else t.lower() for t in tokens}
            df = self._doc_freqs(sorted(set(stems.values())), generation)
        except apsw.SQLError:
            return tokens
        half = n / 2
        kept = [t for t in tokens if df.get(stems[t], 0) <= half]
        present = [t for t in tokens if df.get(stems[t], 0) > 0]
        if present and not any(df.get(stems[t], 0) > 0 for t in kept):
            # Never leave only absent words: keep the rarest word that occurs.
            kept.append(min(present, key=lambda t: df[stems[t]]))
        return kept

    def _found_somewhere(self, tokens: list[str], generation: Generation) -> list[str]:
        """Leave out the tokens that cannot match: one index term (no CJK run: no bigram phrase) that no chunk holds.

        Such a token's phrase matches no chunk and adds exactly 0.0 to every chunk's bm25 (its frequency is 0;
        each phrase's IDF is its own), so the same chunks come back with the same ranks, in the same order; but
        FTS5 looked the term up in every segment of its index twice (the match, then bm25's document count).
        Query words no chunk holds are common (identifiers, typos, the words local synonyms stand in for).
        """
        from .keyword import CJK_RUN_RE

        single: dict[str, str] = {}
        for t in tokens:
            if CJK_RUN_RE.search(t) is None and len(got := _index_terms(t)) == 1:
                single[t] = got[0]
        if not single:
            return tokens
        try:
            df = self._doc_freqs(sorted(set(single.values())), generation)
        except apsw.SQLError:
            return tokens
        return [t for t in tokens if t not in single or df[single[t]] > 0]

    def _doc_freqs(self, terms: Sequence[str], generation: Generation) -> dict[str, int]:
        """How many chunks hold each index term, remembered for this generation of the index.

        One search asks twice (pruning the MATCH, then weighing the terms), and the same words
        come back query after query: only terms not seen since the last write are read.
        """
        known = self._term_stats(terms, generation)
        return {t: known[t][0] for t in terms}

    def _term_stats(self, terms: Sequence[str], generation: Generation) -> dict[str, tuple[int, int]]:
        """``(chunks holding it, occurrences)`` of each index term, remembered for this generation of the index."""
        cached = getattr(self._local, "df", None)
        if cached is None or cached[0] != generation or len(cached[1]) > DF_CACHE_MAX:
            cached = (generation, {})
            self._local.df = cached
        known: dict[str, tuple[int, int]] = cached[1]
        missing = sorted({t for t in terms if t not in known})
        # In batches: SQLite binds at most 32,766 variables, and a query may hold more words (a pasted document).
        for start in range(0, len(missing), TERM_BATCH):
            batch = missing[start:start + TERM_BATCH]
            marks = ",".join("?" * len(batch))
            found = {term: (int(doc), int(cnt)) for term, doc, cnt in self._read(
                f"SELECT term, doc, cnt FROM chunks_vocab WHERE term IN ({marks})", batch)}
            for t in batch:
                known[t] = found.get(t, (0, 0))
        return known

    def term_occurrences(self, terms: Sequence[str], generation: Generation) -> dict[str, int] | None:
        """How often each of these index terms occurs in the whole index (what :meth:`term_counts` reads),
        or None when FTS5 cannot tell (unavailable, or the keyword table predates this tokenizer)."""
        if self.fts_error is not None or not self._fts_current(generation):
            return None
        wanted = [t for t in terms if t]
        try:
            stats = self._term_stats(wanted, generation)
        except apsw.SQLError:
            return None
        return {t: stats[t][1] for t in wanted}

    def term_counts(self, terms: Sequence[str], rowids: Collection[int]) -> dict[int, dict[str, int]] | None:
        """``{rowid: {term: count}}``: how often each index term occurs in the ``text`` column of these chunks,
        read from FTS5's own index (``fts5vocab`` instance rows of each term), chunks holding none left out.

        The index tokenized each chunk's text with the tokenizer :func:`~.analysis.term_string` uses, so for
        a chunk without CJK runs (whose bigrams term_string adds) these are the counts its terms give (the
        caller checks that the generation did not change meanwhile). Costs about one microsecond per occurrence of the terms
        in the whole index (:meth:`term_occurrences`). None when FTS5 cannot answer.
        """
        out: dict[int, dict[str, int]] = {}
        for term in dict.fromkeys(t for t in terms if t):
            docs = self.term_docs(term, rowids)
            if docs is None:
                return None
            for doc, count in docs.items():
                got = out.get(doc)
                if got is None:
                    out[doc] = {term: count}
                else:
                    got[term] = count
        return out

    def term_docs(self, term: str, rowids: Collection[int] | None) -> dict[int, int] | None:
        """``{rowid: count}``: how often this index term occurs in the ``text`` column of each of these chunks
        (:meth:`term_counts` of one term; every chunk holding it when ``rowids`` is None), chunks without it
        left out; None when FTS5 cannot answer.

        FTS5 visits every occurrence of the term in the index either way. With ``rowids`` only those of these
        chunks come back (the rest are skipped inside SQLite), which costs less once the term occurs more
        than a few hundred times (at 10,000 occurrences, 3.2 ms against 8.7 for reading them all); the
        statement's text does not depend on how many chunks are asked about (a JSON array), so it stays
        prepared. The rows are counted by ``Counter`` in C.
        """
        conn = self.reader()
        if getattr(self._local, "instances", None) is not conn:  # made once in each reading connection
            try:
                conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_instances "
                             "USING fts5vocab(main, chunks_fts, 'instance')")
            except apsw.Error as exc:
                log.info("fts5vocab instance table unavailable (%s); term counts come from the chunk text", exc)
                return None
            self._local.instances = conn
        if rowids is not None and not rowids:
            return {}
        from .keyword import CJK_RUN_RE

        # The cjk column holds CJK bigrams only (terms of CJK characters alone): a term without one occurs in
        # the text column alone, and comparing each instance's column (a string, in SQLite) cost a sixth of
        # the read.
        column = " AND col = 'text'" if CJK_RUN_RE.search(term) is not None else ""
        try:
            # apsw's ``get``: the values of a one-column result (one value alone for one row, None for none).
            if rowids is None:
                got = conn.execute(f"SELECT doc FROM temp.chunks_instances WHERE term = ?{column}", (term,)).get
            else:
                got = conn.execute(f"SELECT doc FROM temp.chunks_instances WHERE term = ?{column} "
                                   "AND doc IN (SELECT value FROM json_each(?))",
                                   (term, json.dumps([int(r) for r in rowids]))).get
        except apsw.Error as exc:
            log.info("reading term counts from FTS5 failed (%s); they come from the chunk text", exc)
            return None
        return dict(Counter(got if isinstance(got, list) else () if got is None else (got,)))

    def _fts_current(self, generation: Generation) -> bool:
        """Whether ``chunks_fts`` uses this version's tokenizer (checked once per generation and thread)."""
        cached = getattr(self._local, "fts_current", None)
        if cached is None or cached[0] != generation:
            from .db import FTS_TOKENIZER

            row = self._read("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()
            cached = (generation, row is not None and FTS_TOKENIZER in (row[0] or ""))
            self._local.fts_current = cached
        return bool(cached[1])

    def _index_size(self, generation: Generation | None = None) -> tuple[Generation, int]:
        """``(generation key, chunk count)``: the key read once (unless given), the count cached per key."""
        gen = self.generation_key() if generation is None else generation
        cached = getattr(self._local, "count", None)
        if cached is None or cached[0] != gen:
            cached = (gen, int(self._read("SELECT COUNT(*) FROM chunks").fetchone()[0]))
            self._local.count = cached
        return cached

    def _chunk_count(self) -> int:
        return self._index_size()[1]

    def chunks_at(self, generation: Generation) -> int:
        """How many chunks the index holds at this generation (counted once per generation and thread)."""
        return self._index_size(generation)[1]
