"""A memory backend over the SQLite index; builtin-sqlite and faiss are this with different vector sides."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from itertools import compress, count, filterfalse, repeat
from operator import contains, itemgetter, not_, setitem
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import apsw
import attrs

from .. import forking
from ..closing import close_plugin_object
from ..errors import BackendError, EmbeddingError
from ..specs import (
    DEFAULT_CALIBRATION,
    BatchingProvider,
    CatchesUp,
    Closeable,
    ScoreCalibration,
    SearchesOnAnyThread,
    VectorSide,
    WarmsUp,
)
from ..types import (
    BackendResult,
    Candidate,
    Fallback,
    LazyCandidates,
    ReadResult,
    SearchQuery,
    SyncProgress,
    SyncReport,
)
from ..workspace import AbsentRoot, MemoryFile, PathRules, path_candidates, printable_path
from .chunks import NO_EPOCH
from .indexer import NO_WAIT_REASONS, Indexer, SyncCancelled, scan_sources
from .meta import NO_GENERATION, Generation
from .records import CandidateRow, all_finite
from .store import IndexStore

if TYPE_CHECKING:
    from ..chunking import CHARS_PER_TOKEN
    from ..config import AgentView
    from ..embedding import EmbeddingChoice
    from ..fusion import score_hits
    from .analysis import QueryAnalysis, counts_in, needles, term_string
    from .keyword import CJK_RUN_RE
    from .scheduler import SyncScheduler
    from .synonyms import QuerySynonyms, Vocabulary, min_cosine
    from .vectors import combined_cosines

__all__ = ["IndexedBackend", "KEYWORD_OVERFETCH", "VectorSide", "assemble_backend"]

KEYWORD_OVERFETCH = 3
#: How far down the keyword ranking a search looks for other notes when the pieces of one long line (a line longer
#: than a chunk: its middle pieces all cite that line alone) hold several of the first places: this many times the
#: keyword candidates. The pieces of a line are collapsed to one result after retrieval, so without it a line of
#: more pieces than the keyword side fetches left that line the only result (a line of about 100 KB, by default).
LINE_PIECES_REACH = 16
TERMS_CACHE_MAX = 50_000
# Term counts of candidates not in the term cache are read from FTS5's index when that costs less than
# tokenizing their text. Measured costs, in characters of chunk text tokenized in the same time: reading one
# occurrence of a query term, looking one term up, and the read itself.
FTS_COUNT_CHARS_PER_OCCURRENCE = 20
FTS_COUNT_CHARS_PER_TERM = 1_500
FTS_COUNT_FIXED_CHARS = 4_000
# Counting the query's terms in a chunk's cached term string costs about as much as tokenizing this much text.
FTS_COUNT_CACHED_CHARS = 150
# A term occurring at most this many times in the index has its counts read for every chunk holding it, then kept
# for the generation (the same query words come back: at 100k bench chunks this made chunk term counts 0.72x
# of reading the candidates' alone each time); a commoner one's for the candidates only, which skips the other
# occurrences inside SQLite (at 10,000 occurrences 3.2 ms against 8.7 for reading them all).
FTS_COUNT_WHOLE_MAX = 4_000
# FTS5 cuts longer tokens to this many bytes: a chunk this long (in UTF-8) might hold one, so it is tokenized.
FTS_MAX_TOKEN_BYTES = 32_768
#: Candidate rows (chunk text, path, lines, file mtime) are kept for the index generation while the index holds
#: at most this many chunks (about 2 kB each with 400-token chunks): every row then fits. A larger index's
#: searches meet few chunks again (at 100k bench chunks, keeping 10,000 cost more CPU than it saved).
ROWS_CACHE_MAX = 20_000
#: ... and while the kept rows' text stays under this many characters: larger chunks (``chunking.tokens`` 4000)
#: would otherwise keep the whole indexed text in every long-running process (27 MB for 3,000 such chunks).
ROWS_CACHE_CHARS = 8_000_000
#: The store reads candidate rows this many rowids a statement, each statement's rows in rowid order.
ROWS_READ_PART = 500
_TEXT = itemgetter(6)  # a CandidateRow's text
_COUNTS = itemgetter(0)  # a chunk's term counts, of its (counts, length)
_SOURCE = itemgetter(3)  # ... and source
# ... and the other fields a candidate is made of (by name: the same indexes as the fields' order).
_ID, _PATH, _START_LINE, _END_LINE, _MTIME, _PLAIN = (itemgetter(CandidateRow._fields.index(name)) for name in (
    "id", "path", "start_line", "end_line", "mtime", "plain"))


class _RowColumn(Sequence[Any]):
    """One field of a search's candidate rows in their order, as :class:`~symi_memory.types.LazyCandidates` reads a
    column (its length, then slices of it, as lists): each slice read from its rows when it is asked for."""

    __slots__ = ("rows", "field")

    def __init__(self, rows: list[CandidateRow], field: Callable[[CandidateRow], Any]) -> None:
        self.rows = rows
        self.field = field

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return list(map(self.field, self.rows[index]))
        return self.field(self.rows[index])
#: Chunks whose line vectors ``candidate_line_vectors`` keeps (about 20 kB each with 384 dimensions).
UNITS_CACHE_MAX = 2_000
#: Chunks whose vector ``candidate_vectors`` keeps (1.5 kB each with 384 dimensions).
VECTORS_CACHE_MAX = 2_000
#: Chunk counts of rare query terms read from FTS5 kept for the index generation: the same query words come back
#: search after search. Each kept term counts once at least. About 65 bytes a count for a term in thousands of
#: chunks, 350 for a term in one chunk (its own dict and name): 2 to 9 MB at the cap (100,000 made peak RSS at
#: 100k bench chunks 304 MB, over issue 13's 300 MB, with the supersession facts below at 4,096).
POSTINGS_CACHE_MAX = 25_000
# How long a search waits for its query vector before answering by keyword alone (a hung provider).
QUERY_EMBED_DEADLINE_S = 2.5

log = logging.getLogger("symi_memory.backend")

#: Whether the search path's modules are imported yet (:func:`_import_search_path`).
_SEARCH_IMPORTED = False


def _import_search_path() -> None:
    """Import what a search uses into this module's names, on the first search: a one-shot ``status`` or ``get``
    opens the backend without searching, and must not import the scoring code (nor numpy through it). Bound once
    as module names: an import statement in a function costs a microsecond or more at every call, and a search
    made nine of them."""
    global _SEARCH_IMPORTED, CHARS_PER_TOKEN, score_hits, QueryAnalysis, counts_in, needles, term_string
    global CJK_RUN_RE, min_cosine, combined_cosines
    from ..chunking import CHARS_PER_TOKEN
    from ..fusion import score_hits
    from .analysis import QueryAnalysis, counts_in, needles, term_string
    from .keyword import CJK_RUN_RE
    from .synonyms import min_cosine
    from .vectors import combined_cosines

    _SEARCH_IMPORTED = True


#: What SQLite raises reading a damaged index file ("database disk image is malformed", "file is not a database").
DAMAGE_ERRORS = (apsw.CorruptError, apsw.NotADBError)


@attrs.define
class IndexedBackend:
    """Hybrid search over the SQLite index with a pluggable vector side."""

    agent: AgentView
    store: IndexStore
    choice: EmbeddingChoice
    indexer: Indexer
    vectors: VectorSide
    #: ``status()["backend"]`` and ``["plugin"]``: the registration's status name and name.
    short_name: str
    plugin_name: str
    scheduler: SyncScheduler | None = None
    _sync_lock: threading.Lock = attrs.field(factory=threading.Lock)
    #: The thread running a sync (holding ``_sync_lock``), else None.
    _sync_thread: int | None = None
    #: :meth:`close` was called from inside the running sync (its progress callback, a signal handler): the sync
    #: finishes closing as it returns.
    _close_after_sync: bool = False
    _closing: bool = False
    #: Why the last sync could not write the index (a full disk), until a sync writes it: status's lastError.
    _disk_failure: str | None = None
    #: ``_disk_failure`` as recorded in the index's meta for other processes (None: it could not be recorded).
    _disk_recorded: str | None = None
    on_synced: Callable[[SyncReport], None] | None = None
    # (generation, each chunk's terms by rowid): replaced whole, so a search holds the one it began with.
    _terms: tuple[Generation, dict[int, tuple[str, int]]] = attrs.field(factory=lambda: (NO_GENERATION, {}))
    # (epoch, the rows kept for it by rowid, the sources of those rows and perhaps of rows let go): replaced whole
    # when the epoch changes, so a search holds the rows and the sources it looked at together (another thread's
    # search of a newer epoch starting the kept rows again in between cannot pair them with another set of sources).
    _rows_kept: tuple[tuple[Generation, int], dict[int, CandidateRow], set[str]] = attrs.field(
        factory=lambda: (NO_EPOCH, {}, set()))
    _rows_chars: int = 0  # the kept rows' text, in characters
    _units_cache: dict[str, list[tuple[int, int, Any]]] = attrs.field(factory=dict)
    _units_gen: Generation = NO_GENERATION
    _vectors_cache: dict[str, Any] = attrs.field(factory=dict)
    _vectors_gen: Generation = NO_GENERATION
    #: ``(generation, {term: {rowid: count}}, [counts kept])``: rare query terms' counts in every chunk holding
    #: them, read from FTS5 (one object, replaced whole when the generation changes, so a search of another
    #: generation never fills it; plain dicts of ints, which the garbage collector does not track).
    _postings: tuple[Generation, dict[str, dict[int, int]], list[int]] = (NO_GENERATION, {}, [0])
    _hung_query: _Done | None = None
    _local: threading.local = attrs.field(factory=threading.local)
    _query_worker: _Worker | None = None
    _vocabulary: Vocabulary | None = None
    _words_worker: _Worker | None = None
    #: Starting an embedding worker: searches on several threads at once (a server's) each started one, and all
    #: but the one kept ran on after close(), a thread lost every time the agent was opened.
    _workers_lock: threading.Lock = attrs.field(factory=threading.Lock)
    #: The process whose threads the workers and ``_workers_lock`` are: another one is a forked child
    #: (:meth:`_forget_parents_workers`).
    _workers_pid: int = attrs.field(factory=os.getpid)
    _hung_words: threading.Event | None = None
    #: ``(vector side's class, whether the class is SearchesOnAnyThread)``, asked once per class (``isinstance``
    #: against a runtime-checkable protocol lists the protocol's members again at every call).
    _any_thread: tuple[Any, bool] | None = None
    #: ``(vector side, generation)`` :meth:`_prepare_vectors` last asked the vector side to be ready at.
    _prepared: tuple[Any, Generation] | None = None

    def __attrs_post_init__(self) -> None:
        forking.track(self)

    def _after_fork_in_child(self) -> None:
        """In a forked child: a sync the parent was running is not the child's (its lock would stay held for ever
        and the child's first sync wait for it); the embedding workers are forgotten when next needed
        (:meth:`_forget_parents_workers`), the store opens connections of its own."""
        self._sync_lock = threading.Lock()
        self._sync_thread = None
        self._close_after_sync = False
        self._local = threading.local()

    def start(self) -> None:
        """Arm the watcher, the interval and the staleness check."""
        from .scheduler import SyncScheduler

        self.scheduler = SyncScheduler(agent=self.agent, run_sync=self._background_sync,
                                       check_stale=lambda for_search: self.is_stale(retry_pending=self.indexer.retry_due(),
                                                                          any_session_change=for_search))
        self.scheduler.start()

    # ------------------------------------------------------------------ sync

    def sync(self, *, reason: str = "manual", force: bool = False,
             progress: Callable[[SyncProgress], None] | None = None) -> SyncReport:
        try:
            with self._sync_lock:
                self._sync_thread = threading.get_ident()
                try:
                    report, changes = self._sync_locked(reason, force, progress)
                finally:
                    self._sync_thread = None
        finally:
            if self._close_after_sync:
                self._close_after_sync = False
                self._finish_close()
        if self.scheduler and self.indexer.deferred is None:  # deferred: dirty until the other build lands
            self.scheduler.mark_clean(changes)
        if (isinstance(self.vectors, CatchesUp) and not self._closing
                and reason.split(" ")[0] not in NO_WAIT_REASONS):
            self.vectors.catch_up()  # a saved vector index the sync had nothing to write to (faiss)
        if self.on_synced:
            self.on_synced(report)
        return report

    def _sync_locked(self, reason: str, force: bool,
                     progress: Callable[[SyncProgress], None] | None) -> tuple[SyncReport, int]:
        if self._closing:
            raise SyncCancelled("sync cancelled: the memory manager is closing")
        changes = self.scheduler.changes if self.scheduler else 0
        if self.store.writable_again():
            # Opened read-only (a file or folder this process could not write: restored from a backup with the
            # wrong owner, say), writable now: written from this sync on, without a restart.
            log.info("index %s is writable again: reopened for writing", self.store.path)
            self.store.reopen()
        damaged = self.store.damaged()
        upgrade = False
        if damaged is not None:  # a read (here or in another process) found the file damaged
            self.store.recover_damaged(damaged)
        elif self.store.replaced():  # another process set the damaged file aside: sync the one now in place
            self.store.reopen()
        else:
            upgrade = True
        try:
            try:
                if upgrade and self.store.schema_older():
                    # A release from before this schema rebuilt the index at its own (no chunks.plain): every write
                    # of this one would fail. Brought up to this schema again first, as an open (or a search) does;
                    # damage met doing so is handled as the sync's own (set aside, rebuilt).
                    self.store.reopen()
                report = self.indexer.sync(reason=reason, force=force, progress=progress)
            except DAMAGE_ERRORS as exc:
                # The index is derived from the files: set the damaged one aside and build it again.
                self.store.recover_damaged(exc)
                report = self.indexer.sync(reason=reason, force=True, progress=progress)
        except (apsw.FullError, apsw.IOError) as exc:
            raise self._disk_error(exc) from exc
        # The disk error stands until a sync writes (the disk took that), or brings the index up to date having held
        # nothing back: one that wrote nothing and left the files a failed sync could not write for later (their
        # vectors' backoff, a transcript's delta thresholds) learnt nothing of the disk.
        wrote = report.full or report.files_indexed or report.files_removed
        if self.indexer.deferred is None and (wrote or not self.indexer.held_back):
            self._disk_failure = self._disk_recorded = None
            # Said by this or another process: the disk took this sync. A process that may only read the index
            # (whose status says so instead) leaves it to one that can write: its sync wrote nothing and failed none.
            if self.store.get_meta(DISK_ERROR_META) and not self.store.read_only():
                try:
                    self.store.set_meta(DISK_ERROR_META, "")
                except (apsw.Error, BackendError) as exc:
                    log.warning("could not clear the recorded disk error: %s", exc)
        return report, changes

    def _disk_error_now(self) -> str | None:
        """The disk error status reports: this process's own, unless another process's sync has since cleared (or
        replaced) the one recorded; else the one another process's sync recorded."""
        recorded = self.store.get_meta(DISK_ERROR_META) or None
        if self._disk_failure is not None and (self._disk_recorded is None or recorded == self._disk_recorded):
            return self._disk_failure
        return recorded

    def _disk_error(self, exc: apsw.Error) -> BackendError:
        """The error a sync that SQLite could not write (a full disk, a file size limit, an I/O error) raises,
        also shown by ``status()["lastError"]`` until a sync succeeds. SQLite says only "disk I/O error"
        (EFBIG) or "database or disk is full"; the OS error it hit says which.

        Kept apart from the indexer's own error (why files wait for their vectors): a later sync that writes
        clears it even when files still wait (a background sync retries those only after a backoff), and
        lastError goes back to that reason rather than naming a disk that has room again."""
        code = self.store.conn.system_errno
        why = os.strerror(code) if code else str(exc)
        full = isinstance(exc, apsw.FullError) or code in (errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", -1))
        message = (f"could not write the index {self.store.path}: {why} ({exc}); "
                   + ("free disk space (or raise the file size limit) and sync again" if full else
                      "check the disk and sync again")
                   + ": the memory files are unchanged and searches answer from the index as it was")
        self._disk_failure = message
        try:  # for status in other processes (a fresh `symi-memory status`, a serve opened before)
            self.store.set_meta(DISK_ERROR_META, message)
            self._disk_recorded = message
        except (apsw.Error, BackendError) as exc:  # no room for this either (or remounted read-only): only here
            log.debug("could not record the disk error: %s", exc)
            self._disk_recorded = None
        return BackendError(message)

    def _background_sync(self, reason: str) -> None:
        if self._closing:
            return
        try:
            self.sync(reason=reason)
        except SyncCancelled:
            pass
        except Exception as exc:  # a background sync must never crash the host
            log.warning("background sync (%s) failed: %s", reason, exc)

    def check_integrity(self) -> str | None:
        """:class:`~symi_memory.specs.ChecksIntegrity`: read the whole index file for damage; None when intact.
        Damage found is recorded (``status`` reports it in any process) and the next sync rebuilds the index."""
        problem = self.store.check_integrity()
        if problem is not None and self.scheduler:
            self.scheduler.mark_dirty("damaged")
        return problem

    def is_stale(self, *, retry_pending: bool = True, any_session_change: bool = True,
                 scanned: tuple[list[MemoryFile], list[AbsentRoot]] | None = None) -> bool:
        """True when any file on disk differs from the index (mtime/size), still lacks vectors, or the identity changed.

        A transcript that grew counts at once, unless ``any_session_change`` is false (the background
        check): then only once it grew past the delta thresholds that start a background sync. ``scanned``: the
        files and what cannot be listed (:func:`~.indexer.scan_sources`) when the caller has just listed them.
        """
        if self.indexer.needs_full() or self.indexer.needs_units() or self.store.damaged() is not None:
            return True
        files, absent = scanned if scanned is not None else (None, None)
        changed, removed = self.indexer.changed_files(files, retry_pending=retry_pending, retry_failed=False,
                                                      absent=absent)
        if removed or any(f.source != "sessions" for f in changed):
            return True
        if any_session_change:
            return bool(changed)
        indexed = self.store.files()
        return any(self.indexer.session_due(f, indexed.get(f.path)) for f in changed)

    # ---------------------------------------------------------------- search

    def search(self, query: SearchQuery) -> BackendResult:
        upgrade: apsw.SQLError | None = None  # the error of a search that read the index at an older schema
        while True:
            try:
                if upgrade is not None:
                    # A release from before this schema opened the index and rebuilt it at its own (without the
                    # columns this one reads, such as chunks.plain): brought up to this schema again, as an open
                    # does, and searched again. Inside this try: damage the look at the schema, the upgrade or the
                    # search after it meets is handled as any search's is (recorded, the next sync rebuilds).
                    if not self.store.schema_older():
                        raise upgrade
                    self.store.reopen()
                return self._search(query)
            except DAMAGE_ERRORS as exc:
                if self.store.replaced():
                    # Another process already set this damaged file aside and opened a fresh one (or changed a
                    # file this one reads as unchanging, moving its pages): read the file now in place.
                    self.store.reopen()
                    return self.search(query)
                self.store.note_damaged(exc)
                if self.scheduler:
                    self.scheduler.mark_dirty("damaged")
                raise BackendError(f"the index {self.store.path} is damaged ({exc}); the next sync sets it aside "
                                   "and rebuilds it from the memory files (`symi-memory index`)") from exc
            except apsw.SQLError as exc:
                if upgrade is not None:
                    raise
                upgrade = exc

    def _search(self, query: SearchQuery) -> BackendResult:
        if not _SEARCH_IMPORTED:
            _import_search_path()
        self._local.plain = None  # candidate_plain answers for this search's candidates alone
        if self.scheduler:
            self.scheduler.on_search(query.session_key)
        self.store.searching()  # this thread reads with a searching connection's page cache
        ms = self.agent.memory_search
        hybrid = ms["query"]["hybrid"]
        sources = tuple(s for s in query.sources if s in ("memory", "sessions")) or ("memory",)
        provider = self.choice.provider
        qa = QueryAnalysis.of(query.text)  # the one tokenization of this query
        if not qa.terms:
            # Only stop words ("the", "what is it"): nothing to look for, on either side. The mode is the one the
            # search would have run in (behaviour §5 names four; "none" was a fifth no caller knew).
            mode = "fts-only" if provider is None else "hybrid" if hybrid["enabled"] else "vector"
            return BackendResult(candidates=(), mode=mode, provider=provider.id if provider else "none",
                                 model=provider.model if provider else None, fallback=self.choice.fallback)
        qvec: list[float] | None = None
        fallback = self.choice.fallback
        limit = query.candidate_limit
        pending = self._start_query_embedding(provider, query.text) if provider is not None else None
        # One FTS query serves both: the top `limit` are keyword candidates, the rest score vector candidates.
        # In hybrid mode it runs while the query is embedded (another thread, or the provider's server).
        ranked: list[tuple[int, float]] | None = None
        # Read once: the per-generation caches of this search (document frequencies, term counts) are keyed by it.
        # Which provider and model built the index's vectors comes with it (one look at the data version).
        epoch, identity = self.store.search_state()
        self._local.overtaken = False  # set by _chunk_terms when a write landed since
        generation = epoch[0]
        # Read once, before the wait: vectors built by another provider/model are not comparable.
        stale = provider is None or self.indexer.needs_full(identity)
        if stale and provider is not None and fallback is None and self.store.build_running():
            # The index's first build (or a reindex) is running, here or in another process: say why no vectors.
            fallback = Fallback(from_=provider.id, reason="the index is being built (another process or sync); "
                                "keyword results from the index as it is until the build lands")
        # Local synonyms: query words no chunk holds, matched through index words of like meaning.
        syn = self.synonyms_for(provider, qa, generation, stale=stale) if hybrid["enabled"] else None
        match = syn.match if syn is not None else qa
        terms = qa.terms + syn.terms if syn is not None else qa.terms
        full = pending is None or stale
        if not full:
            self._prepare_vectors(generation)  # while the query is embedded: the scan copy does not depend on it
        # Over-fetch when filtering by source, since the vector side cannot filter.
        k_vec = limit * (2 if len(sources) == 1 else 1)
        weight = float(ms["store"]["vector"].get("unitWeight", 0.0))
        # A vector side that scores chunks with their units as asked scores the keyword candidates too, from
        # the scan it just ran where it can: their vectors are then not read with their rows.
        rescore = getattr(self.vectors, "rescore", None) if weight > 0 else None
        if getattr(self.vectors, "unit_weight", None) != weight:
            rescore = None
        # In hybrid mode a long vector scan runs on the scan worker as soon as the query vector is there, while this
        # thread runs the keyword side: the FTS query, then the keyword candidates' rows, their term counts and the
        # terms' weights (none of which needs the vector hits).
        scan = self._scan_ahead(pending, k_vec) if hybrid["enabled"] and not full else None
        keyword: _KeywordRows | None = None
        chunk_terms: dict[int, tuple[dict[str, int], int]] = {}
        weights: dict[str, float] | None = None
        def deeper(n: int) -> list[tuple[int, float]]:  # the first n keyword hits: _keyword_rows looks further
            return self.store.keyword_search(query.text, n, analysis=match, generation=generation)

        if hybrid["enabled"]:
            ranked = self.store.keyword_search(query.text, limit * KEYWORD_OVERFETCH, analysis=match,
                                               generation=generation)
            if scan is not None:
                # With their stored vectors when the keyword candidates the scan does not score are scored from them.
                keyword = self._keyword_rows(ranked, limit * KEYWORD_OVERFETCH, sources,
                                             vectors=rescore is None, epoch=epoch, deeper=deeper)
                chunk_terms = self._chunk_terms(keyword.candidates(), generation, terms)
                weights = self.store.term_weights(qa.terms, generation=generation)
        if provider is not None:
            qvec, why = self._finish_query_embedding(provider, pending)
            if why is not None:
                fallback = Fallback(from_=provider.id, reason=why)
        if qvec is not None and not any(qvec):
            qvec = None  # an all-zero vector carries no meaning
        if qvec is not None and provider is not None and not all_finite(qvec):
            # NaN or infinity (a provider's bug): no chunk's cosine with it means anything, and sqlite-vec's
            # search raised on it. Answered by keyword, saying why, as when the embedding failed.
            why = f"query embedding by {provider.id} held non-finite values (NaN or infinity); keyword results only"
            log.warning("%s", why)
            fallback = Fallback(from_=provider.id, reason=why)
            qvec = None
        if qvec is not None and not full and (dims := self.store.vec_dims) and len(qvec) != dims \
                and provider is not None:
            # The same provider and model as the index's, but another width (a provider's bug, or an endpoint
            # that changed its model behind the same name): no stored vector can be compared with it.
            why = (f"query embedding by {provider.id} has {len(qvec)} dimensions, the index's vectors {dims} "
                   f"(reindex with `symi-memory index --force` if the model changed); keyword results only")
            log.warning("%s", why)
            fallback = Fallback(from_=provider.id, reason=why)
            qvec = None
        # Vectors built by another provider/model are not comparable: keyword-only until the reindex lands.
        use_vec = qvec is not None and not full
        use_text = hybrid["enabled"] or not use_vec
        if scan is not None and not use_vec:
            scan.cancel()  # the vector came too late (or not at all): no scan of it is wanted now
        if ranked is None:
            ranked = self.store.keyword_search(query.text, limit * KEYWORD_OVERFETCH, analysis=match,
                                               generation=generation) if use_text else []
        vec_hits: dict[int, float] = {}
        if use_vec:
            if scan is not None:
                # While the scan runs, this thread reads the keyword candidates' stored vectors for their rescoring.
                prescore = getattr(self.vectors, "prescore", None) if rescore is not None else None
                ids = keyword.keyword_ids if keyword is not None else []
                vec_hits = dict(scan.hits(qvec, None if prescore is None else lambda: prescore(qvec, ids)))
            else:
                vec_hits = dict(self.vectors.search(qvec, k_vec))  # type: ignore[arg-type]
        # Every keyword hit fetched is rescored by its keyword evidence below, so all of them are candidates.
        # In hybrid mode the stored vectors the vector side did not score come back with their rows (one query),
        # unless the vector side scores them from its scan.
        cosine_missing = use_vec and hybrid["enabled"]
        if keyword is None:  # the vector hits' rows and the keyword candidates' in one read
            keyword = self._keyword_rows(ranked, limit * KEYWORD_OVERFETCH, sources,
                                         vectors=cosine_missing and rescore is None, epoch=epoch, vec_hits=vec_hits,
                                         deeper=deeper if use_text else None)
        rows, keyword_ids = self._candidate_rows(keyword, vec_hits, sources,
                                                 vectors=cosine_missing and rescore is None, epoch=epoch)
        if not vec_hits.keys() <= rows.keys():  # a vector hit of another source, or deleted since: left out
            vec_hits = {k: v for k, v in vec_hits.items() if k in rows}
        if use_vec and weight > 0 and getattr(self.vectors, "unit_weight", None) != weight:
            # A vector side that ranks chunk vectors only (faiss): its hits are rescored with their units.
            vec_hits.update(combined_cosines(self.store, qvec, list(vec_hits), weight))  # type: ignore[arg-type]
        if cosine_missing:
            # Only keyword candidates the vector side did not rank need their score computed here.
            if rescore is not None:
                vec_hits.update(rescore(qvec, list(filterfalse(vec_hits.__contains__, rows))))  # no vector: none
            elif weight > 0:
                unscored = {k: r.vector for k, r in rows.items() if k not in vec_hits and r.vector is not None}
                vec_hits.update(combined_cosines(self.store, qvec, list(unscored), weight,  # type: ignore[arg-type]
                                                 blobs=unscored))
            else:
                missing = {k: r.vector for k, r in rows.items() if k not in vec_hits and r.vector is not None}
                vec_hits.update(self.vectors.cosine(qvec, missing))  # type: ignore[arg-type]
        # Keyword side: BM25 normalised by the query (scale-free), calibrated to P(relevant); the vector
        # side through the provider's calibration. Length is normalised against the configured chunk size,
        # not the index's average: a fixed reference keeps a chunk's score independent of what else is indexed.
        # With the scan on the worker, the keyword candidates' counts are in already: the other rows' are counted here.
        if not chunk_terms:
            chunk_terms = self._chunk_terms(rows, generation, terms)
        elif unseen := {k: r for k, r in rows.items() if k not in chunk_terms}:
            chunk_terms.update(self._chunk_terms(unseen, generation, terms))
        elif use_vec and rows and self.store.moved(generation):
            # Every row is the keyword side's, read and counted before the scan (the scan worker's, or this
            # thread's when no core was free), so that count's look came before this thread's reads since (the
            # stored vectors prescore read while the worker scanned): a look after them. The generation the vector
            # side scored from is looked at next.
            self._local.overtaken = True
        if use_vec and not self._local.overtaken and self._scanned_other(generation):
            # The vector side scored these chunks (its scan, the rescoring of the keyword candidates) from another
            # index generation than this search's: a write landed since this search began, and another thread's
            # search loaded the newer scan copy (or this one's look at the index saw it first). A rowid SQLite gave a
            # new chunk then carries the deleted chunk's vector, or the other way round.
            self._local.overtaken = True
        if use_vec and self._local.overtaken:
            # The last count's look at the index, after every row was read, found that a write landed since this
            # search read the generation (``_local.overtaken``): the rows read since may carry a rowid's new text
            # while the vector side scored its old vector (the scan copy, faiss's index). Each row is read again with
            # its stored vector, in one statement, and scored from that vector (no statement more otherwise).
            rows, keyword_ids, vec_hits, chunk_terms = self._rows_as_they_are(
                rows, keyword_ids, sources, qvec, weight, generation, terms)  # type: ignore[arg-type]
        if weights is None:
            weights = self.store.term_weights(qa.terms, generation=generation) if use_text else {}
        # Term counts tell which candidates cannot hold an identifier only when they are the counts of the text
        # each candidate row carries: a write landing after this search read the generation may have given a
        # rowid new text (the last file's chunks get the highest rowids back) that the rows read meanwhile carry,
        # while the counts kept for the generation are the old text's. Read again after the counts: unchanged, no
        # write landed before the rows were read, and the rows carry the text of this generation.
        ident_candidates = (_identifier_candidates(qa, terms, rows, chunk_terms)
                            if qa.identifiers and not self.store.moved(generation) else None)
        scored = score_hits(query.text, hybrid, texts=dict(zip(rows, map(_TEXT, rows.values()), strict=True)),
                            keyword_ids=keyword_ids,
                            vector_hits=vec_hits,
                            term_weights=weights,
                            term_counts=chunk_terms.__getitem__,
                            chunk_chars=max(1, int(ms["chunking"]["tokens"])) * CHARS_PER_TOKEN,
                            calibration=self.calibration(), use_vector=use_vec, analysis=qa,
                            synonyms=syn.weights if syn is not None else None,
                            identifier_candidates_by_token=ident_candidates)
        mode, scores, text_hits, vec_p, idents = (scored.mode, scored.scores, scored.text_scores,
                                                  scored.vector_scores, scored.identifiers)
        keys: Sequence[int]
        kept: Sequence[float]
        if hybrid["fusion"] == "rrf" and mode == "hybrid":
            keys = sorted(scores, key=lambda k: -scores[k])  # stable: RRF order among equal scores
            kept = list(map(scores.__getitem__, keys))
        else:
            # Equal scores (say, every chunk holding all query words, at the exact-match floor) are ordered by
            # their fused score before the floor, then by the keyword ranking (looked up only when scores tie).
            keys, kept = scored.ranked(_KeywordRank(ranked))
        candidates: tuple[Candidate, ...] | LazyCandidates = ()
        if keys:
            # Each column (the ordered candidates' rows transposed, their scores) in one go; the candidates are made
            # from them a field at a time, as they are read (most searches read the best few and a post-processor's
            # window: making each of a search's ~140 candidates cost about a tenth of its instructions).
            # The rows' own fields are read from them as candidates are made (_RowColumn): a search makes about ten of
            # its ~140 (its results), and reading every field of every row (each a separate object, mostly out of the
            # CPU's caches by then) cost about 0.15 ms of a 10k bench search. The ids and stored plain answers are
            # read now (post-processors and candidate_plain read them whole).
            ordered = list(map(rows.__getitem__, keys))
            chunk_ids = tuple(map(_ID, ordered))
            candidates = LazyCandidates(_make_candidates, (
                chunk_ids, _RowColumn(ordered, _PATH), _RowColumn(ordered, _START_LINE), _RowColumn(ordered, _END_LINE), kept,
                _RowColumn(ordered, _TEXT), _RowColumn(ordered, _SOURCE), tuple(map(vec_p.get, keys)),
                tuple(map(text_hits.get, keys)), _RowColumn(ordered, _MTIME), tuple(map(idents.__contains__, keys))),
                kept, ids=chunk_ids)
            # The stored plain-chunk answers of these rows, read with the texts handed out (candidate_plain).
            self._local.plain = (chunk_ids, tuple(map(_PLAIN, ordered)))
        return BackendResult(candidates=candidates, mode=mode, provider=provider.id if provider else "none",
                             model=provider.model if provider else None, fallback=fallback,
                             query_vector=tuple(qvec) if use_vec and qvec is not None else None)

    def _scanned_other(self, generation: Generation) -> bool:
        """Whether the vector side's last search on this thread may have scored its hits from another index
        generation than ``generation``: the generation of the scan copy it scored from when it says
        (``scanned_generation``, ExactVectors), else the index's generation read again (a statement), as a scan
        that read stored vectors may have read them on another thread (the scan worker)."""
        scanned = getattr(self.vectors, "scanned_generation", None)
        got = scanned() if scanned is not None else None
        if got is not None:
            return got != generation  # type: ignore[no-any-return]
        return self.store.generation_key() != generation

    def _rows_as_they_are(self, rows: dict[int, CandidateRow], keyword_ids: list[int], sources: tuple[str, ...],
                          qvec: Sequence[float], weight: float, generation: Generation, terms: Sequence[str],
                          ) -> tuple[dict[int, CandidateRow], list[int], dict[int, float],
                                     dict[int, tuple[dict[str, int], int]]]:
        """A search overtaken by a write: its candidates' rows read again with their stored vectors (one statement:
        each row's text and vector of one snapshot), in the same order, with their vector scores from those vectors
        and their term counts from that text. A chunk deleted since is left out. Vectors another model built
        (a rebuild by another process's configuration) score nothing: the rows are scored by keyword alone, as a
        search after that rebuild is."""
        fresh = self.store.candidate_rows(list(rows), sources, vectors=True)
        rows = {k: r for k in rows if (r := fresh.get(k)) is not None}
        vec_hits: dict[int, float] = {}
        # The write may have been another model's rebuild (another process's config): its vectors are not
        # comparable with this search's query vector, and a search now answers by keyword until this process
        # reindexes. Looked at after the rows were read: a rebuild landing in between is seen too.
        if not self.indexer.needs_full(self.store.search_state()[1]):
            blobs = {k: r.vector for k, r in rows.items() if r.vector is not None}
            vec_hits = combined_cosines(self.store, qvec, list(blobs), weight, blobs=blobs)
        return rows, [k for k in keyword_ids if k in rows], vec_hits, self._chunk_terms(rows, generation, terms)

    def synonyms_for(self, provider: Any, qa: Any, generation: Generation, *, stale: bool | None = None,
                     ) -> QuerySynonyms | None:
        """The local synonyms of this query (:mod:`.synonyms`), or None (switched off, no provider, no threshold
        known for its model, or vectors of another model: ``stale``, :meth:`Indexer.needs_full`, read here when
        not given)."""
        if not _SEARCH_IMPORTED:
            _import_search_path()
        settings = self.agent.memory_search["query"]["hybrid"]["synonyms"]
        theta, _ = min_cosine(provider, settings)
        # maxWords 0: no word vectors, so none stand in (a vocabulary made before is emptied by the next sync).
        if theta is None or not settings["maxWords"] or (self.indexer.needs_full() if stale is None else stale):
            return None
        # An earlier word or query embedding has not returned (a hung endpoint): not again meanwhile (the
        # query side answers by keyword at once then, and so must this).
        if any(hung is not None and not hung.is_set() for hung in (self._hung_words, self._hung_query)):
            return None
        if self._vocabulary is None:
            from .synonyms import Vocabulary

            self._vocabulary = Vocabulary(self.store)

        def embed(words: list[str]) -> list[list[float]]:
            # On a worker thread, with the query's deadline: a hung endpoint must not hold the search.
            self._forget_parents_workers()
            with self._workers_lock:
                if self._words_worker is None or not self._words_worker.here():
                    self._words_worker = _Worker("symi-synonym-embed")
                worker = self._words_worker
            done, box = worker.call(lambda: provider.embed_documents(words))
            if not done.wait(QUERY_EMBED_DEADLINE_S):
                self._hung_words = done
                raise EmbeddingError(f"word embedding by {provider.id} took longer than {QUERY_EMBED_DEADLINE_S:g} s",
                                     provider=provider.id)
            if "error" in box:
                error = box["error"]
                if self.choice.guarded and isinstance(error, Exception) and not isinstance(error, EmbeddingError):
                    # A third-party provider's own exception, as at the query's embedding: no stand-ins, not a
                    # failed search.
                    raise EmbeddingError(f"word embedding by {provider.id} failed ({type(error).__name__}: {error})",
                                         provider=provider.id) from error
                raise error
            return box["value"]  # type: ignore[no-any-return]

        try:
            return self._vocabulary.for_query(provider, qa, generation, embed=embed, theta=theta)
        except EmbeddingError as exc:  # the search still answers: without stand-ins for unknown words
            log.warning("local synonyms skipped: %s", exc)
            return None

    def prepare_query(self) -> None:
        """Start loading the provider's model (:class:`~symi_memory.specs.PreparesQueries`).

        The provider imports its libraries here and builds the rest in the background, while the calling
        thread goes on (a one-shot search: the staleness check, the pipeline, the keyword side).
        """
        provider = self.choice.provider
        if isinstance(provider, WarmsUp) and not self._closing:
            provider.warm()

    def _start_query_embedding(self, provider: Any, text: str) -> _QueryEmbedding | None:
        """The query's embedding: answered at once on this thread when the provider can
        (:class:`~symi_memory.specs.EmbedsQueriesAtOnce`), else handed to the embedding worker; None while an earlier
        call is still hung."""
        at_once = getattr(provider, "query_at_once", None)
        # Only the object whose embed_query the worker would call: a wrapper with its own embed_query (a query
        # prefix) that hands other names to the provider it wraps (__getattr__) must not get that one's vectors.
        # A third-party provider's vector is checked as it comes (a builtin's are lists of floats).
        checked = provider if self.choice.guarded else None
        if (at_once is not None and getattr(at_once, "__self__", None) is getattr(provider.embed_query, "__self__", at_once)
                and (answered := _QueryEmbedding.answered_at_once(at_once, text, checked)) is not None):
            # No other thread, no deadline: nothing to hand over, wake or wait for.
            return answered
        self._forget_parents_workers()
        hung = self._hung_query
        if hung is not None and not hung.is_set():
            return None
        # One long-lived worker: starting a thread per search cost 1-9 ms on a loaded 2-core host.
        with self._workers_lock:
            if self._query_worker is None:  # none yet (a forked child's was forgotten above)
                self._query_worker = _Worker("symi-query-embed")
            worker = self._query_worker
        pending = _QueryEmbedding(time.monotonic())
        if checked is None:
            worker.submit(lambda: pending.run(lambda: provider.embed_query(text)))
        else:
            worker.submit(lambda: pending.run(lambda: _checked_query_vector(provider, provider.embed_query(text))))
        return pending

    def _forget_parents_workers(self) -> None:
        """In a child forked from the process that made this backend: the embedding workers' threads are the
        parent's, and so is a call of theirs still out past the deadline, which nothing here would ever end (every
        search of the child answered by keyword): new workers are started when needed, with no call held to be
        hung. ``_workers_lock`` is new as well, whichever workers the parent had (none, one or both): a parent's
        thread may have held it as it forked (starting a worker), and in the child nothing would ever release it."""
        pid = os.getpid()
        if self._workers_pid == pid:
            return
        with _WORKERS_FORGET:  # new in every child (_forget_scan_worker): two of the child's threads reset once
            if self._workers_pid == pid:
                return
            self._workers_lock = threading.Lock()
            self._query_worker, self._hung_query = None, None
            self._words_worker, self._hung_words = None, None
            self._workers_pid = pid

    def _scan_ahead(self, pending: _QueryEmbedding | None, k: int) -> _VectorScan | None:
        """This search's vector scan, handed to the scan worker once its query vector is there (chained on the
        embedding worker, or at once when the vector already is); None when the vector side cannot be searched
        on another thread, or its scan is too short to gain from it (:class:`~symi_memory.specs.SearchesOnAnyThread`)."""
        if pending is None:
            return None
        vectors = self.vectors
        kind = type(vectors)
        known = self._any_thread
        if known is None or known[0] is not kind:
            # A class that defines the protocol's members makes every instance of it one (isinstance answers so
            # from the class alone); for one that does not, only the instance can tell (as the manager asks).
            known = self._any_thread = (kind, issubclass(kind, SearchesOnAnyThread))
        if not (known[1] or isinstance(vectors, SearchesOnAnyThread)) or not vectors.worth_another_thread():  # type: ignore[attr-defined]
            return None
        scan = _VectorScan(self.vectors, self.store, k)
        pending.then(scan.start)
        return scan

    def _prepare_vectors(self, generation: Generation) -> None:
        """Bring the vector side up to date (a one-shot search loads its scan copy here) before the query
        vector is there, so the loading overlaps the embedding; a failure is left to the vector search.

        Once per vector side and index ``generation`` (the search's): the vector search asks the vector side
        again itself, and asking reads the generation (a statement); this early call only starts a load sooner,
        which a generation it already asked at needs no more."""
        vectors = self.vectors
        ready = getattr(vectors, "ready", None)
        if ready is None:
            return
        asked = self._prepared
        if asked is not None and asked[0] is vectors and asked[1] == generation:
            return
        try:
            ready()
        except Exception as exc:
            log.debug("loading the vectors ahead of the query vector failed: %s", exc)
            return
        self._prepared = (vectors, generation)

    def _finish_query_embedding(self, provider: Any, pending: _QueryEmbedding | None,
                                ) -> tuple[list[float] | None, str | None]:
        """The query vector, or None and why (the search then answers by keyword, saying so).

        The provider gets ``QUERY_EMBED_DEADLINE_S`` from the moment the query was handed over: a
        hung endpoint must not hold a search for its whole request timeout. While a call that
        missed the deadline is still running, later searches do not queue behind it; they answer
        by keyword at once.
        """
        if pending is None:
            return None, (f"{provider.id} has not answered an earlier query embedding yet; keyword results only")
        done = pending.done
        if not done.wait(max(0.0, QUERY_EMBED_DEADLINE_S - (time.monotonic() - pending.started))):
            self._hung_query = done
            why = f"query embedding by {provider.id} took longer than {QUERY_EMBED_DEADLINE_S:g} s; keyword results only"
            log.warning("%s", why)
            return None, why
        error = pending.error
        if isinstance(error, EmbeddingError):
            log.warning("query embedding failed (%s); keyword results only", error)
            return None, f"query embedding failed ({error}); keyword results only"
        if isinstance(error, Exception) and self.choice.guarded:
            # Any other exception of a third-party provider is the provider's too (its HTTP client's, a KeyError in its parsing): the search
            # answers by keyword, naming it, as for an EmbeddingError; it is never the search's failure.
            why = f"query embedding by {provider.id} failed ({type(error).__name__}: {error}); keyword results only"
            log.warning("%s", why)
            log.debug("the provider's traceback", exc_info=error)
            return None, why
        if error is not None:
            raise error
        return pending.value, None

    def candidate_vectors(self, ids: Sequence[str]) -> dict[str, Any]:
        """Stored vectors of these candidates (``StoredVectors``), read from the store, never re-embedded."""
        # Kept as candidate_line_vectors keeps line vectors: an id hashes the chunk's text and the model.
        gen = self._terms[0]
        if self._vectors_gen != gen:
            self._vectors_cache.clear()
            self._vectors_gen = gen
        cache = self._vectors_cache

        def read(missing: list[str]) -> dict[str, Any]:
            # Their line analyses come with them (the same rows): supersession asks for those next, for the
            # same candidates (candidate_line_analysis takes them from here, in this thread, once).
            blobs, lines = self.store.vectors_and_lines_by_id(missing)
            self._local.lines = lines
            if not blobs:  # a keyword-only index: no numpy to import for a one-shot search
                return {}
            import numpy as np

            return {cid: np.frombuffer(blob, dtype=np.float32) for cid, blob in blobs.items()}

        # A chunk without a vector is not kept: asked for again, so one stored later is read.
        known = _read_through(cache, ids, VECTORS_CACHE_MAX, read)
        return {cid: v for cid in ids if (v := known.get(cid)) is not None}

    def candidate_line_vectors(self, ids: Sequence[str]) -> dict[str, list[tuple[int, int, Any]]]:
        """Stored line (unit) vectors of these candidates (``StoredLineVectors``), read from the store, in line order.

        Kept for the index generation (up to ``UNITS_CACHE_MAX`` chunks): the same chunks come back search
        after search, and reading their lines' vectors again cost more than judging them.
        """
        # The generation the latest search read (ids hash text and model, so an entry never goes wrong;
        # a new generation only bounds what is kept).
        gen = self._terms[0]
        if self._units_gen != gen:
            self._units_cache.clear()
            self._units_gen = gen
        cache = self._units_cache

        def read(missing: list[str]) -> dict[str, list[tuple[int, int, Any]]]:
            got = self.store.unit_vectors_by_id(missing)
            if not got:  # a keyword-only index: no numpy to import for a one-shot search
                return {cid: [] for cid in missing}
            import numpy as np

            return {cid: [(a, b, np.frombuffer(blob, dtype=np.float32)) for a, b, blob in got.get(cid, ())]
                    for cid in missing}

        known = _read_through(cache, ids, UNITS_CACHE_MAX, read)
        return {cid: v for cid in ids if (v := known.get(cid))}

    def candidate_line_analysis(self, ids: Sequence[str]) -> dict[str, bytes]:
        """Line analyses stored when these candidates were indexed (``StoredLineAnalysis``), in one read: none when
        they all came with their vectors in this search's ``candidate_vectors`` read (this thread's, since its
        candidate rows were read)."""
        lines = getattr(self._local, "lines", None)
        self._local.lines = None
        if lines is None or any(cid not in lines for cid in ids):
            return self.store.line_analysis_by_id(ids)
        return {cid: blob for cid in ids if (blob := lines[cid]) is not None}

    def candidate_plain(self, ids: Sequence[str]) -> dict[str, bool]:
        """``StoredPlain``: the plain-chunk answers stored when these candidates were indexed
        (``supersession.plain_of_fact`` of ``chunks.plain``), of this thread's last search's candidates alone, each
        read in the row that gave the candidate its text; chunks with none (an index from before the column, not
        filled yet, or told by other rules) and ids that search did not hand out are left out."""
        kept = getattr(self._local, "plain", None)
        if kept is None:
            return {}
        from ..supersession import PLAIN_FACT

        told = PLAIN_FACT >> 1
        column, facts = kept
        n = len(ids)
        if column[:n] == tuple(ids):
            # The first candidates' ids, in order (supersession's window, most asks): their answers are the column's
            # first ones, with no look-up by id (ids are unique among a search's candidates).
            pairs = zip(ids, facts[:n], strict=True)
        else:
            pairs = zip(ids, map(dict(zip(column, facts, strict=True)).get, ids), strict=True)
        return {cid: bool(fact & 1) for cid, fact in pairs if fact is not None and fact >> 1 == told}

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]] | None:
        """Embed ``texts`` with the index's provider (dedup on write compares lines by meaning); None without one."""
        provider = self.choice.provider
        if provider is None or self.indexer.needs_full():
            return None
        return provider.embed_documents(list(texts))

    def _chunk_terms(self, rows: dict[int, CandidateRow], generation: Generation | None, terms: Sequence[str],
                     ) -> dict[int, tuple[dict[str, int], int]]:
        """Frequencies of the query's ``terms`` (the absent ones left out) and length of each candidate chunk.

        Each chunk's terms are kept for the index generation by rowid, as one string
        (:func:`~.analysis.term_string`): a ``Counter`` per chunk took 130 MB after a few hundred
        searches of a 100k-chunk index.
        """
        gen = self.store.generation_key() if generation is None else generation
        kept = self._terms
        if kept[0] != gen:
            # A new dict, not the kept one emptied: another thread's search may be counting from it. Kept only by a
            # search of the current generation: one that began before a write landed (serve's threads) would
            # otherwise label the newer text's terms as its older generation's, for the searches after it.
            kept = (gen, {})
            if generation is None or self.store.generation_key() == gen:
                self._terms = kept
        if not _SEARCH_IMPORTED:
            _import_search_path()
        cache = kept[1]
        wanted = needles(terms)
        indexed = self._indexed_term_counts(rows, terms, gen)
        # Each counted chunk's counts and its text's length (in C, a column at a time).
        out = dict(zip(indexed, zip(indexed.values(), map(len, map(_TEXT, map(rows.__getitem__, indexed))),
                                      strict=True), strict=True))
        fresh: dict[int, tuple[str, int]] = {}
        for k in filterfalse(out.__contains__, rows) if len(out) < len(rows) else ():
            got = cache.get(k)
            if got is None:
                text = rows[k].text
                got = fresh[k] = (term_string(text), len(text))
            out[k] = (counts_in(got[0], wanted), got[1])
        if not rows:
            return out
        if self.store.moved(gen):
            self._local.overtaken = True
            # A write landed after this search read the generation: it may have given a rowid new text, which rows
            # read since carry. Their terms are not kept as the older generation's (another search of it, its rows
            # read before the write, would count its words from the newer text's terms), and the terms kept for it
            # are the older text's: each row is counted from the text it carries, the text this search shows.
            for k, row in rows.items():
                if k not in indexed and k not in fresh:
                    out[k] = (counts_in(term_string(row.text), wanted), len(row.text))
        elif fresh:  # unchanged: the rows, read before, are that generation's text
            if len(cache) + len(fresh) > TERMS_CACHE_MAX:
                cache.clear()
            cache.update(fresh)
        return out

    def _indexed_term_counts(self, rows: dict[int, CandidateRow], terms: Sequence[str],
                             generation: Generation) -> dict[int, dict[str, int]]:
        """Counts of ``terms`` in candidates read from FTS5's index, when that costs less than tokenizing the
        ones the term cache does not hold and counting in the others (rare terms); the chunks left out of
        the answer are counted by the caller.

        Only chunks without a CJK run, too short to hold a token FTS5 cuts, are read this way: the ``text``
        column holds exactly the tokens :func:`~.analysis.term_string` makes of them (it adds CJK bigrams,
        which the index keeps in another column). The counts are kept only when the index generation is
        still the one the candidate rows were read at.
        """
        if not terms:
            return {}
        if not _SEARCH_IMPORTED:
            _import_search_path()
        texts = list(map(_TEXT, rows.values()))
        lengths = list(map(len, texts))
        if all(map(str.isascii, texts)) and max(lengths, default=0) < FTS_MAX_TOKEN_BYTES:
            eligible = list(rows)  # every text ASCII and short (most searches): each passes the test below
        else:
            cjk = CJK_RUN_RE.search
            eligible = [k for k, text in zip(rows, texts, strict=True)  # (texts by index)
                        if (len(text) < FTS_MAX_TOKEN_BYTES and text.isascii())
                        or (len(text) < FTS_MAX_TOKEN_BYTES // 4 and cjk(text) is None)]
        if not eligible:
            return {}
        occurrences = self.store.term_occurrences(terms, generation)
        if occurrences is None:
            return {}
        present = [t for t, n in occurrences.items() if n]  # a term no chunk holds needs no read
        cost = FTS_COUNT_FIXED_CHARS + (sum(occurrences.values()) * FTS_COUNT_CHARS_PER_OCCURRENCE
                                        + len(present) * FTS_COUNT_CHARS_PER_TERM if present else 0)
        cache = self._terms[1]
        # What counting in the candidates would cost (a kept chunk's terms FTS_COUNT_CACHED_CHARS, another its text's
        # length), against the read's cost: summed over all of them in C (the read is chosen at the cost or more).
        if len(eligible) != len(texts):
            lengths = list(map(len, map(_TEXT, map(rows.__getitem__, eligible))))
        cached = list(map(cache.__contains__, eligible)) if cache else None
        if cached is not None and any(cached):
            saved = sum(compress(lengths, map(not_, cached))) + FTS_COUNT_CACHED_CHARS * sum(cached)
        else:
            saved = sum(lengths)
        if saved < cost:
            return {}  # common terms: counting in the candidates' text costs less
        # A rare term's counts are read for every chunk holding it and kept for the generation (any later
        # candidate's count is there); a common term's for these candidates only, not kept (sets of the chunks
        # asked about, kept per term, cost more than they saved at 100k chunks, where chunks seldom come back).
        kept = self._postings
        if kept[0] != generation:
            kept = self._postings = (generation, {}, [0])
        known = kept[1]
        postings: list[tuple[str, dict[int, int]]] = []
        fresh: list[tuple[str, dict[int, int]]] = []
        for t in present:
            docs = known.get(t)
            if docs is None:
                whole = occurrences[t] <= FTS_COUNT_WHOLE_MAX
                docs = self.store.term_docs(t, None if whole else eligible)
                if docs is None:
                    return {}
                if whole:
                    fresh.append((t, docs))
            postings.append((t, docs))
        if self.store.moved(generation):
            return {}  # a write landed meanwhile: the rows' text may not be what FTS5 holds now
        for t, docs in fresh:  # counts of this generation (checked above)
            # A term counts once at least: one in the cjk column only (a CJK bigram) is kept with no counts.
            size = len(docs) or 1
            if kept[2][0] + size > POSTINGS_CACHE_MAX:
                kept = self._postings = (generation, {}, [0])
            if size <= POSTINGS_CACHE_MAX:
                kept[1][t] = docs
                kept[2][0] += size
        # As store.term_counts gives them: each chunk's terms in the query's order, the absent ones left out.
        out: dict[int, dict[str, int]] = {k: {} for k in eligible}
        wanted = out.keys()
        for t, docs in postings:
            if docs:
                # out[k][t] = docs[k] of each chunk asked about that holds the term, in C (the set is iterated twice
                # in one order).
                held = docs.keys() & wanted
                deque(map(setitem, map(out.__getitem__, held), repeat(t), map(docs.__getitem__, held)), maxlen=0)
        return out

    def calibration(self) -> ScoreCalibration:
        """The active provider's declared cosine calibration (the documented default when it declares none).

        With ``chunking.units = "off"`` no line vectors take part: the provider's chunk-vector fit.
        """
        provider = self.choice.provider
        if provider is None:
            return DEFAULT_CALIBRATION
        plugins = self.indexer.plugins
        spec = plugins.providers.get(provider.id) if plugins is not None else None
        if spec is None:
            return DEFAULT_CALIBRATION
        line_aware = self.agent.memory_search["chunking"].get("units", "lines") != "off"
        return spec.calibration_for(provider.model, line_aware=line_aware)

    def _keyword_rows(self, ranked: list[tuple[int, float]], limit: int, sources: tuple[str, ...], *,
                      vectors: bool, epoch: tuple[Generation, int] | None, vec_hits: dict[int, float] | None = None,
                      deeper: Callable[[int], list[tuple[int, float]]] | None = None) -> _KeywordRows:
        """Rows of the first ``limit`` keyword hits from ``sources``, looking further down the ranking while other
        sources took some of those places (``vectors``: with their stored vectors), read before the vector hits are
        there (:meth:`_candidate_rows` then reads theirs), or with theirs (``vec_hits``: once they are there, all in
        one read, their vectors not read).

        ``epoch``: the store's :meth:`~.meta.MetaRows.search_epoch` this search read, which rows without vectors
        are kept for (:meth:`_rows`).

        ``deeper(n)``: the first ``n`` keyword hits. When the ranking filled every place and pieces of one long line
        (several candidates citing the same lines) hold some of them, the hits further down that cite other lines are
        added (up to :data:`LINE_PIECES_REACH` times ``limit`` hits looked at) until the candidates cite ``limit``
        ranges: the pieces are collapsed to one result after retrieval, and the other notes need their places."""
        self._local.lines = None  # line analyses handed over by an earlier search's candidate_vectors: not these
        head = list(map(itemgetter(0), ranked[:limit]))
        hits = vec_hits or {}
        rows = self._rows([*hits, *head], sources, vectors=vectors, scored=hits, epoch=epoch)
        keyword_ids = list(filter(rows.__contains__, head))
        further: dict[int, CandidateRow] = {}
        appended: list[int] = []
        if len(keyword_ids) < limit and len(ranked) > limit:
            # Other sources took some of the top places: look further down the keyword ranking.
            rest = [k for k, _ in ranked[limit:]]
            further = self._rows(rest, sources, vectors=vectors, scored=hits, epoch=epoch)
            for k in rest:
                if len(keyword_ids) >= limit:
                    break
                if k in further:
                    keyword_ids.append(k)
                    appended.append(k)
        if deeper is not None and len(ranked) >= limit and keyword_ids:
            self._past_line_pieces(ranked, limit, sources, rows, further, appended, keyword_ids, deeper,
                                   vectors=vectors, scored=hits, epoch=epoch)
        return _KeywordRows(head=head, rows=rows, further=further, appended=appended, keyword_ids=keyword_ids,
                            hits=vec_hits)

    def _past_line_pieces(self, ranked: list[tuple[int, float]], limit: int, sources: tuple[str, ...],
                          rows: dict[int, CandidateRow], further: dict[int, CandidateRow], appended: list[int],
                          keyword_ids: list[int], deeper: Callable[[int], list[tuple[int, float]]], *, vectors: bool,
                          scored: dict[int, float], epoch: tuple[Generation, int] | None) -> None:
        """Add to ``keyword_ids`` (and ``appended``, their rows to ``further``) the keyword hits past ``ranked`` that
        cite lines none of the candidates cites, until ``limit`` ranges are cited (:meth:`_keyword_rows`)."""
        # Only a line's middle pieces cite the same lines as another chunk (that line alone): most searches have no
        # candidate citing a single line twice, and end here.
        found = list(map(rows.get, keyword_ids)) if not further else [
            rows[k] if k in rows else further[k] for k in keyword_ids]
        single = [(r.path, r.start_line) for r in found if r is not None and r.start_line == r.end_line]
        repeats = len(single) - len(set(single))
        if not repeats:
            return
        cited = {(r.path, r.start_line, r.end_line) for r in found if r is not None}
        looked = {k for k, _ in ranked}
        rest = [k for k, _ in deeper(limit * LINE_PIECES_REACH) if k not in looked]
        step = max(limit, 2 * repeats)
        for start in range(0, len(rest), step):
            part = rest[start:start + step]
            got = self._rows(part, sources, vectors=vectors, scored=scored, epoch=epoch)
            for k in part:
                row = got.get(k)
                if row is None or (key := (row.path, row.start_line, row.end_line)) in cited:
                    continue
                cited.add(key)
                further[k] = row
                keyword_ids.append(k)
                appended.append(k)
                if len(cited) >= limit:
                    return

    def _candidate_rows(self, keyword: _KeywordRows, vec_hits: dict[int, float], sources: tuple[str, ...], *,
                        vectors: bool = False, epoch: tuple[Generation, int] | None = None,
                        ) -> tuple[dict[int, CandidateRow], list[int]]:
        """Rows of the vector hits and of the keyword candidates (:meth:`_keyword_rows`), in the order one read of
        them all gives (``vectors``: the vector hits' rows with their vectors, as the store reads them: none, the
        vector side has their cosine), and the keyword candidates' rowids.

        The vector hits the keyword side has no row of are read here (a hit from another source again: none); the
        rest are the keyword side's rows (a row is the same read with or without its vector)."""
        known = {**keyword.further, **keyword.rows} if keyword.further else keyword.rows
        missing = list(filterfalse(known.__contains__, vec_hits))
        if (not missing and keyword.hits is vec_hits and not keyword.further
                and len(vec_hits) + len(keyword.head) <= ROWS_READ_PART):
            # Read with these vector hits, all found (most searches): the keyword side's rows are already in the order
            # below (:meth:`_rows` gives the rows of up to ROWS_READ_PART rowids in rowid order).
            return keyword.rows, keyword.keyword_ids
        if missing:
            known = {**known, **self._rows(missing, sources, vectors=vectors, scored=vec_hits, epoch=epoch)}
        # In the order one read of the vector hits, then the first keyword hits, gives (the store reads 500 rowids
        # per statement and gives each statement's rows in rowid order), then the keyword hits from further down.
        ids = list(vec_hits) + keyword.head
        rows: dict[int, CandidateRow] = {}
        for i in range(0, len(ids), ROWS_READ_PART):
            for k in sorted(set(ids[i : i + ROWS_READ_PART])):
                if k not in rows and (r := known.get(k)) is not None:
                    rows[k] = r
        for k in keyword.appended:
            rows[k] = keyword.further[k]
        return rows, keyword.keyword_ids

    def _rows(self, rowids: list[int], sources: tuple[str, ...], *, vectors: bool, scored: dict[int, float],
              epoch: tuple[Generation, int] | None) -> dict[int, CandidateRow]:
        """``store.candidate_rows`` of these chunks, the same rows (up to ``ROWS_READ_PART`` rowids: in rowid order, as
        one read gives them; more: in no set order, :meth:`_candidate_rows` orders them), kept for the ``epoch``.

        A search's candidates are about 140 chunks, and the same chunks come back search after search (on the
        10k bench store two of three candidates were candidates of an earlier search): a row kept for the
        index generation and the count of mtime updates (``touches``) is what the store would read again.
        Rows with vectors, and the rows of an index of more than ``ROWS_CACHE_MAX`` chunks, are always read.
        """
        if vectors or epoch is None or self.store.chunks_at(epoch[0]) > ROWS_CACHE_MAX:
            return self.store.candidate_rows(rowids, sources, vectors=vectors, scored=scored)
        kept_epoch, cache, kept_sources = self._rows_kept
        if kept_epoch != epoch:
            cache, kept_sources = {}, set()
            self._rows_kept = (epoch, cache, kept_sources)
            self._rows_chars = 0
        # Each rowid once: up to a statement's rowids in rowid order (as the store gives them), more in the order asked.
        order = sorted(set(rowids)) if len(rowids) <= ROWS_READ_PART else list(dict.fromkeys(rowids))
        kept = list(map(cache.get, order))  # a row is true, one not kept None
        found = list(filter(None, kept))
        got: dict[int, CandidateRow] = {}
        if len(found) != len(kept):
            # From every source: the rows serve any search. With the epoch they were read at, in the same statement.
            got, read_at = self.store.candidate_rows_at(list(compress(order, map(not_, kept))))
            if read_at == epoch:  # not a newer index's rows under this epoch
                chars = sum(map(len, map(_TEXT, got.values())))
                keep = cache
                if len(cache) + len(got) > ROWS_CACHE_MAX or self._rows_chars + chars > ROWS_CACHE_CHARS:
                    # This search's kept rows are taken out before the kept rows start again: emptied, they went
                    # missing from its answer.
                    cache = {k: v for k in rowids if (v := keep.get(k)) is not None}
                    keep.clear()
                    self._rows_chars = 0
                if len(got) <= ROWS_CACHE_MAX and chars <= ROWS_CACHE_CHARS:
                    self._rows_chars += chars
                    # Kept as the store made them, handed out again as they are: made again from plain tuples (which
                    # the garbage collector stops tracking) for each search, the ~180 rows of a search at 10k chunks
                    # cost about 0.07 ms more (each new row touches every string it holds), against 3-6 us a search
                    # of collector time the tracked rows add (1,500 searches of the 10k bench store, 10,000 rows kept).
                    # Their sources first: a search on another thread that finds one of them in the kept rows
                    # then finds its source among the kept rows' sources.
                    kept_sources.update(map(_SOURCE, got.values()))
                    keep.update(got)
                    if cache is keep:  # every row is kept now
                        # This search's rows are those it found kept and those it read (not looked up in the kept rows
                        # again: another thread's search may have started them again since).
                        kept = [r or got.get(k) for k, r in zip(order, kept, strict=True)]
                        found = list(filter(None, kept))
                        got = {}
        if not got:  # every row kept (most searches at 10k chunks)
            if kept_sources.issubset(sources):
                # No kept row is of another source: the rows are those kept.
                keys = order if len(found) == len(kept) else list(compress(order, kept))
                return dict(zip(keys, found, strict=True))
            return {k: r for k, r in zip(order, kept, strict=True) if r is not None and r.source in sources}
        out: dict[int, CandidateRow] = {}
        for k in order:
            r = got.get(k)
            if r is None:
                r = cache.get(k)
                if r is None:
                    continue
            if r.source not in sources:
                continue
            out[k] = r
        return out

    # ----------------------------------------------------------------- other

    def read_file(self, path: str, *, from_line: int | None = None, lines: int | None = None) -> ReadResult:
        rules = PathRules.from_workspace(self.agent.workspace, self.agent.memory_search.get("extraPaths") or [])
        return rules.read(path, from_line=from_line, lines=lines)

    def status(self) -> dict[str, Any]:
        """What the index holds and how it stands. Never fails on a damaged index file: damage status meets (its
        counts read every table) is recorded as a search records it (``<index>.damaged``, the next sync sets the
        file aside and rebuilds), and reported (``dirty``, ``lastError``); what cannot be read then is None."""
        try:
            return self._status()
        except DAMAGE_ERRORS as exc:
            found = exc
        if self.store.replaced():
            # Another process already set this damaged file aside and opened a fresh one: read the file now in place.
            self.store.reopen()
            try:
                return self._status()
            except DAMAGE_ERRORS as exc:
                found = exc
        self.store.note_damaged(found)
        if self.scheduler:
            self.scheduler.mark_dirty("damaged")
        return self._status(damaged=True)

    def _status(self, *, damaged: bool = False) -> dict[str, Any]:
        """:meth:`status`; with ``damaged`` (the index file is known damaged), a part that cannot be read is None
        (counts) or left out (the last sync, warnings) instead of failing the whole.

        Its reads see one snapshot of the index: read in separate statements, another process's sync committing
        between the counts and the comparison with the files on disk made it say ``dirty: false`` beside the
        counts from before that sync (and ``files`` from before beside ``chunks`` from after)."""
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(self.store.read_snapshot())
            except DAMAGE_ERRORS:
                if not damaged:
                    raise
                # A file that is not a database any more: no connection to it opens, so no snapshot; each part
                # says what it cannot read, as before the snapshot was taken (status answers, it does not raise).
            return self._status_of_snapshot(damaged=damaged)

    def _status_of_snapshot(self, *, damaged: bool) -> dict[str, Any]:
        def part(read: Callable[[], Any], instead: Any) -> Any:
            if not damaged:
                return read()
            try:
                return read()
            except DAMAGE_ERRORS:
                return instead

        ms = self.agent.memory_search
        counts = part(self.store.counts, {"files": None, "chunks": None, "sourceCounts": {}, "invalidUtf8Files": None,
                                          "cacheEntries": None, "unitVectors": None, "skipped": []})
        p = self.choice.provider
        cache = ms["cache"]
        # The files against the index, whoever synced it: this process's watcher saying "dirty" (as it does from
        # its start until its first sync) proves nothing once another process's sync, or none needed, left the
        # index current.
        scanned = scan_sources(self.agent, {})  # listed once, for dirty and the warnings
        dirty = part(lambda: self.is_stale(scanned=scanned), True)
        recorded = part(self.indexer.last_sync, None) or {}
        last_error = part(lambda: self.indexer.reported_error(recorded or None), None)
        disk_error = part(self._disk_error_now, None)
        if disk_error is not None:
            last_error = disk_error
        if self.store.read_only():
            last_error = str(self.store.read_only_error())
        damage = self.store.damaged()
        if damage is not None:
            dirty = True
            last_error = (f"the index file is damaged ({damage}); the next sync sets it aside and rebuilds it "
                          "from the memory files (`symi-memory index`)")
        vector_side = part(self.vectors.status, {})
        if last_error is None and vector_side.get("error"):
            last_error = str(vector_side["error"])  # a vector side of its own (faiss) that cannot rebuild or save
        fallback = self.choice.fallback.to_dict() if self.choice.fallback else None
        ident = part(self._index_identity, {})
        if fallback is None and recorded.get("fallback") and ident.get("provider") == recorded.get("provider") and (
                ident.get("provider") != (p.id if p else "none")):
            # This process has not tried its provider yet, but the index was built by the fallback
            # an earlier sync switched to: that is the fallback in force for what search finds.
            fallback = dict(recorded["fallback"])
        pending = part(self.store.pending_count, 0)
        return {
            "backend": self.short_name,
            "plugin": self.plugin_name,
            "files": counts["files"],
            "chunks": counts["chunks"],
            "dirty": dirty,
            "pendingFiles": pending,
            "pendingReason": (last_error or "waiting for the embedding provider") if pending else None,
            "index": {"provider": ident.get("provider"), "model": ident.get("model") or None,
                      "lastSync": recorded.get("reason")},
            "workspaceDir": printable_path(str(self.agent.workspace)),
            "dbPath": printable_path(str(self.store.path)),
            "provider": p.id if p else "none",
            "model": p.model if p else None,
            "requestedProvider": self.choice.requested,
            "providerReason": self.choice.reason,
            "sources": list(ms.get("sources") or []),
            "extraPaths": [printable_path(str(p)) for p in ms.get("extraPaths") or []],
            "sourceCounts": counts["sourceCounts"],
            "invalidUtf8Files": counts["invalidUtf8Files"],
            "skipped": counts["skipped"],
            "partial": [{"path": p, "reason": why} for p, why in sorted(part(self.indexer.partial_files, {}).items())],
            "cache": {"enabled": cache["enabled"], "entries": counts["cacheEntries"], "maxEntries": cache["maxEntries"]},
            "fts": {"enabled": True, "available": self.store.fts_error is None, "error": self.store.fts_error},
            "vector": {
                "enabled": ms["store"]["vector"]["enabled"],
                "available": self.store.vec.available,
                "extensionPath": self.store.vec.path,
                "loadError": self.store.vec.error,
                "dims": self.store.vec_dims or part(self._dims, None),
                **{f"exact{k.title()}": v for k, v in vector_side.items()},
            },
            "fallback": fallback,
            "batch": {"enabled": _batch_enabled(ms), **self._batch_status()},
            "synonyms": part(self._synonyms_status, {"enabled": bool(ms["query"]["hybrid"]["synonyms"]["enabled"]),
                                                     "active": False, "reason": "the index file is damaged"}),
            "build": self._build_status(),
            "lastError": last_error,
            # The workspace, extra paths, folders and indexed files that cannot be listed or read now, as a sync says
            # them: what the index holds from them stays searchable meanwhile. On a damaged index only the indexed
            # files the last sync could not read (which the index lists) go unnamed: the rest is read from the disk.
            "warnings": part(lambda: self.indexer.away_warnings(scanned), [r.warning for r in scanned[1]]),
        }

    def _build_status(self) -> dict[str, Any]:
        """The full build of this index running now, in this process or another (:func:`.rebuild.running_build`)."""
        found = self.store.running_build()
        if found is None:
            return {"running": False, "pid": None, "thisProcess": False, "elsewhere": False, "startedAt": None,
                    "fileBytes": None}
        started = None
        if found.started_at is not None:
            started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(found.started_at))
        return {"running": True, "pid": found.pid, "thisProcess": found.this_process, "elsewhere": found.elsewhere,
                "startedAt": started, "fileBytes": found.size}

    def _synonyms_status(self) -> dict[str, Any]:
        """Whether local synonyms expand queries on this index, with how many word vectors, or why not."""
        from .synonyms import Vocabulary, min_cosine

        settings = self.agent.memory_search["query"]["hybrid"]
        p = self.choice.provider
        theta, source = min_cosine(p, settings["synonyms"])
        words = Vocabulary(self.store).words(p) if p is not None else 0
        reason = None if theta is not None else source
        if theta is not None and not settings["enabled"]:
            reason = "keyword search is off (query.hybrid.enabled = false)"
        elif theta is not None and not settings["synonyms"]["maxWords"]:
            reason = "maxWords is 0"
        elif theta is not None and not words:
            reason = "no word vectors yet (the next sync makes them)"
        return {"enabled": bool(settings["synonyms"]["enabled"]), "active": reason is None,
                "minCosine": theta, "minCosineSource": source if theta is not None else None,
                "words": words, "maxWords": int(settings["synonyms"]["maxWords"]), "reason": reason}

    def _index_identity(self) -> dict[str, Any]:
        """Which provider and model built the vectors in the index (empty before the first sync)."""
        try:
            raw = json.loads(self.store.get_meta("identity") or "{}")
        except ValueError:
            return {}
        return raw if isinstance(raw, dict) else {}

    def _batch_status(self) -> dict[str, Any]:
        p = self.choice.provider
        return dict(p.batch_status()) if isinstance(p, BatchingProvider) else {}

    def _dims(self) -> int | None:
        return self.store.vector_dims()

    def close(self) -> None:
        # Stop a running sync at its next file first, then the threads, then wait for the sync,
        # so nothing is closed under it.
        self._closing = True
        self.indexer.cancel.set()
        if self._sync_thread == threading.get_ident():
            # From inside this thread's sync (its progress callback, a signal handler): waiting for the sync would
            # wait for ourselves. It stops at its next step and closes as it returns.
            self._close_after_sync = True
            return
        self._finish_close()

    def _finish_close(self) -> None:
        if self.scheduler:
            self.scheduler.stop()
        with self._sync_lock:
            pass
        self._forget_parents_workers()  # closed in a forked child: its workers are none of the parent's threads
        with self._workers_lock:
            workers = [w for w in (self._query_worker, self._words_worker) if w is not None]
        for worker in workers:
            worker.stop(QUERY_EMBED_DEADLINE_S)
        if self.choice.provider is not None:
            close_plugin_object(self.choice.provider, f"embedding provider {self.choice.requested!r}")
        if isinstance(self.vectors, Closeable):  # a vector side with its own files (faiss) saves them here
            self.vectors.close()
        self.store.close()


@attrs.define
class _KeywordRows:
    """The keyword side's candidate rows (:meth:`IndexedBackend._keyword_rows`)."""

    head: list[int]  # the first `limit` keyword hits
    rows: dict[int, CandidateRow]  # the rows of those from the sources asked for (and of the vector hits, if given)
    further: dict[int, CandidateRow]  # rows of the keyword hits further down, when some were read
    appended: list[int]  # those of them that are keyword candidates, in keyword order
    keyword_ids: list[int]  # the keyword candidates, in keyword order
    hits: dict[int, float] | None = None  # the vector hits read with them (``vec_hits``), if any

    def candidates(self) -> dict[int, CandidateRow]:
        """The keyword candidates' rows."""
        rows, further = self.rows, self.further
        return {k: rows[k] if k in rows else further[k] for k in self.keyword_ids}


class _Done:
    """Set once, by one thread; waited for, with a timeout, by others: what a search asks of a
    ``threading.Event``, which (a ``Condition`` over a lock, in Python) cost about 9 us more of CPU to make, set
    and wait for. A lock held from the start until set."""

    __slots__ = ("_held", "_set")

    def __init__(self) -> None:
        self._held = threading.Lock()
        self._held.acquire()
        self._set = False

    def set(self) -> None:
        """Mark it set (once: the one thread that sets it calls this once)."""
        self._set = True
        self._held.release()

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float) -> bool:
        """True once set (at once when it is), False when ``timeout`` seconds passed first (a timeout of 0 or
        less: not waited for, as ``threading.Event.wait``)."""
        if self._set:
            return True
        if self._held.acquire(timeout=timeout if timeout > 0 else 0):
            self._held.release()  # for any other waiter
            return True
        return False


