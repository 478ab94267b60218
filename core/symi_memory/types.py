"""Frozen records that cross the plugin boundary.

Every public result type has ``to_dict()`` giving the tool JSON (camelCase).
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal, overload

import attrs

__all__ = [
    "Candidate",
    "Fallback",
    "History",
    "MemoryHit",
    "ReadResult",
    "SearchQuery",
    "SearchResponse",
    "SyncProgress",
    "SyncReport",
    "BackendResult",
    "LazyCandidates",
    "SNIPPET_MAX_CHARS",
    "SnippetBudget",
    "truncate_chars",
]

SNIPPET_MAX_CHARS = 700

Source = Literal["memory", "sessions"]


def truncate_chars(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters.

    Python strings index by code point, so a cut never lands inside a
    character (unlike UTF-16 based runtimes, where a surrogate pair can split).
    """
    if limit < 0:
        limit = 0
    return text if len(text) <= limit else text[:limit]


@attrs.frozen(kw_only=True)
class Fallback:
    """Records that a component switched away from what was configured."""

    from_: str = attrs.field(alias="from_")
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.from_, "reason": self.reason}


@attrs.frozen(kw_only=True)
class SearchQuery:
    """One search request, as handed to a backend.

    ``max_results``/``min_score`` are already resolved against config.
    ``candidate_limit`` is how many candidates each retrieval side should
    return (``min(200, maxResults * candidateMultiplier)``).
    """

    text: str
    max_results: int
    min_score: float
    candidate_limit: int
    session_key: str | None = None
    sources: tuple[str, ...] = ("memory",)


@attrs.frozen(kw_only=True)
class Candidate:
    """A scored chunk before post-processing.

    ``text`` is the full chunk text (post-processors such as MMR read it);
    the snippet shown to the agent is derived from it at the very end.
    ``vector_score``/``text_score`` are the per-side scores in 0..1 (None when
    that side did not find the chunk). ``mtime`` is the file's modification
    time in seconds, used by temporal decay for undated files.
    ``identifier_match`` is True when the chunk holds an identifier-like
    query token (a commit hash, ticket ID, env var): a lookup, not a fact
    that goes stale, so temporal decay leaves it alone.
    ``superseded_by`` (``{path, startLine, endLine}``) is set by the
    supersession post-processor on a hit that a newer memory restates or
    changes; ``supersedes`` lists what a current hit replaces.
    """

    id: str
    path: str
    start_line: int
    end_line: int
    score: float
    text: str
    source: str = "memory"
    vector_score: float | None = None
    text_score: float | None = None
    mtime: float | None = None
    identifier_match: bool = False
    superseded_by: dict[str, Any] | None = None
    supersedes: tuple[dict[str, Any], ...] = ()


@attrs.frozen(kw_only=True)
class SnippetBudget:
    """How much of its hits a search may show the agent (:mod:`symi_memory.presentation` applies it).

    ``max_snippet_chars`` caps each snippet (never above
    :data:`SNIPPET_MAX_CHARS`); ``max_injected_chars``, when set, caps the
    total the agent sees, citation footers included: the hit that does not
    fit is cut to the room left, and the hits after it are left out.
    """

    max_snippet_chars: int = SNIPPET_MAX_CHARS
    max_injected_chars: int | None = None


