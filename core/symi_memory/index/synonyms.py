"""Local synonyms: a query word the index has never seen is matched through index words of like meaning.

A reworded question often names what memory holds with another word ("trip to
Portugal" when the note says Lisbon, "favourite beverage" against "prefers
tea"). Such a word is in no chunk, so the keyword side has nothing to say about
it. Here it is embedded (with the index's own provider) and compared with the
vectors of the index's vocabulary, which the indexer keeps (one vector per
distinct word of the indexed text, added as new words are indexed); the index
words whose cosine with it is at least :data:`THETA` (up to :data:`TOP` of
them) stand in for it on the keyword side, each at :data:`GAMMA` x its cosine
of the original word's weight (:func:`~.analysis.keyword_evidence`).

Only words the index does not hold are expanded: a word the index holds is
evidence already, and its neighbours by meaning are as often siblings as
synonyms ("May" and June, "yearly" and monthly), which cost rank-1 answers when
every word was expanded (``bench/rank_levers2.py --narrow``,
docs/search-scores.md).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from .. import forking

if TYPE_CHECKING:
    from .analysis import QueryAnalysis
    from .meta import Generation

__all__ = ["GAMMA", "MEASURED", "THETA", "TOP", "QuerySynonyms", "Vocabulary", "min_cosine", "vocabulary_words"]

log = logging.getLogger("symi_memory.index")

#: Least cosine (all-MiniLM-L6-v2, word against word) for an index word to stand in for a query word.
THETA = 0.45
#: Least cosines measured per ``(provider id, model)`` (``bench/rank_levers2.py --narrow``). A raw
#: cosine means something else under another model (multilingual-e5-small puts nearly every pair of
#: words above 0.7): a model not listed here gets no word vectors and no expansion unless the
#: operator sets ``query.hybrid.synonyms.minCosine``.
MEASURED: Mapping[tuple[str, str], float] = {("local", "all-MiniLM-L6-v2"): THETA}
#: An index word standing in for a query word counts this times its cosine (below the word itself).
GAMMA = 0.8
#: At most this many index words (distinct index terms) per query word.
TOP = 5

TABLE = "vocab_vectors"
SCHEMA = f"CREATE TABLE IF NOT EXISTS {TABLE} (word TEXT PRIMARY KEY, term TEXT NOT NULL, embedding BLOB NOT NULL)"
#: meta key: the provider, model and fingerprint the stored word vectors were made with.
EMBEDDER_META = "vocab_embedder"
#: meta key, set while words of the index may lack their vectors (an update that failed or was cancelled):
#: the next sync then looks at every chunk's words, not only its own new ones.
INCOMPLETE_META = "vocab_incomplete"
#: meta key: the ``maxWords`` at which an update left words out for lack of room. A larger cap makes the
#: vocabulary not :meth:`Vocabulary.current`, so the next sync offers it the words of every chunk again.
CAPPED_META = "vocab_capped"
EMBED_BATCH = 256
#: Query words whose vectors a process keeps (1.5 KB each at 384 dimensions).
WORD_CACHE_MAX = 4096

# Letters only: one index term each (the index splits "e-mail" into "e" and "mail", "don't" into "don" and
# "t"), and no digit.
LETTERS = re.compile(r"[^\W\d_]+", re.U)
# A token as the index reads it: a run of letters and digits.
_TOKEN = re.compile(r"[^\W_]+", re.U)


def _plain_word(word: str) -> bool:
    """A word that may stand in or be stood in for: two or more letters and nothing else, no CJK run (the
    index reads those as bigrams). Not one with a digit (a ticket "PROJ4822" or a hash "a3f9c22" that
    memory does not hold is not "like" PROJ4821 or a3f9c21, which embeddings rate close), nor one the index
    splits ("e-mail" would stand in as its term "e": every vitamin E)."""
    from .keyword import CJK_RUN_RE

    return len(word) > 1 and LETTERS.fullmatch(word) is not None and not CJK_RUN_RE.search(word)


def vocabulary_words(texts: Iterable[str]) -> Counter[str]:
    """The distinct words of ``texts`` worth a vector (folded, letters only, two or more, not stop words),
    each with how many of the texts hold it."""
    from .analysis import STOP_WORDS

    out: Counter[str] = Counter()
    for text in texts:
        out.update({w.lower() for w in _TOKEN.findall(text)})
    return Counter({w: n for w, n in out.items() if w not in STOP_WORDS and _plain_word(w)})


def min_cosine(provider: Any, settings: Mapping[str, Any]) -> tuple[float | None, str]:
    """The least cosine for a stand-in under this provider and ``query.hybrid.synonyms`` settings, and where it
    comes from (``"config"``, ``"measured"``), or ``(None, why not)``: then no word vectors, no expansion."""
    if not settings.get("enabled", True):
        return None, "disabled (query.hybrid.synonyms.enabled = false)"
    if provider is None:
        return None, "no embedding provider"
    configured = settings.get("minCosine")
    if configured is not None:
        return float(configured), "config"
    known = MEASURED.get((str(provider.id), str(provider.model)))
    if known is None:
        return None, (f"no measured threshold for {provider.id}/{provider.model} "
                      "(set query.hybrid.synonyms.minCosine to enable)")
    return known, "measured"


def _embedder_key(provider: Any) -> str:
    return f"{provider.id}\x1f{provider.model}\x1f{getattr(provider, 'fingerprint', '')}"


@attrs.define
class Vocabulary:
    """The index's word vectors: written by the indexer, read (and kept in memory) by searches."""

    store: Any
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    # (row count, last rowid, embedder, index id) of the loaded matrix, the index terms and words, the matrix.
    _loaded: tuple[tuple[int, int, str, str | None], list[str], list[str], Any] | None = None
    # Query words' unit vectors by word, for the provider named by ``_words_key``.
    _words: dict[str, Any] = attrs.field(factory=dict)
    _words_key: str = ""

    def __attrs_post_init__(self) -> None:
        forking.track(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()  # a parent thread loading the matrix may have held it

    # ------------------------------------------------------------ indexer side

    def current(self, provider: Any, max_words: int | None = None) -> bool:
        """Whether the vocabulary holds vectors made by this provider, with no word missing that ``max_words``
        has room for (else it is refilled from the whole index)."""
        import apsw

        try:
            row = self.store._read("SELECT value FROM meta WHERE key=?", (EMBEDDER_META,)).fetchone()
            capped = self.store._read("SELECT value FROM meta WHERE key=?", (CAPPED_META,)).fetchone()
            return row is not None and row[0] == _embedder_key(provider) and \
                self.store._read(f"SELECT 1 FROM {TABLE} LIMIT 1").fetchone() is not None and \
                self.store._read("SELECT 1 FROM meta WHERE key=?", (INCOMPLETE_META,)).fetchone() is None and \
                not (max_words is not None and capped is not None and int(capped[0]) < max_words)
        except apsw.SQLError:
            return False

    def chunk_texts(self) -> Iterator[str]:
        """The text of every chunk of the index (to fill an empty vocabulary)."""
        for row in self.store._read("SELECT text FROM chunks"):
            yield row[0]

    def words(self, provider: Any) -> int:
        """How many word vectors made by this provider the vocabulary holds (0: none, or another model's)."""
        import apsw

        try:
            row = self.store._read("SELECT value FROM meta WHERE key=?", (EMBEDDER_META,)).fetchone()
            if row is None or row[0] != _embedder_key(provider):
                return 0
            return int(self.store._read(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0])
        except apsw.SQLError:
            return 0

    def update(self, provider: Any, words: Mapping[str, int], *, max_words: int,
               cancel: threading.Event | None = None) -> int:
        """Embed and store the ``words`` the vocabulary does not hold yet; returns how many were added.

        Called by the indexer with the words of the chunks it just wrote, each with how many chunks
        hold it. Vectors made by another provider or model are dropped first. At most ``max_words``
        are kept: once full, new words are left out (the most widely held go in first, so an index
        larger than the cap keeps its common words, not the first letters of the alphabet). A failure
        is logged and keeps what was stored (synonyms are a help to the keyword side, never a reason
        for a sync to fail); the vocabulary stays marked incomplete until an update gets every word in,
        so the next sync looks at the words of every chunk, not only its own.
        """
        if provider is None or not words:
            return 0
        from .analysis import stem
        from .records import pack_vector

        key = _embedder_key(provider)
        try:
            with self.store.write():
                self.store.conn.execute(SCHEMA)
                row = self.store.conn.execute("SELECT value FROM meta WHERE key=?", (EMBEDDER_META,)).fetchone()
                if row is None or row[0] != key:
                    self.store.conn.execute(f"DELETE FROM {TABLE}")
                    self.store.conn.execute("DELETE FROM meta WHERE key=?", (CAPPED_META,))
                    self.store.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (EMBEDDER_META, key))
            have = {r[0] for r in self.store._read(f"SELECT word FROM {TABLE}").fetchall()}
            if len(have) > max_words:  # the cap was lowered: the words added last go first
                with self.store.write():
                    self.store.conn.execute(f"DELETE FROM {TABLE} WHERE rowid IN (SELECT rowid FROM {TABLE} "
                                            "ORDER BY rowid DESC LIMIT ?)", (len(have) - max_words,))
                have = {r[0] for r in self.store._read(f"SELECT word FROM {TABLE}").fetchall()}
            todo = wanted = sorted((w for w in words if w not in have), key=lambda w: (-words[w], w))
            room = max(0, max_words - len(have))
            if len(todo) > room:
                if room:  # the sync that fills it says so; later ones leave new words out quietly
                    log.info("local synonyms: the word vocabulary is full (%d words, "
                             "query.hybrid.synonyms.maxWords); %d less widely held words left out",
                             max_words, len(todo) - room)
                todo = todo[:room]
            self._mark_capped(max_words if len(todo) < len(wanted) else None)
            added = 0
            if todo:  # cleared once every word has its vector: a failure or a cancel on the way leaves it set
                self._mark_incomplete(True)
            for i in range(0, len(todo), EMBED_BATCH):
                if cancel is not None and cancel.is_set():
                    return added
                part = todo[i:i + EMBED_BATCH]
                vecs = provider.embed_documents(part)
                if len(vecs) != len(part):
                    raise ValueError(f"{len(vecs)} vectors for {len(part)} words")
                rows = [(w, stem(w), pack_vector(v)) for w, v in zip(part, vecs, strict=True)]
                with self.store.write():
                    self.store.conn.executemany(f"INSERT OR REPLACE INTO {TABLE}(word, term, embedding) VALUES (?,?,?)",
                                                rows)
                added += len(rows)
            self._mark_incomplete(False)
            return added
        except Exception as exc:  # an embedding outage, a locked index: the next sync tries again (INCOMPLETE_META)
            log.warning("could not update the synonym vocabulary (%s); keyword search goes on without it", exc)
            return 0

    def _mark_incomplete(self, incomplete: bool) -> None:
        """Set or clear :data:`INCOMPLETE_META` (clearing writes nothing when it is not set)."""
        if not incomplete and self.store._read("SELECT 1 FROM meta WHERE key=?", (INCOMPLETE_META,)).fetchone() is None:
            return
        with self.store.write():
            if incomplete:
                self.store.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, '1')", (INCOMPLETE_META,))
            else:
                self.store.conn.execute("DELETE FROM meta WHERE key=?", (INCOMPLETE_META,))

    def _mark_capped(self, max_words: int | None) -> None:
        """Record the cap at which words were left out (:data:`CAPPED_META`); None: every word offered got in,
        which clears a record of a smaller cap (the refill after the cap was raised)."""
        row = self.store._read("SELECT value FROM meta WHERE key=?", (CAPPED_META,)).fetchone()
        if max_words is not None and (row is None or int(row[0]) != max_words):
            with self.store.write():
                self.store.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                                        (CAPPED_META, str(max_words)))
        elif max_words is None and row is not None:
            with self.store.write():
                self.store.conn.execute("DELETE FROM meta WHERE key=?", (CAPPED_META,))

    def skipped(self, words: Collection[str]) -> None:
        """The indexer wrote chunks with these ``words`` but did not update the vocabulary (a cancelled sync,
        or one whose provider already failed):
        the next sync looks at every chunk's words. Best effort."""
        if not words:
            return
        try:
            self._mark_incomplete(True)
        except Exception as exc:  # a closing or locked index: those words wait for a full refill
            log.debug("could not mark the synonym vocabulary incomplete (%s)", exc)

    # ------------------------------------------------------------ search side

    def _matrix(self, provider: Any) -> tuple[list[str], list[str], Any] | None:
        """``(terms, words, unit vectors)`` of the vocabulary, reloaded only when it changed; None if empty."""
        import apsw

        key = _embedder_key(provider)
        try:
            row = self.store._read("SELECT value FROM meta WHERE key=?", (EMBEDDER_META,)).fetchone()
            if row is None or row[0] != key:
                return None
            # With the index's id (meta index_id): another process that drops and rebuilds the index writes a
            # vocabulary from rowid 1 again, as many words as the one loaded (one word in place of another) under
            # the same count and last rowid.
            count, last, index_id = self.store._read(
                f"SELECT COUNT(*), COALESCE(MAX(rowid), 0), (SELECT value FROM meta WHERE key = 'index_id') "
                f"FROM {TABLE}").fetchone()
        except apsw.SQLError:  # no vocabulary table yet (an index built before it, or no sync since)
            return None
        if not count:
            return None
        stamp = (int(count), int(last), key, index_id)
        with self._lock:
            if self._loaded is not None and self._loaded[0] == stamp:
                return self._loaded[1], self._loaded[2], self._loaded[3]
        import numpy as np

        rows = self.store._read(f"SELECT term, word, embedding FROM {TABLE} ORDER BY rowid").fetchall()
        terms = [r[0] for r in rows]
        words = [r[1] for r in rows]
        m = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        m = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)
        with self._lock:
            self._loaded = (stamp, terms, words, m)
        return terms, words, m

    def expand(self, provider: Any, words: Sequence[str], query_terms: Sequence[str],
               doc_freqs: Callable[[list[str]], Mapping[str, int]],
               embed: Callable[[list[str]], list[list[float]]] | None = None, *, theta: float = THETA,
               ) -> dict[str, tuple[tuple[str, str, float], ...]]:
        """For each query word the index does not hold: ``{its term: ((word, term, weight), ...)}``.

        ``words``: the query's content words; ``query_terms``: its index terms (never added as
        neighbours); ``doc_freqs(terms)``: how many chunks hold each index term; ``theta``: the least
        cosine of a stand-in (:func:`min_cosine`). Empty (and no embedding) when every word of the
        query is in the index.
        """
        from .analysis import STOP_WORDS, stem

        unknown: dict[str, str] = {}
        for w in words:
            if not _plain_word(w):
                continue
            unknown.setdefault(stem(w), w.lower())
        if not unknown:
            return {}
        df = doc_freqs(list(unknown))
        unknown = {t: w for t, w in unknown.items() if not df.get(t, 0)}
        if not unknown or provider is None:
            return {}
        loaded = self._matrix(provider)
        if loaded is None:
            return {}
        terms, vocab_words, m = loaded
        import numpy as np

        vecs = self._word_vectors(provider, list(unknown.values()), embed or provider.embed_documents)
        taken = set(query_terms)
        out: dict[str, list[tuple[str, str, float]]] = {}
        for term, word in unknown.items():
            # einsum: a plain loop over the rows, no BLAS threads (a 1 x n product on a busy host cost
            # several times more CPU through multi-threaded BLAS).
            row = np.einsum("ij,j->i", m, vecs[word])
            picks: list[tuple[str, str, float]] = []
            k = min(len(row), TOP * 4)
            best = np.argpartition(-row, k - 1)[:k]
            for j in best[np.argsort(-row[best])]:
                cos = float(row[j])
                if cos < theta or len(picks) >= TOP:
                    break
                t = terms[j]
                # (a vocabulary filled before identifiers were left out may hold some)
                if t in taken or t in STOP_WORDS or any(t == p[1] for p in picks) \
                        or not _plain_word(vocab_words[j]):
                    continue
                picks.append((vocab_words[j], t, GAMMA * cos))
            if picks:
                out[term] = picks
        if out:  # a word no chunk holds any more (its note was edited) stands in for nothing
            held = doc_freqs(sorted({p[1] for ps in out.values() for p in ps}))
            out = {t: [p for p in ps if held.get(p[1], 0)] for t, ps in out.items()}
        return {t: tuple(ps) for t, ps in out.items() if ps}

    def _word_vectors(self, provider: Any, words: list[str],
                      embed: Callable[[list[str]], list[list[float]]]) -> dict[str, Any]:
        """Unit vectors of query words, embedded once per process (the same words come back query after query)."""
        import numpy as np

        key = _embedder_key(provider)
        with self._lock:
            if self._words_key != key:
                self._words.clear()
                self._words_key = key
            out = {w: self._words[w] for w in words if w in self._words}
        missing = [w for w in words if w not in out]
        if missing:
            got = np.asarray(embed(missing), dtype=np.float32)
            got = got / np.maximum(np.linalg.norm(got, axis=1, keepdims=True), 1e-9)
            fresh = dict(zip(missing, got, strict=True))
            out.update(fresh)
            with self._lock:
                if len(self._words) + len(fresh) > WORD_CACHE_MAX:
                    self._words.clear()
                self._words.update(fresh)
        return out

    def for_query(self, provider: Any, qa: QueryAnalysis, generation: Generation,
                  embed: Callable[[list[str]], list[list[float]]] | None = None, *,
                  theta: float = THETA) -> QuerySynonyms:
        """What one search needs: the words to add to the keyword match, the terms to count, the weights.

        ``embed``: how to embed the query's unknown words (the backend bounds it by the query's deadline);
        ``provider.embed_documents`` by default.
        """
        found = self.expand(provider, qa.words, qa.terms,
                            lambda terms: self.store._doc_freqs(terms, generation), embed=embed, theta=theta)
        if not found:
            return QuerySynonyms(qa, (), {})
        words = tuple(dict.fromkeys(p[0] for ps in found.values() for p in ps))
        return QuerySynonyms(attrs.evolve(qa, words=qa.words + words),
                             tuple(dict.fromkeys(p[1] for ps in found.values() for p in ps)),
                             {t: tuple((p[1], p[2]) for p in ps) for t, ps in found.items()})


@attrs.frozen
class QuerySynonyms:
    """The local synonyms of one query.

    ``match``: the query's analysis with the stand-in words added to its content words (what the
    keyword search matches, so that chunks holding only a stand-in are candidates); ``terms``: the
    stand-ins' index terms (their counts are read with the query's); ``weights``:
    ``{query term: ((index term, factor), ...)}`` for :func:`~.analysis.keyword_evidence`.
    """

    match: QueryAnalysis
    terms: tuple[str, ...]
    weights: Mapping[str, tuple[tuple[str, float], ...]]
