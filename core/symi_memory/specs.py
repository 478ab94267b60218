"""What plugins register, and the interfaces the registered objects follow.

A plugin's hook implementation receives a ``register`` callable and hands it
one of the ``*Spec`` records below. The core builds a name -> spec registry
from them; config picks entries by name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    from .config import AgentView, Config
    from .embedding import EmbeddingChoice
    from .plugins import Plugins
    from .types import BackendResult, Candidate, ReadResult, SearchQuery, SyncProgress, SyncReport

__all__ = [
    "BackendContext",
    "BackendServices",
    "BackendSpec",
    "BatchingProvider",
    "CatchesUp",
    "ChecksIntegrity",
    "Closeable",
    "ConfigSection",
    "DEFAULT_BACKEND",
    "EmbeddingProvider",
    "MemoryBackend",
    "NotifiesSyncs",
    "PreparesQueries",
    "WarmsUp",
    "PostProcessContext",
    "PostProcessor",
    "PostProcessorSpec",
    "ProviderContext",
    "ProviderSpec",
    "ProviderUnavailable",
    "Reranker",
    "RerankerContext",
    "RerankerSpec",
    "DEFAULT_CALIBRATION",
    "ScoreCalibration",
    "EmbedsTexts",
    "EmbedsQueriesAtOnce",
    "SearchesOnAnyThread",
    "StalenessAware",
    "StartableBackend",
    "StoredLineAnalysis",
    "StoredPlain",
    "StoredLineVectors",
    "StoredVectors",
    "LineVector",
    "VectorSide",
]


class ProviderUnavailable(Exception):
    """Raised by a provider factory when it cannot be used here.

    The message must say what to do (for example which extra to install or
    which key to set). ``auto`` selection skips a provider that raises this.
    """


# --------------------------------------------------------------- embeddings


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Turns text into vectors.

    ``fingerprint`` identifies everything that changes the vectors apart from
    the model name (base URL, non-secret headers, ...). It must never contain
    an API key. ``max_input_bytes`` is the UTF-8 byte limit for one input;
    the core splits longer chunks before calling ``embed_documents``.

    Raise :class:`~symi_memory.errors.EmbeddingError` for a failed call (with
    ``retryable`` for a timeout, 429 or 5xx). Anything else a call raises is
    taken the same way, naming the provider: a search then answers by keyword
    saying why (``SearchResponse.fallback``), a sync indexes the files for
    keyword search and retries their vectors on the next one (as after a
    timeout, the provider is not called again in that sync). So is a vector
    no search could use: not a flat list of numbers, empty, holding NaN or
    infinity, of another width than the others of its batch or (a query
    vector) than the index's. ``close`` is optional (:class:`Closeable`).
    """

    id: str
    model: str
    fingerprint: str
    max_input_bytes: int

    def embed_query(self, text: str) -> list[float]: ...

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    def close(self) -> None: ...


@attrs.frozen(kw_only=True)
class ProviderContext:
    """Everything a provider factory may read.

    ``settings`` is the agent's resolved ``memorySearch`` section as a nested
    dict with the spec's camelCase keys and every default filled in.
    ``models`` is the top-level ``models`` section (``models.providers.*``).
    ``model`` is the model to use (``memorySearch.model`` or None for the
    provider's default). ``plugin_settings`` is ``plugins.entries.<id>`` of
    the plugin that registered the provider (``{}`` when unset).
    """

    settings: Mapping[str, Any]
    models: Mapping[str, Any] = attrs.field(factory=dict)
    env: Mapping[str, str] = attrs.field(factory=dict)
    state_dir: Path = Path(".")
    model: str | None = None
    plugin_settings: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ScoreCalibration:
    """How a model's cosine similarity maps to the probability that a chunk is relevant.

    ``probability(cos) = 1 / (1 + exp(-slope * (cos - midpoint)))``, for
    ``cos`` clamped to ``[0, 1]``: ``midpoint`` is the cosine at which a
    candidate is as likely relevant as not, ``slope`` how fast that changes.
    Search scores, ``minScore`` and both fusions are on this scale.
    """

    slope: float
    midpoint: float

    def probability(self, cosine: float) -> float:
        x = self.slope * (min(1.0, max(0.0, cosine)) - self.midpoint)
        if x < -60:
            return 0.0
        return 1.0 / (1.0 + math.exp(-x))


