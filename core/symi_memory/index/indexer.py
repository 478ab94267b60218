"""Sync: bring the SQLite index up to date with the files (spec/behaviour.md §3)."""

from __future__ import annotations

import array
import base64
import binascii
import json
import logging
import os
import threading
import time
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal

import apsw
import attrs

from ..errors import BuildWaitExpired, EmbeddingError, EmbeddingPending, SymiMemoryError
from ..specs import BatchingProvider
from ..types import SyncProgress, SyncReport
from ..workspace import (
    NOT_UTF8,
    AbsentRoot,
    MemoryFile,
    absent_roots,
    decode_text,
    emptied_roots,
    list_memory_files,
    printable_path,
    read_regular,
    root_devices,
    unreadable_within,
    why_unlistable,
)
from .rebuild import BuildInfo, describe_build
from .records import all_finite
from .store import ChunkRow, FileRow, IndexStore, UnitRow, pack_vector

if TYPE_CHECKING:
    from ..config import AgentView
    from ..embedding import EmbeddingChoice
    from ..indexing import SyncStore

__all__ = ["Indexer", "SyncCancelled", "absent_sources", "list_sources", "scan_sources"]

log = logging.getLogger("symi_memory.index")

EMBED_BATCH = 64
#: Vectors computed are committed to the embedding cache after the provider batch that ends this long since the
#: last commit (and at the end of each group of files): a run stopped mid-way loses at most about this much of the
#: provider's work plus the batch under way. After every batch, a fast provider (the `hash` one: 21,000 texts in
#: 7 s) spent 10-20 % more on the 330 commits; a slow one (a request takes longer than this) commits every batch.
CACHE_COMMIT_SECONDS = 0.5
#: A commit mid-run that finds another process writing the index is skipped (the vectors go with the next one): the
#: next try comes twice as late each time it is skipped again, up to this long after the last.
CACHE_COMMIT_MAX_SECONDS = 8.0
#: What a commit of vectors the run could do without still fails it with (:meth:`Indexer._commit_vectors`): a
#: damaged index (the sync sets it aside and builds a new one) or a disk that failed (reported as such). Skipped,
#: the run would pay the provider for every vector before the swap met the same error (and, for damage, pay again
#: for the new file's build, its cache empty).
SURFACING_ERRORS: tuple[type[BaseException], ...] = (apsw.CorruptError, apsw.NotADBError, apsw.FullError,
                                                     apsw.IOError)
BACKGROUND_REASONS = frozenset({"search", "stale", "stale-search", "watch", "interval", "session-start"})
# Syncs that take a transcript's new lines only past the delta thresholds (spec: background indexing of
# sessions is paced by them). A search's syncs take every line: the agent is asking memory now.
SESSION_PACED_REASONS = frozenset({"watch", "interval", "stale"})
# Syncs that never wait for another process's full build of the index (nor start one of their own beside it): the
# background ones, a search's before it answers (one-shot CLI, `serve`), the one after an append and `serve`'s first
# of an agent. They leave the index as it is until that build lands.
NO_WAIT_REASONS = BACKGROUND_REASONS | {"cli-search", "append", "serve-open"}
BUILD_POLL_SECONDS = 0.2
#: The default of ``sync.buildWaitSeconds``: how long an explicit sync waits for another process's full build.
DEFAULT_BUILD_WAIT_SECONDS = 1800
#: Without a progress callback, a waiting sync logs how long it has waited this often.
BUILD_WAIT_NOTE_SECONDS = 60.0
RETRY_BASE_SECONDS = 30.0
RETRY_MAX_SECONDS = 900.0
WRITE_BATCH_FILES = 200
PENDING = "pending:"
UNITS_META = "units"
# A line is worth a vector of its own with this many content words, or this many characters (CJK has no spaces).
UNIT_MIN_WORDS = 2
UNIT_MIN_CHARS = 12
FAILED_META = "failedFiles"
#: ``{"maxFileBytes": the limit transcripts were last read with, "partial": {path: why}}``: transcripts whose messages
#: exceed the limit are indexed in part (their newest messages), and a new limit has every transcript read again.
PARTIAL_META = "transcripts"
#: The version of the tail state stored with each transcript (:meth:`Indexer._load_transcript`). 2: the window of
#: a transcript past ``sync.maxFileBytes`` starts where a chunk of the whole transcript starts.
TAIL_VERSION = 2
#: A whole read forgets the ids of closed chunks that no later chunk can repeat once it holds this many.
SEEN_PRUNE = 4096
#: ``{root folder path: st_dev}``: the device each memory root folder was on when files were last listed from it
#: (:meth:`Indexer._emptied`: one that lists none on another device was unmounted).
ROOT_DEVICES_META = "rootDevices"
LAST_SYNC_META = "lastSync"


def _duration(seconds: float) -> str:
    """``95`` -> ``1 min 35 s``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def _stop_hint(build: BuildInfo) -> str:
    """How to stop a stuck builder: ``kill PID`` only when that pid is the builder as this process sees pids."""
    if build.elsewhere:
        return f"where it runs: pid {build.pid} is another container's or host's"
    return f"kill {build.pid if build.pid is not None else '<pid>'}"


class SyncCancelled(SymiMemoryError):
    """A sync stopped early because the manager is closing; the index keeps its last committed state."""


def _chain(head: Any, rest: Iterator[Any]) -> Iterator[Any]:
    if head is not None:
        yield head
    yield from rest


def sha256(text: str | bytes) -> str:
    import hashlib  # here: `status` and `get` open the index without hashing anything

    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def list_sources(agent: AgentView, problems: dict[str, str] | None = None) -> list[MemoryFile]:
    """Every file the agent indexes: memory files, plus transcripts when enabled.

    Files whose name is not valid UTF-8 cannot be stored or cited: they are
    left out, and with ``problems`` recorded there (``{path: reason}``) with
    whatever else could not be listed.
    """
    return _listed(agent, problems, problems)


def _listed(agent: AgentView, problems: dict[str, str] | None,
            transcripts: dict[str, str] | None) -> list[MemoryFile]:
    """:func:`list_sources`, with what could not be listed of the memory files in ``problems`` and of the
    transcripts in ``transcripts`` (both stored as ``sessions/...`` when an extra path is the workspace's
    ``sessions`` folder: only where they were listed tells them apart)."""
    ms = agent.memory_search
    sources = set(ms.get("sources") or ["memory"])
    out: list[MemoryFile] = []
    if "memory" in sources:
        out.extend(list_memory_files(agent.workspace, ms.get("extraPaths") or [], problems))
    if "sessions" in sources and ms["experimental"]["sessionMemory"]:
        d = agent.sessions_dir
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except FileNotFoundError:
            entries = []
        except OSError as exc:
            entries = []
            if transcripts is not None:
                transcripts["sessions/"] = f"cannot list folder: {exc.strerror or exc}"
        for entry in entries:
            try:
                if entry.name.endswith(".jsonl") and entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    out.append(
                        MemoryFile(path=f"sessions/{entry.name}", abs_path=entry.path, mtime=st.st_mtime,
                                   size=st.st_size, source="sessions")
                    )
            except OSError as exc:
                if transcripts is not None:
                    transcripts[printable_path(f"sessions/{entry.name}")] = f"cannot stat: {exc.strerror or exc}"
    kept = []
    for f in out:
        shown = printable_path(f.path)
        if shown != f.path:
            if problems is not None:
                problems[shown] = NOT_UTF8
            continue
        kept.append(f)
    return kept


def absent_sources(agent: AgentView) -> list[AbsentRoot]:
    """The memory roots (the workspace, extra paths) that cannot be listed now, gone or there but unreadable
    (:func:`~symi_memory.workspace.absent_roots`), and the transcripts folder when it is there but cannot be listed:
    what the index holds from them is kept, not removed as deleted."""
    ms = agent.memory_search
    sources = set(ms.get("sources") or ["memory"])
    out = absent_roots(agent.workspace, ms.get("extraPaths") or [], unreadable=True) if "memory" in sources else []
    if _transcripts_on(agent):
        folder = str(agent.sessions_dir)
        if os.path.isdir(folder) and (why := why_unlistable(folder)):
            out.append(AbsentRoot("folder", folder, why, "sessions", "sessions"))
    return out


def _transcripts_on(agent: AgentView) -> bool:
    ms = agent.memory_search
    return "sessions" in set(ms.get("sources") or ["memory"]) and bool(ms["experimental"]["sessionMemory"])


#: How :func:`list_sources` words the transcripts folder it could not list and a transcript it could not stat.
_TRANSCRIPTS_UNLISTED = (("cannot list folder: ", "folder"), ("cannot stat: ", "entry"))


def _transcripts_unlisted(agent: AgentView, problems: dict[str, str], known: list[AbsentRoot]) -> list[AbsentRoot]:
    """The transcripts folder (``sessions/``) and the transcripts :func:`list_sources` could not list or stat, from
    what it found of the transcripts alone (``problems``: a memory folder can be stored as ``sessions/...`` too), as
    :class:`AbsentRoot` of source ``sessions``: what the index holds from them is kept."""
    if not _transcripts_on(agent):
        return []
    folder = str(agent.sessions_dir)
    out: list[AbsentRoot] = []
    for stored, why in problems.items():
        found = next(((head, kind) for head, kind in _TRANSCRIPTS_UNLISTED if why.startswith(head)), None)
        if found is None or any(r.source == "sessions" and r.holds(stored) for r in [*known, *out]):
            continue
        head, kind = found
        name = stored[len("sessions/"):]
        out.append(AbsentRoot(kind, os.path.join(folder, name) if name else folder, f"cannot be read ({why[len(head):]})",
                              stored.rstrip("/"), "sessions"))
    return out


def scan_sources(agent: AgentView, problems: dict[str, str]) -> tuple[list[MemoryFile], list[AbsentRoot]]:
    """:func:`list_sources` (``problems`` filled as there) and what cannot be listed now: the roots of
    :func:`absent_sources` (looked at before listing), then the folders below them that could not be read
    (:func:`~symi_memory.workspace.unreadable_within`). What the index holds from any of them is kept."""
    absent = absent_sources(agent)
    memory: dict[str, str] = {}
    transcripts: dict[str, str] = {}
    files = _listed(agent, memory, transcripts)
    if absent or memory or transcripts:
        absent = [*absent, *unreadable_within(memory, agent.workspace, absent)]
        absent += _transcripts_unlisted(agent, transcripts, absent)
    problems.update(memory)
    problems.update(transcripts)
    return files, absent


def _readable_now(path: str) -> bool:
    """Whether the file at ``path`` opens and its first byte reads now (one a sync could not read may since have been
    made readable again: a chmod, which changes no mtime)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        os.read(fd, 1)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _kept(path: str, row: FileRow, absent: list[AbsentRoot]) -> bool:
    """Whether the indexed ``row`` lies below one of ``absent`` (of its own source: memory files or transcripts)."""
    return any(root.source == row.source and root.holds(path) for root in absent)


