"""Keyword search over FTS5: the MATCH query (or the same ranking from rare terms' counts), common-term pruning, term weights (IDF)."""

from __future__ import annotations

import functools
import json
import logging
import math
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from operator import neg
from typing import TYPE_CHECKING

import apsw

from .meta import Generation
from .parts import StoreParts

if TYPE_CHECKING:
    from .analysis import QueryAnalysis

# The query side (`analysis`, `keyword`) is imported by the methods that search: opening the store for
# `status` or `get` does not need it.

__all__ = ["PRUNE_MIN_CHUNKS", "KeywordSearch", "Postings"]

log = logging.getLogger("symi_memory.index")

# Below this many chunks, ranking every match is cheap and BM25's IDF is too coarse to prune by.
PRUNE_MIN_CHUNKS = 50
# Document frequencies remembered per reading thread for the current generation (then forgotten).
DF_CACHE_MAX = 50_000
# A keyword query is ranked from its terms' counts in every chunk holding them (KeywordSearch._rank_from_postings)
# when they occur at most this many times in all.
RANK_FROM_POSTINGS_MAX = 4_000
# Chunk sizes (tokens) remembered per reading thread for the current generation.
DOC_SIZES_MAX = 20_000
# FTS5's bm25() constants (fts5_aux.c).
FTS5_BM25_K1 = 1.2
FTS5_BM25_B = 0.75

# A query word's counts are read (PROBE_MAX + 1 instances at most) before its document frequency when neither is
# known yet: a rare word's counts tell its frequency too (one read of FTS5's index, not two), which the ranking
# and the candidates' counts need anyway; a commoner word's frequency is then read as before.
PROBE_MAX = 500

#: ``postings(terms, generation, cap)``: ``{term: {rowid: count in the text column}}`` of every chunk holding each of
#: these index terms at that generation (read from FTS5's index, or kept), or None when they cannot be told; with a
#: ``cap``, the terms occurring more often than that are left out.
Postings = Callable[[Sequence[str], Generation, "int | None"], "dict[str, dict[int, int]] | None"]


def _varints(blob: bytes) -> list[int] | None:
    """The SQLite varints (big-endian, 7 bits a byte, the 9th byte whole) that make up ``blob``; None if cut off."""
    out: list[int] = []
    i, n = 0, len(blob)
    while i < n:
        c = blob[i]
        if c < 0x80:  # one byte: nearly every size
            out.append(c)
            i += 1
            continue
        v = 0
        for _ in range(8):
            if i >= n:
                return None
            c = blob[i]
            i += 1
            v = (v << 7) | (c & 0x7F)
            if c < 0x80:
                break
        else:
            if i >= n:
                return None
            v = (v << 8) | blob[i]
            i += 1
        out.append(v)
    return out


@functools.lru_cache(maxsize=4096)
def _index_terms(word: str) -> tuple[str, ...]:
    """The index terms FTS5 makes of one query word (:func:`~.analysis.stem_tokens`), remembered: a search asks
    for each of its words twice (pruning, then leaving out absent words), and the same words come back."""
    from . import analysis as _analysis

    return tuple(_analysis.stem_tokens(word))