# For providers that declare none: fitted for all-MiniLM-L6-v2 (bench/calibration_fit.py), whose
# cosines spread like those of most sentence-embedding models (related text around 0.5-0.7).
DEFAULT_CALIBRATION = ScoreCalibration(slope=8.0, midpoint=0.61)


@attrs.frozen(kw_only=True)
class ProviderSpec:
    """An embedding provider registration.

    ``auto_priority``: lower is tried first by ``provider = "auto"``; None
    means auto-selection never picks it. ``available`` answers, cheaply and
    without network, None when the provider could be used now or a reason
    why not (for example "no OPENAI_API_KEY").

    ``calibration`` maps a model name to its :class:`ScoreCalibration` (a
    mapping, or a callable returning None for a model it does not know).
    A model without one uses :data:`DEFAULT_CALIBRATION`. It is fitted on
    the default vector score, which blends a chunk's cosine with its best
    line's (``chunking.units``). ``chunk_calibration`` (same forms) is
    optional: the fit for chunk vectors alone, used where no line vectors
    take part (``chunking.units = "off"``, or a backend that stores none);
    without it, ``calibration`` serves both.
    """

    name: str
    factory: Callable[[ProviderContext], EmbeddingProvider]
    auto_priority: int | None = None
    available: Callable[[ProviderContext], str | None] | None = None
    default_model: str | None = None
    description: str = ""
    calibration: Mapping[str, ScoreCalibration] | Callable[[str], ScoreCalibration | None] | None = None
    chunk_calibration: Mapping[str, ScoreCalibration] | Callable[[str], ScoreCalibration | None] | None = None

    def calibration_for(self, model: str | None, *, line_aware: bool = True) -> ScoreCalibration:
        """The declared calibration of ``model``, else :data:`DEFAULT_CALIBRATION`.

        ``line_aware=False``: for scores of chunk vectors alone; the ``chunk_calibration``
        of ``model`` when one is declared.
        """
        if not line_aware:
            found = _declared(self.chunk_calibration, model)
            if found is not None:
                return found
        return _declared(self.calibration, model) or DEFAULT_CALIBRATION


def _declared(cal: Mapping[str, ScoreCalibration] | Callable[[str], ScoreCalibration | None] | None,
              model: str | None) -> ScoreCalibration | None:
    if cal is None or model is None:
        return None
    found = cal.get(model) if isinstance(cal, Mapping) else cal(model)
    return found if isinstance(found, ScoreCalibration) else None


# ---------------------------------------------------------------- rerankers


@runtime_checkable
class Reranker(Protocol):
    """Reorders candidate texts for a query.

    ``rerank`` returns ``(index, score)`` pairs, best first, with scores in
    0..1 and indexes into ``documents``. It may return fewer than given.
    Scores outside 0..1 are clamped; an answer that is not such pairs (None,
    a dict, an index that is not an integer, a NaN score) is taken as a failed
    call: the search keeps its fused order, as when ``rerank`` raises, and its
    warning says what the reranker returned. The core runs
    each call (and the reading of its answer, a generator's too) on a worker
    thread and waits for it at most
    ``query.stageDeadlineMs`` (5 s): past it the search keeps its fused order
    and says so in its ``warnings``, and while that call has not returned the
    reranker is not called again (searches skip it at once). A thread cannot
    be stopped, so still give a remote reranker's client a timeout: until it
    returns, searches run without reranking. ``close`` is optional
    (:class:`Closeable`).
    """

    def rerank(self, query: str, documents: Sequence[str], top_n: int) -> list[tuple[int, float]]: ...

    def close(self) -> None: ...


@attrs.frozen(kw_only=True)
class RerankerContext:
    """What a reranker factory may read: the ``query.rerank`` section plus keys.

    ``plugin_settings`` is ``plugins.entries.<id>`` of the plugin that
    registered the reranker (``{}`` when unset).
    """

    settings: Mapping[str, Any]
    models: Mapping[str, Any] = attrs.field(factory=dict)
    env: Mapping[str, str] = attrs.field(factory=dict)
    model: str | None = None
    plugin_settings: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class RerankerSpec:
    """A reranker registration."""

    name: str
    factory: Callable[[RerankerContext], Reranker]
    default_model: str | None = None
    description: str = ""


# ----------------------------------------------------------- post-processors