def _checked_query_vector(provider: Any, value: Any) -> Any:
    """``value``, what ``provider.embed_query`` returned, when it is a flat, non-empty sequence of numbers (a list of
    floats as it is, anything else as a list of floats); else an :class:`EmbeddingError` naming the provider."""
    if type(value) is list and value and type(value[0]) is float:
        return value  # what providers give: the values are looked at once, with the NaN check
    try:
        out = [float(x) for x in value]
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(f"{provider.id} returned a query vector that is not a list of numbers "
                             f"({type(value).__name__}: {exc})", provider=provider.id) from None
    if not out:
        raise EmbeddingError(f"{provider.id} returned an empty query vector", provider=provider.id)
    return out


class _QueryEmbedding:
    """A query handed to the embedding worker.

    ``done`` is set once the provider has returned (``value``) or raised (``error``); ``started`` is when the
    query was handed over (the deadline counts from it). :meth:`then` chains work on the vector: the embedding
    worker runs it as soon as the provider returns, before setting ``done``.
    """

    def __init__(self, started: float) -> None:
        self.started = started
        self.done = _Done()
        self.value: Any = None
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._returned = False
        self._then: Callable[[Any], None] | None = None

    @classmethod
    def answered_at_once(cls, ask: Callable[[str], Any], text: str, checked: Any = None) -> _QueryEmbedding | None:
        """The embedding of ``text`` as the provider's ``query_at_once`` gives it, on this thread: one that has
        returned (or raised an :class:`EmbeddingError`), or None when the provider cannot answer it at once.

        Another exception (a bug of the shortcut: a KeyError from its table) does not fail a search that
        ``embed_query`` may answer: it is logged and the query goes to the worker. With ``checked`` (a third-party
        provider), a vector that is not a flat list of numbers is that provider's :class:`EmbeddingError`."""
        self = cls(0.0)
        try:
            value = ask(text)
            if checked is not None and value is not None and not (
                    type(value) is list and value and type(value[0]) is float):
                value = _checked_query_vector(checked, value)
        except EmbeddingError as exc:  # taken as embed_query's: the search answers by keyword, saying why
            self.error = exc
        except Exception as exc:
            log.warning("query_at_once raised %s: %s; the query is embedded by embed_query", type(exc).__name__, exc)
            return None
        else:
            if value is None:
                return None
            self.value = value
        self._returned = True
        self.done.set()
        return self

    def run(self, embed: Callable[[], Any]) -> None:
        """The embedding worker's job: ``embed()``, then what :meth:`then` chained on its vector."""
        try:
            self.value = embed()
        except BaseException as exc:  # handed to the waiting thread
            self.error = exc
        with self._lock:
            self._returned = True
            then, self._then = self._then, None
        try:
            if then is not None and self.error is None:
                then(self.value)
        finally:
            self.done.set()

    def then(self, fn: Callable[[Any], None]) -> None:
        """Call ``fn(vector)`` once the provider has returned the vector: on the embedding worker, or at once on
        this thread when it already has; never when it raised. ``fn`` must not raise, nor wait."""
        with self._lock:
            if not self._returned:
                self._then = fn
                return
        if self.error is None:
            fn(self.value)