class LazyCandidates(Sequence["Candidate"]):
    """A search's candidates, best first, each made (a :class:`Candidate`) when first asked for: a backend hands
    out a hundred or more of them and a search's tail reads a few (its best, the window a post-processor looks at).

    ``make(*columns)`` makes the candidates of the columns given (one sequence per ``Candidate`` field it sets,
    all of one length, each sliced alike); ``scores`` is the column of their scores, read without making any. The
    candidates are made in order, the first ones first (a slice or an index makes those before it too), and each
    once: the same object is handed out again. Otherwise a read-only sequence like a tuple of them (its slices,
    sums and products are tuples, it hashes as that tuple, and a copy or a pickle of it is that tuple); equal to
    another sequence of equal candidates in the same order.

    ``ids``, when given, is the column of their ids (``Candidate.id``), read without making any: a post-processor
    can tell from it (and the backend's stored answers) that it has nothing to do, and leave its window unmade."""

    __slots__ = ("_make", "_columns", "_made", "_lock", "scores", "ids")

    def __init__(self, make: Callable[..., Sequence[Candidate]], columns: Sequence[Sequence[Any]],
                 scores: Sequence[float], ids: Sequence[str] | None = None) -> None:
        self._make = make
        self._columns = columns
        self._made: list[Candidate] = []
        self._lock = threading.Lock()
        self.scores = scores
        self.ids = ids

    def __len__(self) -> int:
        return len(self.scores)

    def _upto(self, end: int) -> list[Candidate]:
        """The candidates made, at least the first ``end`` of them."""
        made = self._made
        if end > len(made):
            with self._lock:  # another thread's read makes the same ones: each object once
                start = len(made)
                if end > start:
                    made.extend(self._make(*[column[start:end] for column in self._columns]))
        return made

    @overload
    def __getitem__(self, index: int) -> Candidate: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Candidate, ...]: ...

    def __getitem__(self, index: int | slice) -> Candidate | tuple[Candidate, ...]:
        n = len(self.scores)
        if isinstance(index, slice):
            start, stop, step = index.indices(n)
            if step > 0 and stop > start:
                return tuple(self._upto(stop)[start:stop:step])
            return tuple(self._upto(n)[index])
        i = operator.index(index)  # a TypeError for anything but an integer, as a tuple's
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("candidate index out of range")
        return self._upto(i + 1)[i]

    def __iter__(self) -> Iterator[Candidate]:
        return iter(self._upto(len(self.scores)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))  # equal to the tuple of its candidates: the same hash

    def __add__(self, other: Any) -> tuple[Candidate, ...]:
        if isinstance(other, LazyCandidates):
            other = tuple(other)
        return tuple(self) + other if isinstance(other, tuple) else NotImplemented

    def __radd__(self, other: Any) -> tuple[Candidate, ...]:
        return other + tuple(self) if isinstance(other, tuple) else NotImplemented

    def __mul__(self, times: Any) -> tuple[Candidate, ...]:
        return tuple(self) * times

    __rmul__ = __mul__

    def __reduce__(self) -> tuple[Any, ...]:
        # Copied and pickled as the tuple of its candidates (its maker may be a local function, its lock is not
        # copied): ``copy.deepcopy`` and ``pickle`` of a search's result work as they did on the tuple.
        return (tuple, (tuple(self),))

    def __repr__(self) -> str:
        return f"LazyCandidates({tuple(self)!r})"


@attrs.frozen(kw_only=True)
class BackendResult:
    """What a backend's ``search`` returns: fused candidates, best first.

    The core then runs reranking, post-processors, ``minScore`` and
    ``maxResults`` on ``candidates``. ``calibrated`` is False when the
    scores are not on symi-memory's 0..1 relevance scale (qmd's rounded
    BM25 gives 0 to every hit of a one-file collection); ``minScore`` is
    then not applied, since it would drop good hits. ``budget`` is the
    backend's own limit on what the agent is shown (qmd's
    ``memory.qmd.limits``); None means the core's default snippet cap.
    ``query_vector``: the query's embedding when the vector side took part
    (comparable with :class:`~symi_memory.specs.StoredLineVectors`), handed to
    post-processors as ``PostProcessContext.query_vector``; None otherwise.
    Backends return full texts: the core cuts snippets and applies the budget.
    ``candidates`` may be a :class:`LazyCandidates` (builtin-sqlite and faiss
    hand out theirs so): a read-only sequence like the tuple, whose
    candidates are made as they are read.
    """

    candidates: tuple[Candidate, ...] | LazyCandidates
    mode: str
    provider: str | None = None
    model: str | None = None
    fallback: Fallback | None = None
    calibrated: bool = True
    budget: SnippetBudget | None = None
    query_vector: tuple[float, ...] | None = None


@attrs.frozen(kw_only=True)
class MemoryHit:
    """One ``memory_search`` result.

    ``supersededBy``/``supersedes`` appear in the JSON only when the
    supersession post-processor found a newer (older) memory stating the same thing.
    """

    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    source: str = "memory"
    citation: str | None = None
    superseded_by: dict[str, Any] | None = None
    supersedes: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "startLine": self.start_line,
            "endLine": self.end_line,
            "score": self.score,
            "snippet": self.snippet,
            "source": self.source,
        }
        if self.citation is not None:
            out["citation"] = self.citation
        if self.superseded_by is not None:
            out["supersededBy"] = dict(self.superseded_by)
        if self.supersedes:
            out["supersedes"] = [dict(s) for s in self.supersedes]
        return out