@attrs.frozen(kw_only=True)
class PostProcessContext:
    """Per-search facts a post-processor may use. ``now`` is epoch seconds.

    ``as_of`` (epoch seconds, or None) is the search's "as of" date: the core
    has already left out memories written after it, and a processor that
    judges time (supersession) judges it as of then.

    ``vectors`` fetches the stored vectors of candidates by ``Candidate.id``
    (``vectors(ids) -> {id: [float, ...]}``; ids without a vector are left
    out). It is None when the backend keeps no vectors it can hand out (see
    :class:`StoredVectors`); a processor then does what it can without them.
    Call it once per search with all the ids you need.

    ``line_vectors`` fetches the stored vectors of the candidates' lines
    (``line_vectors(ids) -> {id: [(start line, end line, [float, ...]), ...]}``,
    file line numbers, the units ``chunking.units`` embeds). It is None when
    the backend keeps none it can hand out (see :class:`StoredLineVectors`);
    a chunk left out has no line vectors (a one-line chunk's vector is its
    line's). Supersession then judges two lines by their chunks' vectors.
    ``query_vector`` is the query's embedding when the backend's vector side
    took part (``BackendResult.query_vector``), else None: with line vectors
    it tells which lines of a hit answer the query.

    ``written_at`` gives known write times of candidates
    (``written_at(candidates) -> {id: (first, last)}`` in epoch seconds),
    today transcript chunks whose messages carry a ``timestamp``; other
    memory is dated from its file (:mod:`symi_memory.chronology`).

    ``line_analysis`` fetches the stored line analyses of candidates by id
    (``line_analysis(ids) -> {id: bytes}``, what
    :func:`symi_memory.supersession.line_analysis` gave when the chunk was
    indexed). It is None when the backend keeps none (see
    :class:`StoredLineAnalysis`); a processor then analyses the candidates'
    text itself, with the same result. Call it once per search.

    ``plain`` gives the stored answer of
    :func:`symi_memory.supersession.plain_chunk` for candidates by id
    (``plain(ids) -> {id: bool}``: whether no line of the chunk's text can
    take part in a supersession, told when the chunk was indexed). It is
    None when the backend stores none (see :class:`StoredPlain`); a chunk
    left out is told from its text, with the same result. A candidate whose
    text an earlier processor changed is left out (the stored answer is of
    the text the backend handed out).

    ``left_out``: in an "as of" search, the candidates the core left out as
    written after the date; empty otherwise. They are not results; a
    processor may compare the results with them (a later version of a fact
    shows what the question is about). Their scores are on the scale the
    results reach the processors with: the scores before the "as of" step,
    reranked like the results when a reranker is configured (one more
    reranker call; empty when that call fails), as fused scores are not
    comparable with a reranker's.
    """

    query: str
    now: float
    as_of: float | None = None
    vectors: Callable[[Sequence[str]], Mapping[str, Sequence[float]]] | None = None
    written_at: Callable[[Sequence[Candidate]], Mapping[str, tuple[float, float]]] | None = None
    line_vectors: Callable[[Sequence[str]], Mapping[str, Sequence[LineVector]]] | None = None
    query_vector: Sequence[float] | None = None
    line_analysis: Callable[[Sequence[str]], Mapping[str, bytes]] | None = None
    left_out: Sequence[Candidate] = ()
    plain: Callable[[Sequence[str]], Mapping[str, bool]] | None = None


@runtime_checkable
class PostProcessor(Protocol):
    """Returns a new candidate sequence; never mutates its input.

    The core hands ``process`` a tuple of the candidates. A processor whose
    class sets ``takes_lazy_candidates = True`` may be handed the backend's
    candidates as they are instead: a read-only ``Sequence`` (such as
    :class:`symi_memory.types.LazyCandidates`, whose candidates are made as
    they are read) that it reads through the ``Sequence`` interface alone;
    it may hand that same sequence back when it changes no candidate. A
    ``LazyCandidates`` may also carry ``ids``, the column of its candidates'
    ids, read without making any (None when the backend gave none).

    A third-party processor that raises, or returns what is not a sequence of
    :class:`~symi_memory.types.Candidate` records with finite scores (None, a
    dict), is skipped for that search (logged with its plugin's id and what it
    returned, and named in the search's ``warnings``): the search goes on with
    what it was handed. So is one whose factory raises, or returns an object
    without a ``process`` method (said once, when the pipeline is built), for
    every search. A third-party processor's call
    (and the reading of its answer, a generator's too) runs on a worker
    thread and is waited for at most ``query.stageDeadlineMs``
    (5 s; 0 runs it on the searching thread with no deadline): past it the
    search goes on without it, and while that call has not returned the
    processor is skipped at once by later searches. The ``ctx`` callables
    answer there as on the searching thread (``ctx.plain``'s answers are read
    on the searching thread before the call); a processor's own thread-local
    state is that worker's.
    """

    def process(self, candidates: Sequence[Candidate], ctx: PostProcessContext) -> Sequence[Candidate]: ...