class _VectorScan:
    """One search's vector scan, run on the scan worker (:func:`_hand_off`) as soon as its query vector is there,
    while the searching thread runs the keyword side; or on the searching thread when the worker is busy with
    another search's scan, or no core is free for it (:func:`_core_free`)."""

    def __init__(self, vectors: Any, store: IndexStore, k: int) -> None:
        self.vectors = vectors
        self.store = store
        self.k = k
        self._query: Any = None
        self._future: Any = None
        self._cancelled = False

    def start(self, query: Any) -> None:
        """Hand the scan of ``query`` to the scan worker if it is free (on the embedding worker, or the searching
        thread); never raises, never waits."""
        try:
            if self._cancelled or query is None or not any(query):
                return
            self._query = query
            self._future = _hand_off(lambda: self._scan(query))
        except Exception as exc:  # the searching thread scans instead
            log.debug("vector scan not handed off: %s", exc)

    def _scan(self, query: Any) -> tuple[list[tuple[int, float]], Any]:
        """On the scan worker: the scan, and what it left for the searching thread (rescoring reads it)."""
        self.store.searching()  # the worker reads stored vectors with a searching connection's page cache too
        hits = self.vectors.search(query, self.k)
        return hits, self.vectors.search_state()

    def cancel(self) -> None:
        """The search goes on without this vector (it came after the deadline): a scan not started is not."""
        self._cancelled = True

    def hits(self, query: Any, meanwhile: Callable[[], None] | None = None) -> list[tuple[int, float]]:
        """The scan's answer for ``query``, on the searching thread: the worker's (what it raised is raised here),
        or scanned here when the worker did not take it. ``meanwhile``: work for this thread while the worker
        is still scanning (an error there is logged: the search goes on without it)."""
        future = self._future
        if future is None or self._query is not query:
            return self.vectors.search(query, self.k)  # type: ignore[no-any-return]
        if meanwhile is not None and not future.done():
            try:
                meanwhile()
            except Exception as exc:
                log.debug("work while the scan ran failed: %s", exc)
        hits, state = future.result()
        self.vectors.adopt_search_state(state)
        return hits  # type: ignore[no-any-return]