def chunk_units(text: str, lines: tuple[int, ...], mode: str) -> list[tuple[int, int, str]]:
    """The finer units of a chunk: ``(first line, last line, text)`` of each line worth its own vector.

    ``mode`` is ``chunking.units``: ``lines`` (every non-trivial line), ``pairs`` (each non-trivial line with
    the next one), ``off``. Blank lines, bare headings and list markers of one word are left out; a chunk whose
    only unit is the chunk itself gets none.
    """
    if mode == "off" or not lines:
        return []
    from . import analysis
    from .keyword import query_tokens

    kept: list[tuple[int, str]] = []
    for piece, lineno in zip(text.split("\n"), lines, strict=False):
        body = piece.strip()
        core = body.lstrip("#>-*+[] \t")
        if len(analysis.content_words(query_tokens(body))) >= UNIT_MIN_WORDS or len(core) >= UNIT_MIN_CHARS:
            kept.append((lineno, body))
    if mode == "pairs" and len(kept) > 1:
        units = [(a[0], b[0], f"{a[1]}\n{b[1]}") for a, b in zip(kept, kept[1:], strict=False)]
    else:
        units = [(n, n, body) for n, body in kept]
    units = list(dict.fromkeys(units))
    if len(units) == 1 and units[0][2] == text.strip():
        return []
    return units


#: A chunk to write: first and last line, text, and its units (first line, last line, text).
_Piece = tuple[int, int, str, tuple[tuple[int, int, str], ...]]


@attrs.define
class _Loaded:
    file: MemoryFile
    hash: str
    text: str
    line_map: tuple[int, ...] | None
    bad_utf8: int
    lines: int
    #: Why only part of the file is indexed (a transcript whose messages exceed ``sync.maxFileBytes``), else None.
    partial: str | None = None
    #: A transcript's :class:`~symi_memory.sessions.TranscriptMark` (where this read stopped), or None.
    mark: Any = None
    #: The stored tail state (:meth:`Indexer._tail_state`) this read went on from: ``text`` and ``line_map`` then hold
    #: only the messages appended since; None for a whole read.
    resume: dict[str, Any] | None = None
    #: The tail state to store with the rows (set by :meth:`Indexer._load_transcript`), and the chunk ids to drop.
    tail: str | None = None
    drop: tuple[str, ...] | None = None
    #: Going on from ``resume``: the chunks starting before this line left the window (past ``maxFileBytes``).
    cut: int | None = None
    #: A transcript's chunks, made as it was read (:meth:`Indexer._load_transcript`).
    pieces: list[_Piece] | None = None
    #: The file hash the rows this read adds to were written with (an append is written only onto those).
    base: str | None = None