@attrs.frozen(kw_only=True)
class PostProcessorSpec:
    """A post-processor registration.

    ``factory`` receives the ``query.hybrid`` section (camelCase dict) and
    returns a processor, or None when config leaves it disabled. A factory
    that also declares a ``plugin_settings`` parameter is given
    ``plugins.entries.<id>`` of the plugin that registered it, by keyword
    (like pluggy, only the arguments a function names are passed). Processors
    run by ascending ``order``; the core sorts by score between orders below
    500 and those at 500 or above (temporal decay is 100, supersession 450, month cue 460,
    MMR 600).

    ``running`` (optional) answers, from the same ``query.hybrid`` section and
    without building the processor or importing its code, whether the factory
    would return one: ``status`` names the post-processors running without
    building them (the first search does). Without it, ``status`` lists the
    processor with ``running: null`` until a search in that process built it.
    """

    name: str
    factory: Callable[[Mapping[str, Any]], PostProcessor | None]
    order: int = 300
    description: str = ""
    running: Callable[[Mapping[str, Any]], bool] | None = None


# ------------------------------------------------------------------ backends

#: The backend config selects when it names none (``plugins.slots.memory`` unset), and the
#: one qmd-sidecar falls back to. The builtin-sqlite plugin registers it under this name.
DEFAULT_BACKEND = "builtin-sqlite"


@attrs.frozen(kw_only=True)
class BackendContext:
    """Everything a backend factory gets.

    ``config`` is the whole :class:`symi_memory.config.Config`; ``agent`` is the
    resolved per-agent view (``agent.memory_search`` is the camelCase dict).
    ``services`` gives access to shared core machinery (embedding provider
    resolution, the plugin registry, other backends for fallbacks). ``spec``
    is the registration being built: a backend reports ``spec.status_name``
    as ``status()["backend"]`` and ``spec.name`` as ``status()["plugin"]``.
    ``plugin_settings`` is ``plugins.entries.<id>`` of the plugin that
    registered the backend (``{}`` when unset).
    """

    config: Config
    agent: AgentView
    services: BackendServices
    spec: BackendSpec | None = None
    plugin_settings: Mapping[str, Any] = attrs.field(factory=dict)