#: The scan worker: one thread per process that runs a hybrid search's vector scan while the searching thread
#: runs the keyword side (faiss and SQLite release the GIL). One thread: a search that finds it busy (another
#: search's scan, in a server answering several at once) scans on its own thread, as before, so no search
#: waits for another's scan.
_SCAN_POOL: Any = None
_SCAN_FREE = threading.Lock()  # held from a hand-off until the worker has finished that scan
_SCAN_POOL_INIT = threading.Lock()
_WORKERS_FORGET = threading.Lock()  # an IndexedBackend forgetting its parent's embedding workers in a forked child
_SCAN_CPUS: int | None = None
#: A scan goes to the worker only while the host's 1-minute load average is under this many runnable threads per
#: CPU the process may use: the overlap needs a free core. At 100k bench chunks, with a core free (the bench at
#: real-time priority) the hand-off made a search 0.85x as long for 1.05x the process CPU; on a 2-core host
#: already running two busy processes (load 2) it made it 1.08x as long for 1.08x the CPU.
HAND_OFF_MAX_LOAD_PER_CPU = 1.0
HAND_OFF_LOAD_EVERY_S = 1.0  # the load average is read at most this often
_SCAN_LOAD: tuple[float, bool] = (-1e9, False)  # (when read, whether a core was free then)