@attrs.frozen(kw_only=True)
class SearchResponse:
    """The ``memory_search`` tool output."""

    results: tuple[MemoryHit, ...]
    mode: str
    provider: str | None = None
    model: str | None = None
    fallback: Fallback | None = None
    citations: str = "auto"
    #: Search stages skipped for this search, each naming its plugin and why: a reranker or third-party
    #: post-processor that raised, answered in the wrong shape, missed ``query.stageDeadlineMs`` or is still
    #: running an earlier call that missed it; and a query cut to its first 1,024 distinct content words
    #: (:func:`~symi_memory.index.analysis.capped_query`). In the tool output only when there is one.
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "results": [h.to_dict() for h in self.results],
            "provider": self.provider,
            "model": self.model,
            "fallback": self.fallback.to_dict() if self.fallback else None,
            "citations": self.citations,
            "mode": self.mode,
        }
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


class History(list[dict[str, Any]]):
    """What :meth:`MemoryManager.history` answers: its versions, oldest first (a list of dicts, as before), and
    ``warnings``: the search stages skipped while finding them, as :attr:`SearchResponse.warnings` names them (a
    reranker or third-party post-processor that raised, answered in the wrong shape, missed
    ``query.stageDeadlineMs`` or is still running an earlier call that missed it; the versions are then those of
    the order without that stage), and a query cut to its first 1,024 distinct content words
    (:func:`~symi_memory.index.analysis.capped_query`)."""

    __slots__ = ("warnings",)

    def __init__(self, versions: Iterable[dict[str, Any]] = (), warnings: Iterable[str] = ()) -> None:
        super().__init__(versions)
        self.warnings: tuple[str, ...] = tuple(warnings)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled at any protocol, as the plain list it used to be was (0 and 1 refuse a list subclass with slots).
        return History, (list(self), self.warnings)

    def to_dict(self) -> dict[str, Any]:
        """``{"versions": [...]}``, with ``"warnings"`` when a stage was skipped (as in a search's tool output)."""
        out: dict[str, Any] = {"versions": list(self)}
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


@attrs.frozen(kw_only=True)
class ReadResult:
    """The ``memory_get`` tool output."""

    path: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "path": self.path}


@attrs.frozen(kw_only=True)
class SyncProgress:
    """A progress report handed to ``sync(progress=...)`` callbacks."""

    phase: str  # "scan", "index", "embed", "write", "done"; "wait": waiting for another process's full build
    done: int  # for "wait": seconds waited
    total: int  # for "wait": the most it waits (sync.buildWaitSeconds)
    path: str | None = None  # for "wait": the other process's build file
    #: for "wait": that build in words (its pid, start, size so far); for "embed" (after each provider batch, ``done``
    #: and ``total`` counting files): "N embedded, M reused", the vectors computed and those taken from the cache
    detail: str | None = None


@attrs.frozen(kw_only=True)
class SyncReport:
    """What one sync did."""

    reason: str
    full: bool = False
    files_scanned: int = 0
    files_indexed: int = 0
    files_removed: int = 0
    chunks_written: int = 0
    embeddings_computed: int = 0
    embeddings_cached: int = 0
    seconds: float = 0.0
    errors: tuple[str, ...] = ()
    #: Nothing failed, but what was indexed may not be what was meant: the workspace does not exist or is a file (a
    #: mistyped path syncs 0 files; one away for a while keeps what the index holds from it), an extra path does
    #: not exist, a full rebuild waits for one of those.
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "full": self.full,
            "filesScanned": self.files_scanned,
            "filesIndexed": self.files_indexed,
            "filesRemoved": self.files_removed,
            "chunksWritten": self.chunks_written,
            "embeddingsComputed": self.embeddings_computed,
            "embeddingsCached": self.embeddings_cached,
            "seconds": round(self.seconds, 3),
            "errors": list(self.errors),
            "warnings": list(self.warnings),
        }