@runtime_checkable
class MemoryBackend(Protocol):
    """Stores and retrieves memory for one agent.

    ``search`` returns fused candidates best first; it must never wait for
    indexing. ``read_file`` implements ``memory_get`` and returns a
    ``ReadResult``; ``sync`` returns a ``SyncReport``. ``status`` returns a
    camelCase dict with at least ``files``, ``chunks``, ``dirty`` and
    ``workspaceDir`` (the core adds ``backend``, ``plugin``, the reranker,
    post-processors and slots; docs/backend-authors.md, section 7). A method
    returning another type is an error naming the plugin and what it returned.
    """

    def search(self, query: SearchQuery) -> BackendResult: ...

    def sync(
        self,
        *,
        reason: str = "manual",
        force: bool = False,
        progress: Callable[[SyncProgress], None] | None = None,
    ) -> SyncReport: ...

    def read_file(self, path: str, *, from_line: int | None = None, lines: int | None = None) -> ReadResult: ...

    def status(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


# Optional capabilities. The core checks them with isinstance() (the Protocols are
# runtime-checkable), so a backend opts in by defining the members; nothing is probed by name.


@runtime_checkable
class StartableBackend(Protocol):
    """A backend with background work (watchers, timers, a boot update) to arm.

    The manager calls ``start()`` once, right after the factory, and only for a
    long-lived manager (``open_memory(start=True)``, ``watch``, ``mcp``);
    one-shot commands never start a backend. ``close()`` stops what it armed.
    """

    def start(self) -> None: ...


@runtime_checkable
class StalenessAware(Protocol):
    """A backend that can tell, cheaply, whether files changed since its last sync.

    The one-shot ``search`` command uses it to decide whether to sync before
    answering. ``retry_pending=False`` means "files that only wait for vectors
    (a provider outage) do not count": they are searchable by keyword already.
    Backends without it are judged by ``status()["dirty"]`` and ``["files"]``.
    When it cannot tell because its store is unreachable (a database server
    down), it raises :class:`~symi_memory.errors.BackendError` with a one-line
    reason: the search then runs without a sync and reports the outage itself.
    """

    def is_stale(self, *, retry_pending: bool = True) -> bool: ...


@runtime_checkable
class ChecksIntegrity(Protocol):
    """A backend that can read its whole index for damage no search has read yet (a disk fault in pages of
    the embedding cache, or of rows no query matched).

    ``check_integrity()`` returns None when the index is intact, else a one-line description of the damage,
    which the backend records so that ``status()`` reports it (``dirty`` and ``lastError``) and its next
    ``sync`` rebuilds the index from the memory files. It may take seconds on a large index and must not
    stop searches meanwhile. ``symi-memory index --check`` calls it before syncing.
    """

    def check_integrity(self) -> str | None: ...


@runtime_checkable
class WarmsUp(Protocol):
    """An embedding provider that can load what it needs (a local model) before its first call.

    ``warm()`` starts loading it and returns without waiting for the load (it may do part of the work,
    such as imports, in the calling thread); it never raises: a failure is reported by the embedding
    call that needs the model. Without it, the first call loads the model.
    """

    def warm(self) -> None: ...


@runtime_checkable
class EmbedsQueriesAtOnce(Protocol):
    """An embedding provider that can give some query vectors at once, from memory: a table, a hash of the text,
    a query it embedded before.

    A search hands ``embed_query`` to an embedding worker thread and waits for it at most a deadline (2.5 s), so
    a provider that hangs (an endpoint that never answers) costs one search that wait and answers by keyword;
    the hand-over and the wake-up cost a scheduler time slice on a busy host. A provider with this method is
    asked first, on the searching thread, with no deadline: ``query_at_once(text)`` returns the vector
    ``embed_query(text)`` would (the same values), or None when it would have to compute or fetch it, and the
    search then calls ``embed_query`` on the worker as before. It must return promptly whatever other threads
    do: no I/O, no model to load, no lock that a running embedding call may hold. An ``EmbeddingError`` it
    raises is taken as ``embed_query``'s (the search answers by keyword, saying why); another exception is
    logged and the query goes to ``embed_query``. It is asked only when it is a method of the object whose
    ``embed_query`` the search would call (a wrapper handing unknown names to the provider it wraps does not
    get that provider's vectors). Return a list the caller may change: a vector kept for later must not be
    the one given out.
    """

    def query_at_once(self, text: str) -> list[float] | None: ...


@runtime_checkable
class PreparesQueries(Protocol):
    """A backend that can start, in the background, what embedding a query needs (loading a local model).

    The one-shot ``search`` command calls ``prepare_query()`` as soon as the manager is open, so the model
    loads while the rest of the search starts (the staleness check, the keyword side). It returns without
    waiting for the load and never raises.
    """

    def prepare_query(self) -> None: ...


@runtime_checkable
class NotifiesSyncs(Protocol):
    """A backend that reports each finished sync (including background ones).

    The core (``watch``) sets ``on_synced`` to a callable taking the
    :class:`~symi_memory.types.SyncReport`; the backend calls it after every
    sync, from whatever thread ran the sync.
    """

    on_synced: Callable[[SyncReport], None] | None


@runtime_checkable
class StoredVectors(Protocol):
    """Optional backend capability: hand out the stored vectors of candidates.

    A backend that stores chunk vectors (builtin-sqlite, faiss, the contrib
    postgres backend) implements ``candidate_vectors(ids) -> {id: [float, ...]}``
    for ``Candidate.id`` values of its own results, reading them through its
    store (never re-embedding). Ids must be unique among a search's
    candidates (a backend holding several scopes qualifies them), and only
    vectors comparable with the query's (same provider and model) come back;
    a candidate left out is judged without one. The core passes it to post-processors as
    ``PostProcessContext.vectors``. Backends without vectors (qmd-sidecar)
    leave it out; ``status()["supersession"]`` then says what is not applied.
    """

    def candidate_vectors(self, ids: Sequence[str]) -> Mapping[str, Sequence[float]]: ...


#: A stored line (unit) vector: first and last file line it covers, and the vector.
LineVector = tuple[int, int, Sequence[float]]


@runtime_checkable
class StoredLineVectors(Protocol):
    """Optional backend capability: hand out the stored vectors of candidates' lines.

    A backend that stores unit vectors (``chunking.units``: builtin-sqlite and
    faiss through the shared index, the contrib postgres backend) implements ``candidate_line_vectors(ids) -> {id: [(start line, end line,
    [float, ...]), ...]}`` for ``Candidate.id`` values of its own results, in
    line order, read through its store (never re-embedding), and only vectors
    comparable with ``candidate_vectors``'. Supersession then judges "the same
    thing said at different times" line against line, so a newer chunk that
    only partly restates an older one is told apart from one about something
    else. A backend without it (the default: nothing to implement) is judged
    by chunk vectors alone; ``PostProcessContext.line_vectors`` is then None.
    """

    def candidate_line_vectors(self, ids: Sequence[str]) -> Mapping[str, Sequence[LineVector]]: ...


@runtime_checkable
class StoredLineAnalysis(Protocol):
    """Optional backend capability: hand out the line analyses stored when candidates were indexed.

    Supersession reads each candidate's lines for their salient terms, values,
    quantities, dates and the moments their path and text give them, all
    independent of the query. A backend that stores chunks may store, beside
    each one, ``symi_memory.supersession.line_analysis(path, start_line,
    text)`` (bytes) when it indexes the chunk, and implement
    ``candidate_line_analysis(ids) -> {id: bytes}`` reading those of its own
    results in one go; a chunk left out (not analysed yet, say an index from
    before it stored them) is analysed at query time. The analysis holds
    nothing that a file's mtime or a transcript's write times change: those
    are applied when it is read. Store it again when the chunk's path, start
    line or text changes, and when ``supersession.LINE_ANALYSIS_VERSION``
    does (an analysis of another version is ignored, never misread). Results
    are the same with or without it; a search costs less with it (builtin-sqlite
    and faiss have it through the shared index).
    """

    def candidate_line_analysis(self, ids: Sequence[str]) -> Mapping[str, bytes]: ...


@runtime_checkable
class StoredPlain(Protocol):
    """Optional backend capability: hand out the plain-chunk answers stored when candidates were indexed.

    Supersession first asks whether any hit of its window can take part in a
    supersession at all (``symi_memory.supersession.plain_chunk`` of each
    hit's text: no past state, change, value, date or ending in it); most
    windows of a large index hold none, and the question then costs a scan
    of every new hit's text. A backend that stores chunks may store, beside
    each one, ``symi_memory.supersession.plain_fact(text)`` (an integer) when
    it indexes the chunk, and implement ``candidate_plain(ids) -> {id: bool}``
    giving ``supersession.plain_of_fact`` of those of its own last search's
    results on the calling thread, each read with the text that search handed
    out (never another text of the chunk, say one written since). A chunk left
    out (none stored yet, or one told by other rules: ``plain_of_fact`` gives
    None) is told from its text. Store it again when the chunk's text changes
    and when ``supersession.PLAIN_FACT`` does. Results are the same with or
    without it (builtin-sqlite and faiss have it through the shared index).
    """

    def candidate_plain(self, ids: Sequence[str]) -> Mapping[str, bool]: ...


@runtime_checkable
class EmbedsTexts(Protocol):
    """Optional backend capability: embed texts with the index's own provider.

    Dedup on write compares new text with stored lines by meaning through
    ``embed_texts(texts) -> [[float, ...], ...]`` (None when the backend has
    no usable provider right now); without it, dedup compares salient terms.
    """

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]] | None: ...