def _scan_cpus() -> int:
    """How many CPUs this process may run on (read once; again in a forked child)."""
    global _SCAN_CPUS
    if _SCAN_CPUS is None:
        from .vectors import usable_cpus

        _SCAN_CPUS = usable_cpus()
    return _SCAN_CPUS


def _core_free() -> bool:
    """True when this process may run on two CPUs or more and the host's load average leaves one free
    (:data:`HAND_OFF_MAX_LOAD_PER_CPU`; read at most every :data:`HAND_OFF_LOAD_EVERY_S`)."""
    global _SCAN_LOAD
    cpus = _scan_cpus()
    if cpus < 2:
        return False
    now = time.monotonic()
    when, free = _SCAN_LOAD
    if now - when >= HAND_OFF_LOAD_EVERY_S:
        try:
            free = os.getloadavg()[0] < HAND_OFF_MAX_LOAD_PER_CPU * cpus
        except (AttributeError, OSError):
            free = True
        _SCAN_LOAD = (now, free)
    return free


def _hand_off(job: Callable[[], Any]) -> Any:
    """A future of ``job()`` run on the scan worker, or None when the worker is busy, this process may use one
    CPU only or the host's load leaves no core free (:func:`_core_free`: nothing would run alongside), or the
    interpreter is exiting (no new work is taken then)."""
    global _SCAN_POOL
    if not _core_free() or not _SCAN_FREE.acquire(blocking=False):
        return None
    free = _SCAN_FREE

    def run() -> Any:
        try:
            return job()
        finally:
            free.release()

    try:
        if _SCAN_POOL is None:
            from concurrent.futures import ThreadPoolExecutor

            with _SCAN_POOL_INIT:
                if _SCAN_POOL is None:
                    _SCAN_POOL = ThreadPoolExecutor(1, thread_name_prefix="symi-vector-scan")
        return _SCAN_POOL.submit(run)
    except BaseException:  # RuntimeError once the interpreter is exiting: the searching thread scans
        free.release()
        return None