class KeywordSearch(StoreParts):
    """FTS5 candidates and the IDF of query terms."""

    def keyword_search(self, query: str, limit: int, *, analysis: QueryAnalysis | None = None,
                       generation: Generation | None = None, postings: Postings | None = None) -> list[tuple[int, float]]:
        """``(rowid, bm25 rank)`` best first (more negative is better), all sources.

        Only the query's content words are matched (stop words and question
        words left out); FTS5 stems them as it stemmed the chunks. The rank
        only picks keyword candidates: their score comes from
        :func:`analysis.keyword_evidence`. ``analysis``: the query already
        tokenized (:class:`~.analysis.QueryAnalysis` of ``query``); ``generation``:
        the index generation key the caller read for this search (else it is read); ``postings``: where the counts
        of rare terms in every chunk holding them come from (:data:`Postings`), when the caller keeps them: a
        query of such terms is then ranked from them (:meth:`_rank_from_postings`), not by FTS5's MATCH.
        """
        if self.fts_error is not None:
            return []
        from . import analysis as _analysis
        from .keyword import match_tokens, query_tokens

        words = list(analysis.words) if analysis is not None else _analysis.content_words(query_tokens(query))
        size = self._index_size(generation)
        # Only a keyword table of this tokenizer matches a query word by the index term it makes (one migrated from
        # schema 3 holds words unstemmed until its rebuild, and its MATCH tokenizes the query with its own tokenizer).
        if postings is not None and generation is not None and not self._fts_current(generation):
            postings = None
        if postings is not None and generation is not None:
            self._probe_term_stats(words, generation, postings)
        tokens = self._weighty_tokens(words, size=size)
        # Their document frequencies were read just now. Only a keyword table of this tokenizer holds the index
        # terms the check looks up: one migrated from schema 3 holds words unstemmed until its rebuild.
        if len(words) >= 2 and size[1] >= PRUNE_MIN_CHUNKS and self._fts_current(size[0]):
            tokens = self._found_somewhere(tokens, size[0])
        match = match_tokens(tokens)
        if match is None:
            return []
        if postings is not None and generation is not None:
            ranked = self._rank_from_postings(tokens, limit, generation, postings)
            if ranked is not None:
                return ranked
        try:
            # bm25() ordered by SQLite, not FTS5's own `ORDER BY rank` sorter: the same ranks (rank is bm25
            # here) at about half the cost, and equal ranks in rowid order, as that sorter leaves them.
            rows = self._read("SELECT rowid, bm25(chunks_fts) AS r FROM chunks_fts WHERE chunks_fts MATCH ? "
                              "ORDER BY r, rowid LIMIT ?", (match, limit)).fetchall()
        except apsw.SQLError as exc:
            log.warning("keyword query failed (%s); query was %r", exc, query)
            return []
        return [(rowid, float(rank)) for rowid, rank in rows]

    def _rank_from_postings(self, tokens: list[str], limit: int, generation: Generation, postings: Postings,
                            ) -> list[tuple[int, float]] | None:
        """What the MATCH query of ``tokens`` (:func:`~.keyword.match_tokens`) ranked by ``bm25()`` answers, computed
        from the counts of their index terms in every chunk holding them, or None when it cannot be (a token of
        a CJK run or of more than one index term, terms occurring more than :data:`RANK_FROM_POSTINGS_MAX` times
        in all, FTS5's counts unreadable, or a write landed meanwhile).

        The caller reads those counts anyway, to score the candidates: FTS5's MATCH looked each term up again in
        every segment of its index, and its ``bm25()`` counted each term's chunks once more and read each matching
        chunk's size. Here each matching chunk's size is read (kept for the generation), and BM25 is computed as
        FTS5's ``bm25()`` computes it, operation for operation in IEEE doubles: for each phrase (one per token, in
        order) ``idf = log((N - n + 0.5) / (n + 0.5))`` (1e-6 when not positive) with N the index's rows and n the
        rows whose ``text`` column holds the term, then ``score += idf * ((f * (k1 + 1)) / (f + k1 * (1 - b + b *
        D / avgdl)))`` with f the term's count in the row's ``text`` column (each token is one column-filtered
        term: its instances there), D the row's tokens in all columns and avgdl the index's tokens over its rows;
        the rank is ``-1.0 * score``, ordered by rank then rowid. A term without a CJK character never occurs in
        the ``cjk`` column (it holds CJK bigrams only), so its instances and rows are those of the ``text`` column.
        """
        from .keyword import CJK_RUN_RE

        terms: list[str] = []
        for t in tokens:
            got = _index_terms(t)
            if len(got) != 1 or CJK_RUN_RE.search(t) is not None:
                return None
            terms.append(got[0])
        distinct = list(dict.fromkeys(terms))
        try:
            stats = self._term_stats(distinct, generation)
        except apsw.SQLError:
            return None
        if sum(stats[t][1] for t in distinct) > RANK_FROM_POSTINGS_MAX:
            return None
        got_postings = postings(distinct, generation, None)
        if got_postings is None:
            return None
        lists = [got_postings[t] for t in terms]
        docs: set[int] = set()
        for p in lists:
            docs.update(p)
        if not docs:
            return []
        norms = self._length_norms(docs, generation)
        if norms is None:
            return None
        n_row = norms[0]
        k1_1 = FTS5_BM25_K1 + 1.0
        scores = dict.fromkeys(docs, 0.0)
        # Phrase by phrase: each row's score takes its phrases' parts in the phrase order bm25() adds them in.
        for p in lists:
            n_hit = len(p)
            idf = math.log((n_row - n_hit + 0.5) / (n_hit + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            kept = norms[1]
            for doc, f in p.items():
                scores[doc] += idf * ((f * k1_1) / (f + kept[doc]))
        ranks = sorted(zip(map(neg, scores.values()), scores, strict=True))
        return [(doc, rank) for rank, doc in ranks[:limit]]

    def _probe_term_stats(self, words: Sequence[str], generation: Generation, postings: Postings) -> None:
        """Learn the document frequency of these query words' index terms (one term without a CJK run each) not
        known yet from their counts in every chunk (:data:`PROBE_MAX` at most): for such a term the chunks and
        instances ``chunks_vocab`` counts are the ones of its instances in the ``text`` column, which
        :meth:`term_docs` reads (it holds no CJK bigram); the rest are read from ``chunks_vocab`` when asked."""
        cached = getattr(self._local, "df", None)
        if cached is None or cached[0] != generation or len(cached[1]) > DF_CACHE_MAX:
            cached = (generation, {})
            self._local.df = cached
        known: dict[str, tuple[int, int]] = cached[1]
        from .keyword import CJK_RUN_RE

        wanted: list[str] = []
        for w in words:
            got = _index_terms(w)
            if len(got) == 1 and got[0] not in known and CJK_RUN_RE.search(w) is None:
                wanted.append(got[0])
        if not wanted:
            return
        found = postings(list(dict.fromkeys(wanted)), generation, PROBE_MAX)
        if found is None:
            return
        for t, docs in found.items():  # of this generation (the caller checked)
            known[t] = (len(docs), sum(docs.values()))

    def _length_norms(self, docs: Collection[int], generation: Generation) -> tuple[int, dict[int, float]] | None:
        """The index's rows N and ``{rowid: k1 * (1 - b + b * D / avgdl)}`` (``bm25()``'s length normalisation) of
        these chunks (and others kept), kept for the generation per thread (up to :data:`DOC_SIZES_MAX` chunks);
        None when FTS5's sizes cannot be read.

        As ``bm25()`` reads them: N and the tokens of each column in all rows from FTS5's averages record
        (varints), avgdl their sum over N, and D a row's tokens in all columns (its ``%_docsize`` row, a varint
        per column)."""
        cached = getattr(self._local, "length_norms", None)
        if cached is None or cached[0] != generation:
            try:
                row = self._read("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()
            except apsw.SQLError:
                return None
            values = _varints(row[0]) if row is not None and isinstance(row[0], bytes) else None
            if values is None or len(values) != 3 or values[0] <= 0:
                return None
            if self.generation_key() != generation:
                return None  # a write landed after the caller read the generation: this may be a later one's
            kept: dict[int, float] = {}
            cached = (generation, values[0], float(values[1] + values[2]) / float(values[0]), kept)
            self._local.length_norms = cached
        n_row: int = cached[1]
        avgdl: float = cached[2]
        known: dict[int, float] = cached[3]
        missing = [d for d in docs if d not in known]
        if missing:
            from .chunks import _LISTED_TABLE, bound_list

            try:
                rows = self._read(f"SELECT d.id, d.sz FROM {_LISTED_TABLE} k CROSS JOIN chunks_fts_docsize d "
                                  "ON d.id = k.value", (bound_list(sorted(missing)),)).fetchall()
            except apsw.SQLError:
                return None
            k1, b = FTS5_BM25_K1, FTS5_BM25_B
            fresh: dict[int, float] = {}
            for doc, blob in rows:
                sizes = _varints(blob) if isinstance(blob, bytes) else None
                if sizes is None or len(sizes) != 2:
                    return None
                fresh[doc] = k1 * (1 - b + b * float(sizes[0] + sizes[1]) / avgdl)
            if len(fresh) != len(missing) or self.generation_key() != generation:
                return None  # a chunk without sizes, or a write landed meanwhile: these may be a later generation's
            if len(known) + len(fresh) > DOC_SIZES_MAX:
                # Kept again from these chunks' (the ones kept already taken out first: emptied, they went missing).
                asked = {d: known[d] for d in docs if d in known}
                known.clear()
                known.update(asked)
            known.update(fresh)
        return n_row, known

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
        if missing:
            marks = ",".join("?" * len(missing))
            found = {term: (int(doc), int(cnt)) for term, doc, cnt in self._read(
                f"SELECT term, doc, cnt FROM chunks_vocab WHERE term IN ({marks})", missing)}
            for t in missing:
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

    def term_docs(self, term: str, rowids: Collection[int] | None, *, cap: int | None = None) -> dict[int, int] | None:
        """``{rowid: count}``: how often this index term occurs in the ``text`` column of each of these chunks
        (:meth:`term_counts` of one term; every chunk holding it when ``rowids`` is None), chunks without it
        left out; None when FTS5 cannot answer.

        FTS5 visits every occurrence of the term in the index either way. With ``rowids`` only those of these
        chunks come back (the rest are skipped inside SQLite), which costs less once the term occurs more
        than a few hundred times (at 10,000 occurrences, 3.2 ms against 8.7 for reading them all); the
        statement's text does not depend on how many chunks are asked about (a JSON array), so it stays
        prepared. The rows are counted by ``Counter`` in C. With a ``cap`` (and no ``rowids``), at most ``cap + 1``
        instances are read: counts adding up to more than ``cap`` are not the term's whole counts.
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
            if rowids is None and cap is not None:  # stops after cap + 1 instances: more than cap
                got = conn.execute(f"SELECT doc FROM temp.chunks_instances WHERE term = ?{column} LIMIT ?",
                                   (term, cap + 1)).get
            elif rowids is None:
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