class _Starts:
    """``(first line, text bytes before it, messages before it)`` of the chunks that may begin a transcript's window,
    oldest first, in one flat ``array`` of int64 (thousands of them for a 10 MB transcript: kept as Python tuples and
    JSON lists, they cost a sync ~25 ms each way; packed, well under 1 ms)."""

    def __init__(self, flat: array.array[int] | None = None) -> None:
        self.flat = flat if flat is not None else array.array("q")
        self.head = 0  # triples before this one are gone (popleft)

    def __len__(self) -> int:
        return len(self.flat) // 3 - self.head

    def __getitem__(self, i: int) -> tuple[int, int, int]:
        k = (self.head + i if i >= 0 else len(self.flat) // 3 + i) * 3
        return self.flat[k], self.flat[k + 1], self.flat[k + 2]

    def append(self, triple: tuple[int, int, int]) -> None:
        self.flat.extend(triple)

    def pop(self) -> None:
        del self.flat[-3:]

    def popleft(self) -> None:
        self.head += 1
        if self.head > 4096 and self.head * 6 > len(self.flat):  # gone ones past half: let their memory go
            del self.flat[:self.head * 3]
            self.head = 0

    def pack(self) -> str:
        return base64.b64encode(zlib.compress(self.flat[self.head * 3:].tobytes(), 1)).decode("ascii")

    @classmethod
    def unpack(cls, packed: Any) -> _Starts:
        if not isinstance(packed, str):
            raise TypeError("starts: not a string")
        flat = array.array("q")
        flat.frombytes(zlib.decompress(base64.b64decode(packed.encode("ascii"), validate=True)))
        if len(flat) % 3:
            raise ValueError("starts: not triples")
        return cls(flat)


@attrs.define
class Indexer:
    """Incremental, hash-based sync of one agent's index."""

    store: IndexStore | SyncStore
    agent: AgentView
    choice: EmbeddingChoice
    plugins: Any = None
    models: dict[str, Any] = attrs.field(factory=dict)
    last_error: str | None = None
    cancel: threading.Event = attrs.field(factory=threading.Event)
    _pending_failures: int = 0
    _retry_at: float = 0.0
    _failed_in_this_sync: str | None = None
    # Set when the provider timed out or stayed unreachable in this run: later batches do not wait on it again.
    _down_in_this_sync: str | None = None
    _run_dims: int | None = None
    #: The running sync's progress callback, told after each provider batch (phase ``embed``).
    _progress: Callable[[SyncProgress], None] | None = None
    #: Files the running sync has written so far of those it reads (the ``done``/``total`` of its progress).
    _files_progress: tuple[int, int] = (0, 0)
    #: When the vectors computed last went into the cache (:data:`CACHE_COMMIT_SECONDS`).
    _cached_at: float = 0.0
    #: The vectors computed and not yet committed to the cache: those since the last commit, and those of commits
    #: skipped because another process held the write lock (:meth:`_commit_vectors`).
    _unsaved: dict[str, bytes] = attrs.field(factory=dict)
    #: The commits skipped in a row (each waits twice as long for the next try, :data:`CACHE_COMMIT_MAX_SECONDS`).
    _cache_skips: int = 0
    #: Whether the running sync is a full build: its rows go to a build file, and the swap stores every vector
    #: (then a commit of vectors is never needed: one skipped does not fail it).
    _full_run: bool = False
    synced: bool = False  # whether this process has run a sync (else status reports the recorded one)
    #: What this process's last sync recorded (:meth:`_record`); None when it could not record. Another process's
    #: later sync records over it: then the recorded state is the newer truth (:meth:`reported_error`).
    _recorded: dict[str, Any] | None = None
    # Words of the chunks written in this sync, for the local-synonym vocabulary (None: not collected).
    _new_words: Counter[str] | None = None
    #: ``(identity meta value, what it parses to without "dims")`` as :meth:`needs_full` last read it: every search
    #: asks, and the value changes only with a full reindex (one tuple, replaced whole).
    _identity_read: tuple[str, dict[str, Any]] | None = None
    #: Why the last sync wrote nothing while the index needs a full build (another process is building it), else None.
    deferred: str | None = None
    #: The warnings of missing roots the last sync logged (:meth:`_root_warnings`).
    _warned_roots: frozenset[str] = frozenset()
    #: Whether the last sync left files it knew to be out of date for a later one (files waiting for vectors before
    #: their backoff ran out, a transcript's growth under the delta thresholds).
    held_back: bool = False

    # ------------------------------------------------------------ identity

    def index_identity(self) -> dict[str, Any]:
        p = self.choice.provider
        ch = self.agent.memory_search["chunking"]
        return {
            "provider": p.id if p else "none",
            "model": p.model if p else "",
            "fingerprint": p.fingerprint if p else "",
            "chunkTokens": ch["tokens"],
            "chunkOverlap": ch["overlap"],
        }

    def units_mode(self) -> str:
        """``chunking.units`` as this index stores it: off without a provider or for a store that keeps no units."""
        if self.choice.provider is None or not getattr(self.store, "stores_units", False):
            return "off"
        return str(self.agent.memory_search["chunking"].get("units", "off"))

    def needs_units(self) -> bool:
        """The index's unit vectors were built for another ``chunking.units`` (or before schema 6 had any).

        Unlike :meth:`needs_full`, the chunk vectors stay comparable: searches go on using them while
        the rebuild (chunk vectors from the cache, units embedded) runs in the background.
        """
        return (self.store.get_meta(UNITS_META) or "off") != self.units_mode()

    def needs_full(self, identity: str | None | Literal[False] = False) -> bool:
        """Whether the vectors in the index were built by another provider, model or chunking (or none recorded).

        ``identity``: the ``identity`` meta value when the caller has just read it (a search reads it with its
        epoch: :meth:`~.meta.MetaRows.search_state`); read here when not given.
        """
        raw = self.store.get_meta("identity") if identity is False else identity
        if raw is None:
            return True
        read = self._identity_read
        if read is None or read[0] != raw:
            stored = json.loads(raw)
            stored.pop("dims", None)
            read = self._identity_read = (raw, stored)
        return read[1] != self.index_identity()

    # ---------------------------------------------------------------- scan

    def retry_due(self) -> bool:
        """Whether files left without vectors by a failed provider may be retried now (backoff)."""
        return time.monotonic() >= self._retry_at

    def failed_files(self) -> dict[str, list[float]]:
        """``{path: [mtime, size]}`` of the files the last sync could not read or parse."""
        try:
            raw = json.loads(self.store.get_meta(FAILED_META) or "{}")
        except ValueError:
            return {}
        return raw if isinstance(raw, dict) else {}

    def changed_files(self, files: list[MemoryFile] | None = None, *, retry_pending: bool = True,
                      retry_failed: bool = True, absent: list[AbsentRoot] | None = None,
                      ) -> tuple[list[MemoryFile], list[str]]:
        """Files whose mtime or size differ from the index, and indexed paths that vanished.

        Files still waiting for vectors count as changed only with ``retry_pending``; files the
        last sync failed to read, unless they changed since, only with ``retry_failed``. A file below a root
        that cannot be listed (``absent``, as found before ``files`` were listed; looked at again after) did not
        vanish: its folder did, perhaps for a while (:func:`absent_sources`), and it stays indexed.
        """
        if files is None:
            files, absent = scan_sources(self.agent, {})
        absent = [*(absent or ()), *absent_sources(self.agent)]
        indexed = self.store.files()
        max_bytes = self.agent.memory_search["sync"]["maxFileBytes"]
        # Files the last sync could not read count as changed only once they change on disk; a
        # sync still retries them (reading is cheap), so an unreadable file never keeps `dirty` set.
        failed = {} if retry_failed else self.failed_files()
        unread: dict[str, str] | None = None  # the last sync's reasons, read once one is needed
        reread = self._limit_changed()  # a transcript read with another limit holds other messages
        changed = []
        for f in files:
            row = indexed.get(f.path)
            if f.size > max_bytes and f.source != "sessions":
                if row is not None:
                    changed.append(f)
                continue
            if failed.get(f.path) == [f.mtime, f.size]:
                # Unchanged since a sync could not read it (an indexed file keeps its rows meanwhile), unless it
                # could not be opened then and can now.
                if unread is None:
                    unread = self.store.skipped_map()
                if not (unread.get(f.path, "").startswith("cannot read: ") and _readable_now(f.abs_path)):
                    continue
            if row is None or row.mtime != f.mtime or row.size != f.size or (
                retry_pending and row.hash.startswith(PENDING)
            ) or (reread and f.source == "sessions"):
                changed.append(f)
        listed = {f.path for f in files}
        return changed, [p for p, row in indexed.items() if p not in listed and not _kept(p, row, absent)]

    def session_due(self, f: MemoryFile, row: FileRow | None) -> bool:
        """Whether a changed transcript grew enough for a background sync (the delta thresholds)."""
        if row is None or f.size < row.size:
            return True
        deltas = self.agent.memory_search["sync"]["sessions"]
        if f.size - row.size >= deltas["deltaBytes"]:
            return True
        from ..sessions import count_newlines

        try:
            lines = count_newlines(f.abs_path)
        except OSError:
            return True  # the sync reads it, and records why it cannot
        return lines - row.lines >= deltas["deltaMessages"]

    def _load(self, f: MemoryFile, old: FileRow | None = None) -> _Loaded:
        if f.source == "sessions":
            return self._load_transcript(f, old)
        data, st = read_regular(f.abs_path)  # a file swapped for a symlink or a FIFO since the listing: refused
        # The row must describe the bytes indexed, not the listing's older stat: a transcript that grew
        # in between would otherwise look changed forever, or (size from the listing) look indexed.
        f = attrs.evolve(f, mtime=st.st_mtime, size=len(data))
        text, bad = decode_text(data)
        return _Loaded(f, sha256(data), text, None, int(bad), text.count("\n") + 1)

    def _load_transcript(self, f: MemoryFile, old: FileRow | None = None) -> _Loaded:
        """A transcript, read a message at a time and chunked as it is read: the chunks of its newest messages up to
        ``sync.maxFileBytes`` of text.

        Transcripts grow for as long as a session runs, so the limit bounds the message text indexed (and the
        memory a sync holds), not the file: a session never drops out of search for being long. Its messages are
        chunked from the first (every chunk of the whole transcript is where it would be were nothing left out);
        of a transcript whose messages exceed the limit, the oldest chunks are left out: the window starts at the
        first chunk from whose first line on the text fits (or at the last chunk, when none does). So when the
        window moves on, the chunks still in it are those already indexed: only new ones are written.

        With ``old`` (its row in the index) and the tail state stored with it, only what was appended since is read
        (:func:`~symi_memory.sessions.open_transcript` tells whether it can be), and chunked on from there; the
        chunks the window leaves are removed (``FileRow.cut``). The rows then are exactly those a whole read makes.
        """
        from ..chunking import Chunk, Chunker, split_utf8
        from ..sessions import open_transcript, partial_reason

        max_bytes = int(self.agent.memory_search["sync"]["maxFileBytes"])
        state = self._tail_state(old) if old is not None else None
        ch = self.agent.memory_search["chunking"]
        p = self.choice.provider
        limit = p.max_input_bytes if p else None
        mode = self.units_mode()
        model = p.model if p else ""
        source, path = f.source, f.path
        with open_transcript(f.abs_path, max_bytes=max_bytes, since=state["mark"] if state else None) as read:
            resume = state if read.since is not None else None
            if resume is not None:
                chunker = Chunker.start(ch["tokens"], ch["overlap"], resume["current"], resume["cost"])
                before: dict[str, int] = dict(resume["seen"])  # closed chunks' ids a later chunk could repeat
                last_ids = set(resume["final"])  # the rows the last chunk wrote (kept when written again)
                # (None while its text is under half the limit: its window cannot move, the chunk starts are not kept)
                untracked = resume["starts"] is None
                starts: _Starts = _Starts() if untracked else resume["starts"]
                info: deque[tuple[int, int, int]] = deque(resume["info"])
                last_line, window = resume["last"], resume["start"]
            else:
                chunker = Chunker.start(ch["tokens"], ch["overlap"])
                before, last_ids, starts, info, last_line, untracked = {}, set(), _Starts(), deque(), 0, False
                window = 0
            seen = set(before)
            # (first line, last line, text, its chunk when it is one whole) of each chunk to write, oldest first.
            kept: deque[tuple[int, int, str, Chunk | None]] = deque()
            # Of the rows the last chunk wrote, those written again (only those: a whole read of a long transcript
            # would otherwise hold the id of every chunk of it to the end, ~200 bytes each).
            written: set[str] = set()

            def parts(c: Chunk, closed: bool) -> list[str]:
                # Split for the provider's input limit, a chunk keeps chunk vectors only (its lines span the parts).
                pieces = split_utf8(c.text, limit) if limit else [c.text]
                ids = []
                for piece in pieces:
                    cid = sha256(f"{source}:{path}:{c.start_line}:{c.end_line}:{sha256(piece)}:{model}")
                    # A long repetitive line can yield identical pieces on the same lines: one chunk (one id) each.
                    if not piece.strip() or cid in seen:
                        continue
                    seen.add(cid)
                    ids.append(cid)
                    if closed:
                        before[cid] = c.start_line
                    if cid not in last_ids:
                        kept.append((c.start_line, c.end_line, piece, c if len(pieces) == 1 else None))
                    else:
                        written.add(cid)
                return ids

            def fit() -> None:
                # ``starts``: (first line, text bytes before it, messages before it) of the chunks that may yet
                # begin the window. One whose lines to the end exceed the limit never fits again (the text only
                # grows): gone, unless it is the last (the window then starts with it).
                total = read.rendered
                while len(starts) > 1 and total - starts[0][1] - 1 > max_bytes:
                    starts.popleft()
                first = starts[0][0] if starts else 0
                while kept and kept[0][0] < first:
                    kept.popleft()

            for number, line, size in read.lines():
                info.append((number, read.rendered - size, read.messages - 1))
                last_line = number
                closed = chunker.feed(line, number)
                if not closed:
                    continue
                for c in closed:
                    while info[0][0] < c.start_line:
                        info.popleft()
                    if not starts or starts[-1][0] != c.start_line:
                        starts.append(info[0])
                    parts(c, True)
                while info[0][0] < chunker.current[0][1]:
                    info.popleft()
                fit()
                if len(before) > SEEN_PRUNE:  # ids of chunks before the open one: no later chunk repeats them
                    first = chunker.current[0][1]
                    before = {i: n for i, n in before.items() if n >= first}
                    seen = set(before)
            keep_starts = read.rendered - 1 > max_bytes // 2
            if untracked and keep_starts:
                # Its window may move from now on, and the chunk starts before this read were not kept: read whole.
                log.debug("%s: read whole (past half of sync.maxFileBytes: its chunk starts are kept from now)", path)
                loaded = self._load_transcript(f)
                loaded.base = old.hash if old is not None else None
                return loaded
            if resume is not None:
                log.debug("%s: read on from byte %d (appended since the last sync)", path, resume["mark"].size)
            last = chunker.last()
            final = parts(last, False) if last is not None else []
            extra = last is not None and (not starts or starts[-1][0] != last.start_line)
            if extra:
                assert last is not None
                starts.append(next(x for x in info if x[0] == last.start_line))
            fit()
            cut, dropped = (starts[0][0], starts[0][2]) if starts else (0, 0)
            if untracked:  # all of it fits: the window starts with the first chunk, as it did
                cut, dropped = window, 0
            if extra:
                starts.pop()  # (not a closed chunk's start: added again when that chunk closes)
            mark = read.mark()
            st, scan, messages, long_lines = read.stat, read.scan, read.messages, read.long_lines
        units = {id(c): tuple(chunk_units(c.text, c.lines, mode)) for *_, c in kept if c is not None}
        pieces: list[_Piece] = [(a, b, text, units[id(c)] if c is not None else ()) for a, b, text, c in kept]
        tail = None
        if mark is not None:
            first = chunker.current[0][1] if chunker.current else 0
            tail = json.dumps({
                "settings": self._tail_settings(), "mark": mark.to_dict(),
                "current": chunker.current, "cost": chunker.cost, "final": final,
                "seen": sorted([i, n] for i, n in before.items() if n >= first),
                "starts": starts.pack() if keep_starts else None, "info": list(info), "start": cut, "last": last_line},
                separators=(",", ":"))
        why = partial_reason(max_bytes, messages=messages, dropped=dropped, long_lines=long_lines,
                             span=(cut, last_line) if dropped else None)
        f = attrs.evolve(f, mtime=st.st_mtime, size=scan.size)
        loaded = _Loaded(f, scan.content_hash, "", None, 0, scan.newlines, why, mark=mark, resume=resume,
                         base=old.hash if old is not None else None)
        loaded.pieces, loaded.tail = pieces, tail
        if resume is not None:
            loaded.drop = tuple(sorted(last_ids - written))
            loaded.cut = cut if cut > window else None
        return loaded

    def _tail_settings(self) -> list[Any]:
        """What a transcript's chunks depend on besides its text: a tail state stored under others is not used."""
        ch = self.agent.memory_search["chunking"]
        p = self.choice.provider
        return [TAIL_VERSION, ch["tokens"], ch["overlap"], self.units_mode(), p.max_input_bytes if p else None,
                p.model if p else ""]

    def _tail_state(self, old: FileRow) -> dict[str, Any] | None:
        """The tail state stored with the transcript ``old`` describes, when it describes those rows and this
        chunking; else None (the transcript is read whole)."""
        from ..sessions import TranscriptMark

        read = getattr(self.store, "transcript_tail", None)
        if read is None or old.hash.startswith(PENDING):
            return None
        try:
            raw = read(old.path)
            state = json.loads(raw) if raw else None
        except Exception as exc:  # a state that cannot be read costs a whole read, nothing else
            log.debug("%s: tail state not used (%s)", old.path, exc)
            return None
        if not isinstance(state, dict) or state.get("settings") != self._tail_settings():
            return None
        mark = TranscriptMark.from_dict(state.get("mark"))
        current, final, seen, cost = state.get("current"), state.get("final"), state.get("seen"), state.get("cost")
        if mark is None or mark.hash != old.hash or mark.size != old.size or not isinstance(cost, int) or not (
                isinstance(current, list) and isinstance(final, list) and isinstance(seen, list)):
            return None
        try:
            state["current"] = [(str(piece), int(n)) for piece, n in current]
            state["seen"] = [(str(i), int(n)) for i, n in seen]
            state["final"] = [str(i) for i in final]
            state["starts"] = None if state["starts"] is None else _Starts.unpack(state["starts"])
            state["info"] = [(int(a), int(b), int(c)) for a, b, c in state["info"]]
            state["start"], state["last"] = int(state["start"]), int(state["last"])
        except (KeyError, TypeError, ValueError, zlib.error, binascii.Error):
            return None
        if sorted({n for _, n in state["current"]}) != [n for n, _, _ in state["info"]]:
            return None  # (``info``: the lines of the open chunk)
        state["mark"] = mark
        return state

    def _transcripts_read(self) -> tuple[int | None, dict[str, str]]:
        """The ``sync.maxFileBytes`` transcripts were last read with (None: not recorded), and the partial ones."""
        try:
            raw = json.loads(self.store.get_meta(PARTIAL_META) or "{}")
        except ValueError:
            raw = {}
        if not isinstance(raw, dict):
            return None, {}
        limit, partial = raw.get("maxFileBytes"), raw.get("partial")
        return (limit if isinstance(limit, int) else None,
                {str(k): str(v) for k, v in partial.items()} if isinstance(partial, dict) else {})

    def partial_files(self) -> dict[str, str]:
        """``{path: why}`` of the files only partly indexed (transcripts whose messages exceed ``maxFileBytes``)."""
        return self._transcripts_read()[1]

    def _limit_changed(self) -> bool:
        """Whether transcripts were read with another ``sync.maxFileBytes`` than the one configured now."""
        limit = self._transcripts_read()[0]
        return limit is not None and limit != self.agent.memory_search["sync"]["maxFileBytes"]

    # ---------------------------------------------------------------- sync

    def sync(self, *, reason: str = "manual", force: bool = False,
             progress: Callable[[SyncProgress], None] | None = None) -> SyncReport:
        started = time.perf_counter()
        failed_now: str | None = None
        report = lambda phase, done, total, path=None: progress and progress(  # noqa: E731
            SyncProgress(phase=phase, done=done, total=total, path=path)
        )
        self._progress, self._files_progress = progress, (0, 0)
        self._down_in_this_sync = None
        self._unsaved, self._cache_skips = {}, 0
        if isinstance(self.choice.provider, BatchingProvider):
            self.choice.provider.begin_sync()  # e.g. "two batch failures disable batch mode for the run"
        full = force or self.needs_full() or self.needs_units()
        self.deferred = None
        self.held_back = False
        if full and self._other_build_running():
            # Another live build of this index (a process's first build, a reindex): a second one beside it would
            # redo all its work to swap in the same rows.
            if not force and reason.split(" ")[0] in NO_WAIT_REASONS:
                self.deferred = (f"another process is building the index {getattr(self.store, 'path', '')}; "
                                 "searches use the index as it is until that build lands")
                log.info("not syncing (%s): %s", reason, self.deferred)
                return SyncReport(reason=reason, seconds=time.perf_counter() - started)
            # An explicit sync returns with the index up to date, so it waits for that build and syncs what changed
            # since; an explicit full rebuild (`index --force`) follows it, so the index it asked for lands last.
            self._wait_for_other_build(progress)
            full = force or self.needs_full() or self.needs_units()
        problems: dict[str, str] = {}
        files, absent = scan_sources(self.agent, problems)
        # A root that looks unmounted or emptied by accident is kept as one away is; a forced sync (`index --force`)
        # is the operator's word that its files were deleted (not the fallback provider's rebuild, forced too).
        if not force or reason.endswith("(fallback)"):
            absent += self._emptied(files, absent)
        away = [r for r in absent if r.kind == "workspace"]
        if full and (kept := self._held_from(away)):
            # A full build writes only what is listed: it would drop every file of a workspace that is only away.
            # An extra path away does not hold it up: a rebuild waiting for one deleted on purpose would wait for
            # ever, and nothing written meanwhile (in the workspace, which is there) would be indexed; its files are
            # indexed again once it is back.
            message = (f"the full rebuild of the index waits until the workspace {away[0].path} is back: it would "
                       f"drop the {kept} files indexed from there (searches answer from the index as it is)")
            seconds = time.perf_counter() - started
            self.held_back = True  # nothing written: a disk error said earlier still stands
            if force:  # asked for (`index --force`): not done, which the caller (a script) must notice
                log.info("not syncing (%s): %s", reason, message)
                return SyncReport(reason=reason, files_scanned=len(files), seconds=seconds, errors=(message,),
                                  warnings=self._root_warnings(absent))
            return SyncReport(reason=reason, files_scanned=len(files), seconds=seconds,
                              warnings=self._root_warnings(absent, message))
        gone = [r for r in absent if r.kind != "workspace"]
        dropped = self._held_from(gone) if full else 0
        indexed = {} if full else self.store.files()
        unread: dict[str, str] = {}  # files that could not be read: {path: why}
        self._run_dims = None if full else self.store.vec_dims
        report("scan", 0, len(files))
        held_back = False
        if full:
            todo, removed = list(files), list[str]()
        else:
            # Background syncs retry files without vectors only after a backoff, so a provider outage
            # does not turn every search into a burst of failing API calls.
            retry = reason not in BACKGROUND_REASONS or self.retry_due()
            todo, removed = self.changed_files(files, retry_pending=retry, absent=absent)
            held_back = not retry and self.store.pending_count() > 0
        max_bytes = self.agent.memory_search["sync"]["maxFileBytes"]
        # Markdown over the limit is skipped whole; a transcript is read a line at a time, keeping its newest
        # messages up to the limit (:meth:`_load_transcript`).
        skipped = {f.path: f"larger than sync.maxFileBytes ({f.size} > {max_bytes} bytes)" for f in files
                   if f.size > max_bytes and f.source != "sessions"}
        skipped.update(problems)
        failed: dict[str, list[float]] = {}
        removed += [f.path for f in todo if f.path in skipped and f.path in indexed]
        todo = [f for f in todo if f.path not in skipped]
        limit_read, partial_before = self._transcripts_read()
        if not full and reason.split(" ")[0] in SESSION_PACED_REASONS and limit_read in (None, max_bytes):
            # The delta thresholds pace the watcher's syncs; a search's or an explicit sync takes every line.
            due = [f for f in todo if f.source != "sessions" or self.session_due(f, indexed.get(f.path))]
            held_back = held_back or len(due) < len(todo)
            todo = due
        stats = {"indexed": 0, "chunks": 0, "computed": 0, "cached": 0}
        self.held_back = held_back
        self._new_words = Counter() if self._keeps_vocabulary() else None
        # Files only partly indexed: as recorded, for files not read again; set anew for each file read.
        kept_paths = {f.path for f in files if f.path not in skipped}
        # (and for the indexed files kept while they cannot be listed: their rows are as they were)
        partial = {p: why for p, why in partial_before.items()
                   if p in kept_paths or (p in indexed and p not in removed and p not in skipped)}
        try:
            held_before = self._indexed_rows() if full else indexed
            batches = self._prepare(todo, indexed, full, stats, report, skipped, failed, partial, unread)
            self._full_run = full
            if full:
                try:
                    self.store.build_full(batches, skipped=skipped, meta=self._meta(full=True))
                except BaseException:
                    # On its way out with an error of its own: what a skipped commit left is tried once more, and
                    # dropped if that finds the lock held (the way out is not held up by it).
                    self._commit_vectors(spare=True, leaving=True)
                    self._unsaved = {}
                    raise
                # The build landed. What skipped commits left is written now, waiting for the lock as cache_put does:
                # not every store's swap puts the vectors in its cache (postgres keeps them in its chunks only), and
                # a row lock held across every try of the run would otherwise drop them all. A failure now does not
                # undo the rebuild: it is said, and only the next run's provider calls pay for it.
                self._keep_vectors_left()
            else:
                self._write_incremental(batches, removed, skipped)
        except EmbeddingError as exc:
            if not isinstance(exc, EmbeddingPending) and self.choice.switch_to_fallback(self.plugins, self.agent, self.models, exc):
                return self.sync(reason=f"{reason} (fallback)", force=True, progress=progress)
            self.last_error = str(exc)
            self._record(reason)
            raise
        if failed != self.failed_files():
            self.store.set_meta(FAILED_META, json.dumps(failed, sort_keys=True))
        if partial != partial_before or limit_read != max_bytes:
            self.store.set_meta(PARTIAL_META, json.dumps({"maxFileBytes": max_bytes, "partial": partial},
                                                         sort_keys=True))
        failed_now = self._failed_in_this_sync
        self._failed_in_this_sync = None
        if failed_now is not None:
            self.last_error = failed_now
            self._pending_failures += 1
            self._retry_at = time.monotonic() + min(RETRY_MAX_SECONDS, RETRY_BASE_SECONDS * 2 ** (self._pending_failures - 1))
        elif self.store.pending_count() == 0:
            # Only once every file has its vectors is the outage over (a sync that skipped
            # the pending files proves nothing).
            self.last_error = None
            self._pending_failures, self._retry_at = 0, 0.0
        self._update_vocabulary()
        self._record_devices(files)
        fill = getattr(self.store, "fill_line_analysis", None)
        if fill is not None:  # chunks of an index from before stored line analyses (each filled once)
            fill(should_stop=self.cancel.is_set)
        self._record(reason)
        cache = self.agent.memory_search["cache"]
        # The index's own vectors are never pruned; without the cache nothing else is kept.
        self.store.cache_prune(cache["maxEntries"] if cache["enabled"] else 0)
        report("done", len(todo), len(todo))
        unread_held = self._unread_files({p: why for p, why in unread.items() if p in held_before}, held_before)
        if full and unread_held:
            lost = ", ".join(r.path for r in unread_held)
            unread_said: list[str] = [
                f"the full rebuild left out {lost}, indexed before, which cannot be read now: indexed again once it "
                "can be read"]
        else:
            unread_said = [r.warning for r in unread_held]
        told = [*absent, *unread_held]
        return SyncReport(
            reason=reason, full=full, files_scanned=len(files), files_indexed=stats["indexed"],
            files_removed=len(removed), chunks_written=stats["chunks"], embeddings_computed=stats["computed"],
            embeddings_cached=stats["cached"], seconds=time.perf_counter() - started,
            errors=(failed_now,) if failed_now else (),
            # Besides the roots that could not be listed, what no sync can take as it is (a name not valid UTF-8, a
            # folder that cannot be listed): said here as well as in status.skipped, so whoever ran the sync knows
            # why such a file is not found.
            warnings=(*self._root_warnings(absent, *(
                [f"the full rebuild left out the {dropped} files indexed from "
                 f"{', '.join(sorted(printable_path(r.path) for r in gone))}, which cannot be listed now: they are "
                 "indexed again once it is back or can be read"] if dropped else ()), *unread_said),
                *(f"{p} is not indexed: {why}" for p, why in sorted(problems.items())
                  if not any(r.holds(p) for r in told))),
        )

    def _root_warnings(self, absent: list[AbsentRoot], *more: str) -> tuple[str, ...]:
        """The warnings of the roots a sync could not list (and ``more`` about them), each logged once while it
        lasts (a watcher's syncs repeat them every time)."""
        said = (*(root.warning for root in absent), *more)
        for warning in said:
            if warning not in self._warned_roots:
                log.warning("%s", warning)
        self._warned_roots = frozenset(said)
        return said

    def _unread_files(self, unread: dict[str, str], rows: dict[str, FileRow]) -> list[AbsentRoot]:
        """The files of ``unread`` (``{stored path: why}``, why as ``skipped`` says it: ``cannot read: <reason>``)
        as :class:`~symi_memory.workspace.AbsentRoot` of kind ``file``: what the index holds from each is kept.
        ``rows``: the index's rows, which tell a transcript (in the state dir's transcripts folder) from a memory
        file (in the workspace)."""
        ws, folder = str(self.agent.workspace), str(self.agent.sessions_dir)
        out = []
        for p, why in sorted(unread.items()):
            if not why.startswith("cannot read: "):
                continue
            row = rows.get(p)
            source = row.source if row is not None else "memory"
            path = (os.path.join(folder, p[len("sessions/"):]) if source == "sessions"
                    else os.path.normpath(os.path.join(ws, p)))
            out.append(AbsentRoot("file", path, f"cannot be read ({why[len('cannot read: '):]})", p, source))
        return out

    def _indexed_rows(self) -> dict[str, FileRow]:
        """The rows the index holds before a full build replaces it; none from an index too damaged to read."""
        try:
            return self.store.files()
        except Exception:  # a damaged index being rebuilt: what it held is not known, and not said
            return {}

    def scan(self) -> tuple[list[MemoryFile], list[AbsentRoot]]:
        """The files to index and what cannot be listed now (:func:`scan_sources`): one listing a caller can hand to
        :meth:`changed_files` and :meth:`away_warnings` both."""
        return scan_sources(self.agent, {})

    def away_warnings(self, scanned: tuple[list[MemoryFile], list[AbsentRoot]] | None = None) -> list[str]:
        """What ``status()`` says of the memory that cannot be listed or read now, as a sync says it: the roots that
        are away or unreadable, the folders below them that cannot be read, and the indexed files the last sync
        could not read (kept as last read). ``scanned``: :func:`scan_sources` when the caller has just listed."""
        files, absent = scanned if scanned is not None else scan_sources(self.agent, {})
        absent = [*absent, *self._emptied(files, absent)]
        said = [r.warning for r in absent]
        unread = {p: why for p, why in self.store.skipped_map().items() if why.startswith("cannot read: ")}
        if unread:
            indexed = self.store.files()
            listed = {f.path: f for f in files}
            said += [r.warning for r in self._unread_files(
                {p: why for p, why in unread.items() if p in indexed and p in listed
                 and not _kept(p, indexed[p], absent) and not _readable_now(listed[p].abs_path)}, indexed)]
        return said

    def _emptied(self, files: list[MemoryFile], absent: list[AbsentRoot]) -> list[AbsentRoot]:
        """The memory roots that are there but list no file while the index holds files from them, and look
        unmounted or emptied by accident (:func:`~symi_memory.workspace.emptied_roots`)."""
        ms = self.agent.memory_search
        if "memory" not in set(ms.get("sources") or ["memory"]):
            return []
        return emptied_roots(self.agent.workspace, ms.get("extraPaths") or [],
                             [f.path for f in files if f.source == "memory"],
                             lambda: [p for p, row in self._indexed_rows().items() if row.source == "memory"],
                             self._recorded_devices(), absent)

    def _recorded_devices(self) -> dict[str, int]:
        try:
            value = json.loads(self.store.get_meta(ROOT_DEVICES_META) or "{}")
        except (ValueError, TypeError):
            return {}
        except Exception:  # an index that cannot be read now: nothing recorded is known
            return {}
        return {str(k): int(v) for k, v in value.items()} if isinstance(value, dict) else {}

    def _record_devices(self, files: list[MemoryFile]) -> None:
        """Record the device of each root folder files were listed from (when it changed): a root that later lists
        none, on another device, was unmounted (:meth:`_emptied`)."""
        ms = self.agent.memory_search
        if "memory" not in set(ms.get("sources") or ["memory"]):
            return
        recorded = self._recorded_devices()
        now = {**recorded, **root_devices(self.agent.workspace, ms.get("extraPaths") or [],
                                          [f.path for f in files if f.source == "memory"])}
        if now != recorded:
            try:
                self.store.set_meta(ROOT_DEVICES_META, json.dumps(now, sort_keys=True))
            except Exception as exc:  # a read-only index: the next sync that may write records them
                log.debug("could not record the memory roots' devices: %s", exc)

    def _held_from(self, absent: list[AbsentRoot]) -> int:
        """How many indexed files lie below the roots in ``absent``."""
        if not absent:
            return 0
        return sum(_kept(p, row, absent) for p, row in self.store.files().items())

    def _other_build_running(self) -> bool:
        running = getattr(self.store, "build_running", None)
        return bool(running is not None and running())

    def _wait_for_other_build(self, progress: Callable[[SyncProgress], None] | None = None) -> None:
        """Wait until no other live process is building this index, at most ``sync.buildWaitSeconds``.

        Says whom it waits for (a warning naming the builder's pid, when it started and its build file), then
        reports the wait to ``progress`` (phase ``wait``: seconds waited of the most it waits, ``detail`` naming the
        build) or, without one, logs a line a minute. A builder that dies (killed, crashed) lets its build file's
        lock go with it: the wait ends at the next look, and its leftover file is deleted. Past the bound it raises
        :class:`~symi_memory.errors.BuildWaitExpired`; the other build goes on and lands on its own.
        """
        bound = float(self.agent.memory_search["sync"].get("buildWaitSeconds", DEFAULT_BUILD_WAIT_SECONDS))
        path = getattr(self.store, "path", "")
        found = self._other_build()
        if found is None:
            return
        # A warning: an operator's `index` may wait as long as that build runs, and should see why.
        log.warning("another process is building the index %s (%s): waiting for that build to land, at most %s, "
                    "then syncing what changed since", path, describe_build(found), _duration(bound))
        started = time.monotonic()
        next_note = started + BUILD_WAIT_NOTE_SECONDS
        while found is not None:
            waited = time.monotonic() - started
            if waited >= bound:
                raise BuildWaitExpired(
                    f"another process is still building the index {path} ({describe_build(found)}) after "
                    f"waiting {_duration(waited)} (sync.buildWaitSeconds = {bound:g}); the index was not synced. "
                    "That build goes on and lands on its own: run `symi-memory index` again later, wait longer "
                    "with `symi-memory index --build-wait SECONDS`, or, if that process is stuck, stop it "
                    f"({_stop_hint(found)}; its build file is then deleted) and run `symi-memory index`")
            if progress is not None:
                progress(SyncProgress(phase="wait", done=int(waited), total=max(1, int(bound)), path=str(found.path),
                                      detail=describe_build(found)))
            elif time.monotonic() >= next_note:
                next_note += BUILD_WAIT_NOTE_SECONDS
                log.warning("still waiting (%s of at most %s) for the build of the index %s (%s)", _duration(waited),
                            _duration(bound), path, describe_build(found))
            if self.cancel.wait(min(BUILD_POLL_SECONDS, max(0.0, bound - waited))):
                raise SyncCancelled("sync cancelled: the memory manager is closing")
            found = self._other_build()
        # The build landed, or its process died: a dead builder's file is a leftover nobody else would delete
        # before the next open.
        remove = getattr(self.store, "remove_stale_builds", None)
        if remove is not None:
            remove()

    def _other_build(self) -> BuildInfo | None:
        running = getattr(self.store, "running_build", None)
        return running() if running is not None else None

    def _keeps_vocabulary(self) -> bool:
        """Whether this index keeps word vectors for local synonyms: the SQLite index, a provider, the switch
        on and a threshold known for the provider's model (:func:`.synonyms.min_cosine`); else none are made."""
        from .store import IndexStore
        from .synonyms import min_cosine

        theta, _ = min_cosine(self.choice.provider, self.agent.memory_search["query"]["hybrid"]["synonyms"])
        return theta is not None and isinstance(self.store, IndexStore)

    def _update_vocabulary(self) -> None:
        """Give the words of the chunks just written their vectors (:mod:`.synonyms`).

        A vocabulary that is empty or was made by another model is filled from every chunk of the
        index, so an index built before local synonyms gets them on its next sync.
        """
        words, self._new_words = self._new_words, None
        if words is None:
            return
        from .synonyms import Vocabulary, vocabulary_words

        vocab = Vocabulary(self.store)
        if self.cancel.is_set() or self._down_in_this_sync is not None:
            # Not now (closing, or the provider failed this sync: no second wait on it); the next sync catches up.
            vocab.skipped(words)
            return
        max_words = int(self.agent.memory_search["query"]["hybrid"]["synonyms"]["maxWords"])
        if not vocab.current(self.choice.provider, max_words):
            words = vocabulary_words(vocab.chunk_texts())  # the whole index (the new chunks among it)
        vocab.update(self.choice.provider, words, cancel=self.cancel, max_words=max_words)

    def _record(self, reason: str) -> None:
        """Keep what this sync learnt in the index's meta table, for ``status`` in any later process."""
        p = self.choice.provider
        state = {
            "reason": reason,
            "lastError": self.last_error,
            "provider": p.id if p else "none",
            "model": p.model if p else None,
            "fallback": self.choice.fallback.to_dict() if self.choice.fallback else None,
        }
        try:
            if self.last_sync() != state:  # no write when nothing changed (other processes may be writing)
                self.store.set_meta(LAST_SYNC_META, json.dumps(state, sort_keys=True))
            self._recorded = state
        except Exception as exc:  # the sync itself is done; its record is a courtesy
            log.warning("could not record the sync's state: %s", exc)
            self._recorded = None
        self.synced = True

    def reported_error(self, recorded: dict[str, Any] | None) -> str | None:
        """The ``lastError`` status reports, given the ``recorded`` state (:meth:`last_sync`): this process's own
        when its last sync is the one recorded (or it could not record), else the recorded one. A process that
        synced long ago (a ``serve``) must not keep saying a provider refused once another process's sync got every
        vector, nor say nothing while another's sync is refused."""
        if not self.synced:
            return (recorded or {}).get("lastError")
        if self._recorded is not None and recorded is not None and recorded != self._recorded:
            return recorded.get("lastError")
        return self.last_error

    def last_sync(self) -> dict[str, Any] | None:
        """What the last sync of this index (in any process) recorded, or None."""
        try:
            raw = json.loads(self.store.get_meta(LAST_SYNC_META) or "null")
        except ValueError:
            return None
        return raw if isinstance(raw, dict) else None

    def _meta(self, *, full: bool = False) -> dict[str, str]:
        ident = self.index_identity()
        meta = {"identity": json.dumps(ident, sort_keys=True)}
        if full and getattr(self.store, "stores_units", False):
            meta[UNITS_META] = self.units_mode()  # only a full build gives every chunk its units
        return meta

    def _write_incremental(self, batches: Iterator[tuple[FileRow, list[ChunkRow]]], removed: list[str],
                           skipped: dict[str, str]) -> None:
        group: list[tuple[FileRow, list[ChunkRow]]] = []
        first = True
        items = iter(batches)
        head = next(items, None)
        if head is None and not removed and skipped == self.store.skipped_map():
            # Nothing changed: no write, so the generation stays and no vector cache is invalidated.
            return
        written_skipped: dict[str, str] = {}
        for item in _chain(head, items):
            group.append(item)
            if len(group) >= WRITE_BATCH_FILES:
                self.store.replace_files(group, remove=removed if first else (), skipped=skipped, meta=self._meta())
                group, first, written_skipped = [], False, dict(skipped)
        # Files skipped after the last full group still need their `skipped` rows written.
        if group or first or written_skipped != skipped:
            self.store.replace_files(group, remove=removed if first else (), skipped=skipped, meta=self._meta())

    def _prepare(self, todo: list[MemoryFile], indexed: dict[str, FileRow], full: bool, stats: dict[str, int],
                 report: Callable[..., Any], skipped: dict[str, str],
                 failed: dict[str, list[float]], partial: dict[str, str],
                 unread: dict[str, str] | None = None) -> Iterator[tuple[FileRow, list[ChunkRow]]]:
        """Load, chunk and embed files, yielding rows file by file (batched embedding).

        A file that cannot be read or parsed is left out (its old rows stay), recorded in
        ``skipped`` with the reason and in ``failed`` with its mtime and size (one that is there but cannot be read
        in ``unread`` too); the rest goes on.
        A file read only in part is recorded in ``partial`` with why; one read whole is taken out of it.
        """
        pending: list[tuple[_Loaded, list[_Piece]]] = []
        pending_chunks = 0
        reread = self._limit_changed()  # unchanged transcripts hold other messages under the new limit
        done = 0
        group_limit = float("inf") if self._batch_mode() else EMBED_BATCH * 4
        # A store may hold paths of at most so many UTF-8 bytes (postgres: its btree index entries): a longer one
        # is skipped, as a file that cannot be read, instead of failing the write of every file with it.
        path_limit: int | None = getattr(self.store, "max_path_bytes", None)
        for f in todo:
            if self.cancel.is_set():
                raise SyncCancelled("sync cancelled: the memory manager is closing")
            if path_limit is not None and len(f.path.encode("utf-8")) > path_limit:
                reason = f"path longer than {path_limit} bytes, the most this index stores"
                log.warning("skipping %s: %s", f.path[:200] + "...", reason)
                skipped[f.path] = reason
                failed[f.path] = [f.mtime, f.size]
                continue
            try:
                old = indexed.get(f.path)
                tails = not full and not (reread and f.source == "sessions")
                loaded = self._load(f, old if tails else None)
                if loaded.partial is None:
                    partial.pop(f.path, None)
                else:
                    partial[f.path] = loaded.partial
                if not full and old is not None and old.hash == loaded.hash and not (
                        reread and f.source == "sessions"):
                    # Same content, new mtime: refresh the file row without re-chunking.
                    self.store.touch_file(f.path, loaded.file.mtime, loaded.file.size, loaded.lines)
                    done += 1
                    continue
                pieces = self._chunk(loaded)
            except (SyncCancelled, EmbeddingError):
                raise
            except FileNotFoundError:
                # Deleted since the listing (an editor's save by rename, a checkout): not a file left out, so not
                # named in status.skipped. Rows it had go with the next sync, which finds it gone (status is dirty
                # meanwhile); a file put back at once under that name is listed by it.
                log.info("%s was deleted while the sync ran", f.path)
                continue
            except Exception as exc:  # one bad file must never stop the sync of the others
                reason = f"cannot read: {exc.strerror}" if isinstance(exc, OSError) and exc.strerror else (
                    f"cannot index: {type(exc).__name__}: {exc}")
                log.warning("skipping %s: %s", f.path, reason)
                skipped[f.path] = reason
                failed[f.path] = [f.mtime, f.size]
                if unread is not None and isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError) and (
                        reason.startswith("cannot read: ")):
                    unread[f.path] = reason
                continue
            pending.append((loaded, pieces))
            pending_chunks += len(pieces)
            if pending_chunks >= group_limit:
                self._files_progress = (done, len(todo))
                yield from self._embed_and_build(pending, stats)
                done += len(pending)
                report("index", done, len(todo), f.path)
                pending, pending_chunks = [], 0
        if pending:
            self._files_progress = (done, len(todo))
            yield from self._embed_and_build(pending, stats)
            done += len(pending)
            report("index", done, len(todo))

    def _batch_mode(self) -> bool:
        """With a provider batch API, hand it everything at once: it splits and runs jobs concurrently."""
        p = self.choice.provider
        if p is None or not ((self.agent.memory_search.get("remote") or {}).get("batch") or {}).get("enabled", False):
            return False
        status = getattr(p, "batch_status", None)
        return bool(callable(status) and status().get("enabled"))

    def _chunk(self, loaded: _Loaded) -> list[_Piece]:
        """``(start, end, text, units)`` of each chunk of a file; ``units`` as :func:`chunk_units` (file lines)."""
        from ..chunking import chunk_text, split_utf8

        if loaded.pieces is not None:  # a transcript, chunked as it was read (:meth:`_load_transcript`)
            return loaded.pieces

        ch = self.agent.memory_search["chunking"]
        limit = self.choice.provider.max_input_bytes if self.choice.provider else None
        mode = self.units_mode()
        lmap = loaded.line_map

        def at(n: int) -> int:
            return lmap[min(n, len(lmap)) - 1] if lmap else n

        out: list[_Piece] = []
        seen: set[tuple[int, int, str]] = set()
        for c in chunk_text(loaded.text, ch["tokens"], ch["overlap"]):
            start, end = at(c.start_line), at(c.end_line)
            parts = split_utf8(c.text, limit) if limit else [c.text]
            # A chunk split for the provider's input limit keeps chunk vectors only: its lines span the parts.
            units = tuple((at(a), at(b), t) for a, b, t in chunk_units(c.text, c.lines, mode)) if len(parts) == 1 else ()
            for part in parts:
                key = (start, end, part)
                # A long repetitive line can yield identical pieces on the same lines: one chunk (one id) each.
                if part.strip() and key not in seen:
                    seen.add(key)
                    out.append((start, end, part, units))
        return out

    def _embed_and_build(self, pending: list[tuple[_Loaded, list[_Piece]]], stats: dict[str, int]) -> Iterator[tuple[FileRow, list[ChunkRow]]]:
        # Chunks and their units are embedded together: one cache lookup, full batches, shared lines once.
        texts = [t for _, pieces in pending for _, _, t, _ in pieces]
        unit_texts = list(dict.fromkeys(u[2] for _, pieces in pending for *_, units in pieces for u in units))
        vectors, ok = self._embed(texts + unit_texts, stats)
        unit_vecs = dict(zip(unit_texts, vectors[len(texts):], strict=True))
        p = self.choice.provider
        model = p.model if p else ""
        i = 0
        if self._new_words is not None:
            from .synonyms import vocabulary_words

            self._new_words.update(vocabulary_words(texts))
        for loaded, pieces in pending:
            rows = []
            for start, end, text, units in pieces:
                th = sha256(text)
                cid = sha256(f"{loaded.file.source}:{loaded.file.path}:{start}:{end}:{th}:{model}")
                vec = vectors[i]
                unit_rows = tuple(UnitRow(start_line=a, end_line=b, hash=sha256(t), embedding=unit_vecs[t])  # type: ignore[arg-type]
                                  for a, b, t in units if vec is not None and unit_vecs[t] is not None)
                rows.append(ChunkRow(id=cid, path=loaded.file.path, source=loaded.file.source, start_line=start,
                                     end_line=end, hash=th, text=text, embedding=vec, units=unit_rows))
                i += 1
            stats["indexed"] += 1
            stats["chunks"] += len(rows)
            f = loaded.file
            yield (FileRow(path=f.path, source=f.source, hash=loaded.hash if ok else PENDING + loaded.hash,
                           mtime=f.mtime, size=f.size, bad_utf8=loaded.bad_utf8, lines=loaded.lines,
                           tail=loaded.tail if ok else None, drop=loaded.drop, base=loaded.base, cut=loaded.cut), rows)

    def _check_dims(self, provider: str, widths: list[int]) -> None:
        """Reject a batch whose vectors differ in length (``widths``) from each other or from the index's."""
        own = set(widths)
        dims = set(own)
        if self._run_dims is not None:
            dims.add(self._run_dims)
        if len(dims) == 1:
            self._run_dims = dims.pop()
        elif len(own) > 1:
            raise EmbeddingError(
                f"{provider} returned vectors of different dimensions ({', '.join(map(str, sorted(own)))}) in one "
                "batch; the batch was rejected (check the endpoint and memorySearch.model)", provider=provider)
        elif own:
            # One width, but not the one the index's vectors (or this sync's earlier batches) have: the model behind
            # the same provider and model name changed, or the endpoint answers with another one now and then.
            raise EmbeddingError(
                f"{provider} returned vectors of {next(iter(own))} dimensions where the index's (or this sync's "
                f"earlier ones) have {self._run_dims}; the batch was rejected (check the endpoint and "
                "memorySearch.model; if the model changed on purpose, `symi-memory index --force` rebuilds the "
                "vectors with it)", provider=provider)

    def _embed(self, texts: list[str], stats: dict[str, int]) -> tuple[list[bytes | None], bool]:
        """Vectors for ``texts`` (cache first). Returns (vectors, all_ok)."""
        p = self.choice.provider
        if p is None or not texts:
            return [None] * len(texts), True
        cache_on = self.agent.memory_search["cache"]["enabled"]
        hashes = [sha256(t) for t in texts]
        cached = self.store.cache_get(p.id, p.model, p.fingerprint, hashes) if cache_on else {}
        missing = sorted({h: t for h, t in zip(hashes, texts, strict=True) if h not in cached}.items())
        fresh: dict[str, bytes] = {}
        step = max(1, len(missing)) if self._batch_mode() else EMBED_BATCH
        reused = len({h for h in hashes if h in cached})
        stats["cached"] += reused
        self._embed_progress(stats)
        try:
            if missing and self._down_in_this_sync is not None:
                raise EmbeddingError(self._down_in_this_sync, provider=p.id, retryable=True)
            for i in range(0, len(missing), step):
                part = missing[i : i + step]
                vecs = _documents_embedded(p, [t for _, t in part], guarded=self.choice.guarded)
                if len(vecs) != len(part):
                    raise EmbeddingError(f"{p.id} returned {len(vecs)} vectors for {len(part)} inputs", provider=p.id)
                packed = [_packed(p.id, v) for v in vecs]
                self._check_dims(p.id, [len(b) // 4 for b in packed])
                batch = dict(zip((h for h, _ in part), packed, strict=True))
                fresh.update(batch)
                if cache_on:
                    self._unsaved.update(batch)
                if cache_on and time.monotonic() - self._cached_at >= _commit_interval(self._cache_skips):
                    # Committed as they come, not once the group is done: a run stopped mid-way (SIGINT, SIGKILL,
                    # a later batch failing) keeps what it paid for, and the next run (a full rebuild resumed, most
                    # of all: its build file is discarded) takes these from the cache instead of asking again.
                    # A safety net: skipped when another process holds the write lock, never failing the run.
                    self._commit_vectors(spare=True)
                stats["computed"] += len(batch)
                self._embed_progress(stats)
        except EmbeddingError as exc:
            if exc.retryable and self._down_in_this_sync is None:
                # A timeout (or an endpoint still failing after its retries) is not waited on again this run.
                self._down_in_this_sync = str(exc)
            can_switch = not isinstance(exc, EmbeddingPending) and self.plugins is not None and not self.choice.used_fallback and self.choice.fallback_name not in (
                "none", "", self.choice.name)
            if can_switch:
                # The fallback takes over (the sync starts again with it): the batches this provider answered are
                # kept all the same, for its next build; a failing cache write does not stop the switch.
                self._commit_vectors(spare=True, leaving=True)
                self._unsaved = {}
                raise
            # Keep new text findable by keyword; the files stay marked pending and are retried next sync.
            self._failed_in_this_sync = f"{p.id}: {exc}"
            log.warning("embedding failed (%s); indexed %d chunks for keyword search only", exc, len(texts))
            self._commit_vectors(spare=self._full_run)
            return [cached.get(h) or fresh.get(h) for h in hashes], False
        except BaseException:
            # Stopped otherwise (SIGINT's KeyboardInterrupt, a cancelled sync, a builtin's bug): what came back
            # since the last commit is kept all the same, for the next run (unless another process holds the lock:
            # the run's way out is not held up by it).
            self._commit_vectors(spare=True, leaving=True)
            raise
        # The group's vectors: an incremental sync writes its rows next (a lock held past the retries fails it
        # either way); a full build's go to its build file, and a skipped commit's are stored by the swap.
        self._commit_vectors(spare=self._full_run)
        return [cached.get(h) or fresh.get(h) for h in hashes], True

    def _commit_vectors(self, *, spare: bool, leaving: bool = False) -> None:
        """Commit :attr:`_unsaved` to the embedding cache. ``spare``: a commit the run can do without (mid-run, or
        any of a full build, whose swap stores every vector): tried only if the write lock is free at once
        (``try_cache_put``, where the store has it), skipped on any error, the vectors kept for the next one, except
        on an index this process may only read or one damaged or on a failed disk (:data:`SURFACING_ERRORS`: the
        sync fails now, as before, not after paying the provider for every vector), unless ``leaving`` (the run is already on its way out with an error of its own). The others
        write as ``cache_put`` does, waiting for the lock, and fail the sync if that fails."""
        p = self.choice.provider
        items = self._unsaved
        if p is None or not items:
            self._cached_at = time.monotonic()
            return
        if not spare:
            self.store.cache_put(p.id, p.model, p.fingerprint, items)
            self._unsaved, self._cache_skips, self._cached_at = {}, 0, time.monotonic()
            return
        why = "the index is busy: another process is writing it"
        try:
            put = getattr(self.store, "try_cache_put", None)
            if put is not None:
                done = bool(put(p.id, p.model, p.fingerprint, items))
            else:
                self.store.cache_put(p.id, p.model, p.fingerprint, items)
                done = True
        except Exception as exc:
            if not leaving and (isinstance(exc, SURFACING_ERRORS) or _read_only(self.store)):
                raise
            done, why = False, " ".join(str(exc).split()) or type(exc).__name__
        self._cached_at = time.monotonic()
        if done:
            self._unsaved, self._cache_skips = {}, 0
            return
        self._cache_skips += 1
        (log.info if self._cache_skips == 1 else log.debug)(
            "%d vectors not committed to the embedding cache yet (%s): they go with the next commit", len(items), why)

    def _keep_vectors_left(self) -> None:
        """After a full build landed: commit what skipped commits left (:meth:`_commit_vectors`), waiting for the
        lock; a failure is logged, not raised (the rebuild is in)."""
        left = len(self._unsaved)
        try:
            self._commit_vectors(spare=False)
        except Exception as exc:
            log.warning("%d vectors computed by this rebuild could not be committed to the embedding cache (%s): "
                        "the next full rebuild asks the provider for them again", left,
                        " ".join(str(exc).split()) or type(exc).__name__)
        finally:
            self._unsaved = {}

    def _embed_progress(self, stats: dict[str, int]) -> None:
        """Tell the running sync's progress callback how far embedding got (after each provider batch): phase
        ``embed``, ``done``/``total`` the files written so far of those read, ``detail`` the vectors computed and
        those reused from the cache (a resumed rebuild reuses what the interrupted one computed)."""
        if self._progress is None:
            return
        done, total = self._files_progress
        self._progress(SyncProgress(phase="embed", done=done, total=total,
                                    detail=f"{stats['computed']} embedded, {stats['cached']} reused"))


def _commit_interval(skips: int) -> float:
    """Seconds from the last commit of vectors to the next try, after ``skips`` skipped in a row: twice as long each
    time, up to :data:`CACHE_COMMIT_MAX_SECONDS` (the exponent is capped: a rebuild skipping for hours, a row lock
    held throughout, must not overflow a float)."""
    return min(CACHE_COMMIT_SECONDS * 2 ** min(skips, 16), CACHE_COMMIT_MAX_SECONDS)


def _read_only(store: Any) -> bool:
    """Whether ``store`` says this process may only read it (a store without ``read_only``: no)."""
    check = getattr(store, "read_only", None)
    try:
        return bool(check()) if callable(check) else False
    except Exception:
        return False


def _documents_embedded(provider: Any, texts: list[str], *, guarded: bool) -> Any:
    """``provider.embed_documents(texts)``. For a third-party provider (``guarded``), anything it raises other than
    an :class:`EmbeddingError` (its HTTP client's error, a bug in its parsing) is one, naming the provider: the files
    are then indexed for keyword search and their vectors retried on the next sync, as after an endpoint's failure,
    never a failed sync. It is taken as the endpoint being down (``retryable``): the provider is not called again
    this sync, as it would be for every group of files (each perhaps waiting out its client's timeout). A builtin's
    other errors are bugs of ours, raised as they are."""
    try:
        vecs = provider.embed_documents(texts)
        len(vecs)
    except EmbeddingError:
        raise
    except Exception as exc:
        if not guarded:
            raise
        log.debug("the provider's traceback", exc_info=exc)
        raise EmbeddingError(f"{provider.id} failed ({type(exc).__name__}: {exc})", provider=provider.id,
                             retryable=True) from exc
    return vecs


def _packed(provider: str, vec: Any) -> bytes:
    """``vec`` as stored (float32 bytes); an :class:`EmbeddingError` for one no search could score against: not a
    flat list of numbers, empty, or holding NaN or infinity."""
    try:
        packed = pack_vector(vec)
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(f"{provider} returned a vector that is not a list of numbers ({exc})",
                             provider=provider) from None
    if not packed:
        raise EmbeddingError(f"{provider} returned an empty vector", provider=provider)
    if not all_finite(vec):
        raise EmbeddingError(f"{provider} returned a vector holding NaN or infinity", provider=provider)
    return packed