def _forget_scan_worker() -> None:
    """In a forked child: the parent's scan worker does not exist there (a scan handed to it would never run), and
    a lock a parent thread held stays held: a new worker, new locks and the child's own CPU count."""
    global _SCAN_POOL, _SCAN_FREE, _SCAN_POOL_INIT, _SCAN_CPUS, _SCAN_LOAD, _WORKERS_FORGET
    _SCAN_POOL = None
    _SCAN_FREE, _SCAN_POOL_INIT, _WORKERS_FORGET = threading.Lock(), threading.Lock(), threading.Lock()
    _SCAN_CPUS, _SCAN_LOAD = None, (-1e9, False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_scan_worker)


class _Worker:
    """A daemon thread running submitted callables one after another (started on first use)."""

    def __init__(self, name: str) -> None:
        import queue

        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=name)
        self._thread.start()
        self._pid = os.getpid()

    def here(self) -> bool:
        """False in a child forked after the thread started: the thread does not exist there (jobs would wait
        forever); the owner starts a new worker."""
        return self._pid == os.getpid()

    def submit(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)

    def call(self, fn: Callable[[], Any]) -> tuple[threading.Event, dict[str, Any]]:
        """Run ``fn`` on this thread; the event is set once it has returned, with its result in the dict
        under ``"value"``, or what it raised under ``"error"`` (for the waiting thread to raise)."""
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["value"] = fn()
            except BaseException as exc:  # handed to the waiting thread
                box["error"] = exc
            finally:
                done.set()

        self.submit(run)
        return done, box

    def stop(self, timeout: float) -> None:
        """End the thread once the jobs already submitted are done, waiting up to ``timeout`` for it.

        Waiting matters at exit: a native library's threads (ONNX Runtime's) must not be torn
        down under a thread still parked in it.
        """
        self._jobs.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except Exception:  # a job's own error must not end the thread: later jobs would wait forever
                log.exception("%s: a job raised", self._thread.name)