@runtime_checkable
class BatchingProvider(Protocol):
    """An embedding provider with a batch API whose state spans one sync run.

    ``begin_sync()`` is called at the start of every sync run (for example to
    reset "two batch failures disable batch mode for this run");
    ``batch_status()`` returns the camelCase dict merged into ``status().batch``
    (failures, pending jobs).
    """

    def begin_sync(self) -> None: ...

    def batch_status(self) -> dict[str, Any]: ...


@runtime_checkable
class Closeable(Protocol):
    """Anything with resources to release: a vector side, a reranker, a provider.

    The core calls ``close()`` when the owner closes, at most once, and ignores
    objects that do not define it.
    """

    def close(self) -> None: ...


@runtime_checkable
class BackendServices(Protocol):
    """The core machinery a backend factory receives as ``BackendContext.services``."""

    plugins: Plugins

    def choose_provider(self) -> EmbeddingChoice:
        """Resolve the agent's embedding provider (with fallback) as configured; never raises for a
        missing provider: the result says ``none`` and why."""
        ...

    def create_backend(self, name: str) -> MemoryBackend:
        """Build another registered backend for the same agent (a fallback, for example)."""
        ...


@runtime_checkable
class VectorSide(Protocol):
    """How an index-based backend finds the nearest chunk vectors (by chunk rowid).

    ``search`` returns ``(rowid, cosine)`` best first; ``cosine`` scores given
    stored vectors (float32 bytes, or None when a chunk has none) against the
    query; ``status`` is merged into ``status().vector`` (each key prefixed ``exact``);
    an ``error`` there that is not None (a vector index of its own that failed to
    build or save) is also ``status().lastError`` when nothing else is. A vector
    side that is also :class:`Closeable` is closed with its backend.
    """

    def search(self, query: Sequence[float], k: int) -> list[tuple[int, float]]: ...

    def cosine(self, query: Sequence[float], blobs: dict[int, bytes | None]) -> dict[int, float]: ...

    def status(self) -> dict[str, Any]: ...