#: Candidate's fields in attrs' order, as :func:`_candidates_maker` sets them.
_CANDIDATE_FIELDS = ("id", "path", "start_line", "end_line", "score", "text", "source", "vector_score", "text_score",
                     "mtime", "identifier_match", "superseded_by", "supersedes")


class _KeywordRank:
    """Each key's place in the keyword ranking (``ranked``'s ``(key, score)`` pairs), the number of ranked keys for
    one not ranked; the ranking is indexed on the first look-up (most searches have no equal scores to break)."""

    __slots__ = ("ranked", "places", "unranked")

    def __init__(self, ranked: Sequence[tuple[int, float]]) -> None:
        self.ranked = ranked
        self.places: dict[int, int] | None = None
        self.unranked = 0

    def __call__(self, key: int) -> int:
        places = self.places
        if places is None:
            places = self.places = dict(zip(map(itemgetter(0), self.ranked), count()))
            self.unranked = len(places)
        return places.get(key, self.unranked)


def _candidates_maker() -> Callable[..., tuple[Candidate, ...]]:
    """``Candidate(id=..., ...)`` of each of a search's candidates, from their fields' columns (``ids, paths,
    start_lines, end_lines, scores, texts, sources, vector_scores, text_scores, mtimes, identifier_matches``,
    sequences of one length): each field of every candidate set by its slot, a column at a time (``map``, no
    Python call per candidate: about a tenth of the cost of attrs' keyword ``__init__``, for about 140
    candidates a search); the same objects, equal to the ones ``__init__`` makes. While ``Candidate`` has other
    fields, validators, converters, an init hook, fields of a base class, or anything else that makes a probe
    record differ from ``__init__``'s (a factory default, a cached hash), its ``__init__`` itself."""
    fields = attrs.fields(Candidate)

    def keywords(*columns: Sequence[Any]) -> tuple[Candidate, ...]:
        return tuple(Candidate(id=id, path=path, start_line=start_line, end_line=end_line, score=score, text=text,
                               source=source, vector_score=vector_score, text_score=text_score, mtime=mtime,
                               identifier_match=identifier_match)
                     for (id, path, start_line, end_line, score, text, source, vector_score, text_score, mtime,
                          identifier_match) in zip(*columns, strict=True))

    if (tuple(f.name for f in fields) != _CANDIDATE_FIELDS or any(f.validator or f.converter for f in fields)
            or hasattr(Candidate, "__attrs_post_init__") or hasattr(Candidate, "__attrs_pre_init__")
            or "__slots__" not in Candidate.__dict__ or any(n not in Candidate.__dict__ for n in _CANDIDATE_FIELDS)):
        return keywords
    setters = [Candidate.__dict__[name].__set__ for name in _CANDIDATE_FIELDS]
    given, (s_by, s_supersedes) = setters[:11], setters[11:]
    by, supersedes = fields.superseded_by.default, fields.supersedes.default
    new = object.__new__

    def make(*columns: Sequence[Any]) -> tuple[Candidate, ...]:
        n = len(columns[0])
        if len(columns) != len(given) or any(len(column) != n for column in columns):
            raise ValueError("one column for each of the candidates' fields, all of one length")
        made = list(map(new, repeat(Candidate, n)))
        for setter, column in zip(given, columns, strict=True):
            deque(map(setter, made, column), maxlen=0)  # the setters return None: nothing is kept
        deque(map(s_by, made, repeat(by, n)), maxlen=0)
        deque(map(s_supersedes, made, repeat(supersedes, n)), maxlen=0)
        return tuple(made)

    probe = (("id", "b"), ("memory/p.md", "sessions/s.jsonl"), (1, 7), (2, 7), (0.5, 0.0), ("text", ""),
             ("sessions", "memory"), (0.25, None), (0.75, None), (1.5, None), (True, False))
    try:
        fast, slow = make(*probe), keywords(*probe)
        same = len(fast) == len(slow) == 2 and all(
            a == b and hash(a) == hash(b) and repr(a) == repr(b)
            and all(getattr(a, n) == getattr(b, n) for n in _CANDIDATE_FIELDS) for a, b in zip(fast, slow, strict=True))
    except Exception:
        same = False
    return make if same else keywords


_make_candidates = _candidates_maker()


def _identifier_candidates(qa: Any, counted: Sequence[str], rows: dict[int, CandidateRow],
                           chunk_terms: dict[int, tuple[dict[str, int], int]]) -> dict[str, list[int]] | None:
    """For each identifier token of the query, the candidates that may hold it (``score_hits``'s
    ``identifier_candidates_by_token``), told by their term counts; None when the counts cannot tell (every
    candidate's text is then searched for every identifier).

    An ASCII text holding an ASCII identifier as a token (no letter or digit either side; ASCII folds to lower
    case) holds that identifier's tokens as FTS5 makes them (its runs of letters and digits: the characters
    either side part tokens there too), so it counts the index terms of all of them: a chunk lacking one holds
    no such identifier, and no ASCII text holds an identifier with another character. The converse does not
    hold (porter makes one term of ``q123`` and ``q123s``): the texts left are still searched. Texts with other
    characters (folded by Unicode rules) are searched as they were. Each identifier is looked for only in the
    texts that may hold it: a query's identifiers are mostly held by few candidates or none (a new ticket number),
    and a search of a text for a token it lacks reads the whole text.
    """
    if not qa.identifiers:
        return None  # nothing to search for
    from .fts import _index_terms  # stem_tokens, remembered: a query's identifiers come back
    from .keyword import fold

    needs: dict[str, tuple[str, ...]] = {}
    known = set(counted)
    for ident in qa.identifiers:
        if not fold(ident).isascii():
            needs[ident] = ()  # in no ASCII text
            continue
        if not ident.isascii():
            return None  # folded to ASCII by Unicode rules, which FTS5's folding need not share
        terms = _index_terms(ident)
        if not terms or not known.issuperset(terms):
            return None  # no term to tell by (an identifier of underscores), or one not counted
        needs[ident] = terms
    # Every text with other characters, then the ASCII ones (or any: the others are listed already) counting
    # every term of the identifier.
    other = list(compress(rows, map(not_, map(str.isascii, map(_TEXT, rows.values())))))
    listed = set(other)
    out: dict[str, list[int]] = {}
    counts: list[dict[str, int]] | None = None
    for ident, terms in needs.items():
        if not terms:
            out[ident] = other
            continue
        if len(terms) == 1:
            if counts is None:
                counts = list(map(_COUNTS, chunk_terms.values()))
            # The chunks whose counts hold the term (``term in counts``), in C.
            holding = list(compress(chunk_terms, map(contains, counts, repeat(terms[0]))))
        else:
            holding = [k for k, (c, _) in chunk_terms.items() if all(t in c for t in terms)]
        out[ident] = other + [k for k in holding if k not in listed] if other else holding
    return out


def _batch_enabled(ms: Any) -> bool:
    """``memorySearch.remote.batch.enabled``; the section is the remote plugin's, absent when it is disabled."""
    return bool(((ms.get("remote") or {}).get("batch") or {}).get("enabled", False))


#: Meta key naming the workspace an index file belongs to.
WORKSPACE_META = "workspace"
#: Why the last sync (in any process) could not write the index, until a sync writes it ("" or absent: none).
DISK_ERROR_META = "diskError"


def workspace_store_path(path: Path, workspace: str) -> Path:
    """The index file beside ``path`` for another workspace of the same agent id: ``<stem>-ws-<hash>.sqlite``."""
    import hashlib

    digest = hashlib.sha256(workspace.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return path.with_name(f"{path.stem}-ws-{digest}{path.suffix}")


def open_agent_store(agent: AgentView) -> IndexStore:
    """Open the agent's index file, or its workspace's own file when another workspace owns it.

    ``store.path`` is keyed by agent id, so one agent id used with two workspaces (two
    processes, or a host that serves several) would share one index: each sync would delete
    the other workspace's files from it, and a search could answer from the wrong workspace.
    The first workspace to open the file claims it (recorded in its meta); another existing
    workspace gets a file of its own beside it (:func:`workspace_store_path`). A file whose
    recorded workspace no longer exists (the folder was moved or removed) is taken over, so its
    embedding cache is reused.
    """
    vec = agent.memory_search["store"]["vector"]
    # As meta holds it: SQLite text is UTF-8, so bytes of the folder's path that are not are kept as ``\\xNN``
    # (a path of valid UTF-8, every index written so far, is kept as it is).
    ws = printable_path(str(agent.workspace))

    def open_claimed(path: Path, *, shared: bool) -> tuple[IndexStore, str]:
        store = IndexStore.open(path, vector_enabled=vec["enabled"], extension_path=vec["extensionPath"])
        try:
            owner = store.claim_meta(WORKSPACE_META, ws)
            # The agent's shared file goes to another workspace only while that one exists; a
            # workspace's own file is always its own (another owner there is a moved folder).
            if owner != ws and (not shared or not any(Path(p).is_dir() for p in path_candidates(owner))):
                log.info("index %s belonged to workspace %s, which is gone; %s takes it over", path, owner, ws)
                store.set_meta(WORKSPACE_META, ws)
                owner = ws
        except BaseException:
            store.close()
            raise
        return store, owner

    store, owner = open_claimed(agent.store_path, shared=True)
    if owner == ws:
        return store
    store.close()
    own = workspace_store_path(agent.store_path, ws)
    log.info("index %s belongs to workspace %s; agent %r with workspace %s uses %s",
             agent.store_path, owner, agent.id, ws, own)
    return open_claimed(own, shared=False)[0]


def assemble_backend(ctx: Any, make_vectors: Callable[[IndexStore], VectorSide]) -> IndexedBackend:
    """Build an :class:`IndexedBackend` for ``ctx`` (a BackendContext) with the given vector side.

    Status names it by ``ctx.spec`` (the registration being built).

    The one assembly both SQLite-based backends share: open the store, build
    the vector side over it, choose the embedding provider. Whatever was
    opened is closed again if a later step fails.
    """
    spec = ctx.spec
    if spec is None:
        raise BackendError("BackendContext.spec is missing: the manager passes the registration being built; "
                           "build backends through open_memory() or BackendServices.create_backend()")
    store = open_agent_store(ctx.agent)
    vectors: VectorSide | None = None
    try:
        vectors = make_vectors(store)
        choice = ctx.services.choose_provider()
    except BaseException:
        if isinstance(vectors, Closeable):
            vectors.close()
        store.close()
        raise
    indexer = Indexer(store=store, agent=ctx.agent, choice=choice, plugins=ctx.services.plugins,
                      models=ctx.config.data.get("models") or {})
    return IndexedBackend(agent=ctx.agent, store=store, choice=choice, indexer=indexer, vectors=vectors,
                          short_name=spec.status_name, plugin_name=spec.name)


def _read_through(cache: dict[str, Any], ids: Sequence[str], limit: int,
                  read: Callable[[list[str]], dict[str, Any]]) -> dict[str, Any]:
    """These ids' values: the ones ``cache`` keeps, the rest by ``read`` (given the missing ids once each) and kept,
    the cache emptied first when they would take it over ``limit``; a value ``read`` gives as None, or not at
    all, is not kept (asked for again). The kept ones are taken first: making room for the missing ones (or
    another thread) may empty the cache."""
    known = {cid: v for cid in ids if (v := cache.get(cid)) is not None}
    missing = [cid for cid in dict.fromkeys(ids) if cid not in known]
    if missing:
        got = read(missing)
        known.update(got)
        if len(cache) + len(missing) > limit:
            cache.clear()
        cache.update({cid: v for cid, v in got.items() if v is not None})
    return known