@runtime_checkable
class CatchesUp(Protocol):
    """A :class:`VectorSide` with an index of its own that can be behind the store with nothing left to write: a
    saved file that no longer matched when it was opened (another process synced, or was killed before saving).

    ``catch_up()`` runs after each explicit sync (``index``, ``sync()``; not background ones): it brings that
    index up to date, in the calling thread when that is quick, so the sync leaves it current for the processes
    that open it next. It never raises; a failure shows in the vector side's status.
    """

    def catch_up(self) -> None: ...


@runtime_checkable
class SearchesOnAnyThread(Protocol):
    """A :class:`VectorSide` whose ``search`` may run on another thread than the search it serves.

    The backend then hands a hybrid search's vector scan to a worker thread while the searching thread runs
    the keyword side. What the vector side keeps per thread from a search (say, the scores a later ``rescore``
    reads) is moved along: ``search_state()``, on the thread that searched, returns it, and
    ``adopt_search_state(state)`` makes it the calling thread's, as if that thread had searched.
    ``worth_another_thread()`` says whether a search now is long enough, and spent enough of its time outside
    the GIL, to gain from running beside the keyword side (a large scan). A vector side without these is
    searched on the searching thread.
    """

    def worth_another_thread(self) -> bool: ...

    def search_state(self) -> Any: ...

    def adopt_search_state(self, state: Any) -> None: ...


@attrs.frozen(kw_only=True)
class ConfigSection:
    """A typed config section a plugin owns.

    ``key`` is the dotted camelCase path it mounts at, for example
    ``agents.defaults.memorySearch.local`` or ``plugins.entries.my-plugin``.
    ``model`` is an attrs class declared with the core's field DSL
    (:func:`symi_memory.config.fields.opt` and ``section``: type, default,
    doc, bounds, choices, durations). When ``key`` is already a core section,
    the plugin's keys are added to it (a key both define is an error). The
    keys validate, show in ``config show`` and appear in the generated
    reference only while the plugin is installed and enabled.
    """

    key: str
    model: type
    doc: str = ""


@attrs.frozen(kw_only=True)
class BackendSpec:
    """A memory backend registration.

    ``name`` is what ``plugins.slots.memory`` selects. ``short_name`` is
    what ``status()["backend"]`` reports (``builtin`` for builtin-sqlite,
    ``qmd`` for qmd-sidecar); None means ``name``. The core fills in
    ``backend`` and ``plugin`` for a backend whose status leaves them out.
    """

    name: str
    factory: Callable[[BackendContext], MemoryBackend]
    short_name: str | None = None
    description: str = ""

    @property
    def status_name(self) -> str:
        """The name ``status()["backend"]`` reports: ``short_name``, else ``name``."""
        return self.short_name or self.name

