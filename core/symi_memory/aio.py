"""An asyncio facade over :class:`~symi_memory.manager.MemoryManager`.

The manager is thread-safe and blocking (SQLite, HTTP embedding calls), so
each call runs in a worker thread with ``asyncio.to_thread`` and never
stalls the event loop of an async agent runtime.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from . import tools

if TYPE_CHECKING:
    from .manager import MemoryManager
    from .types import History, ReadResult, SearchResponse, SyncProgress, SyncReport

__all__ = ["AsyncMemoryManager"]


class AsyncMemoryManager:
    """Awaitable ``search``/``explain``/``history``/``read_file``/``sync``/``status``/``check_integrity``/``append``/
    ``close`` plus the three tools.

    Arguments are checked as :class:`~symi_memory.manager.MemoryManager` checks them (the same ValueError). A
    cancelled call other than :meth:`sync` finishes in its worker thread and its answer is dropped.
    """

    def __init__(self, manager: MemoryManager) -> None:
        self.manager = manager

    async def search(
        self,
        query: str,
        *,
        max_results: int | None = None,
        min_score: float | None = None,
        session_key: str | None = None,
        as_of: Any = None,
    ) -> SearchResponse:
        """Search memory (never waits for indexing); ``as_of`` as in :meth:`MemoryManager.search`."""
        return await asyncio.to_thread(
            self.manager.search, query, max_results=max_results, min_score=min_score, session_key=session_key,
            as_of=as_of,
        )

    async def explain(
        self,
        query: str,
        *,
        max_results: int | None = None,
        min_score: float | None = None,
        session_key: str | None = None,
        as_of: Any = None,
    ) -> dict[str, Any]:
        """The search of :meth:`search` with each candidate's score at every stage (:meth:`MemoryManager.explain`)."""
        return await asyncio.to_thread(
            self.manager.explain, query, max_results=max_results, min_score=min_score, session_key=session_key,
            as_of=as_of,
        )

    async def history(
        self, query: str, *, max_results: int | None = 30, min_score: float | None = None, as_of: Any = None
    ) -> History:
        """Every version of the fact that best answers ``query``, oldest first, with the stages skipped while
        finding it in its ``warnings`` (:meth:`MemoryManager.history`)."""
        return await asyncio.to_thread(
            self.manager.history, query, max_results=max_results, min_score=min_score, as_of=as_of
        )

    async def check_integrity(self) -> str | None:
        """Read the whole index for damage: None when intact, else what is wrong
        (:meth:`MemoryManager.check_integrity`). Cancelled, the check still runs to its end in its thread (seconds
        at 100,000 chunks; :meth:`close` waits for it) and damage it finds is still recorded for the next sync."""
        return await asyncio.to_thread(self.manager.check_integrity)

    async def read_file(
        self, path: str, *, from_line: int | None = None, lines: int | None = None
    ) -> ReadResult:
        """``memory_get``: read a memory file or a window of its lines."""
        return await asyncio.to_thread(self.manager.read_file, path, from_line=from_line, lines=lines)

    async def sync(
        self,
        *,
        reason: str = "manual",
        force: bool = False,
        progress: Callable[[SyncProgress], None] | None = None,
    ) -> SyncReport:
        """Bring the index up to date; ``progress`` is called from the worker thread.

        Cancelling the awaiting task (``asyncio.timeout``, ``wait_for``) stops the sync in the worker thread at its
        next progress step (a few hundred chunks; a backend that reports no progress runs on): ``progress`` is not
        called again, what was written stays consistent and the next sync carries on from it.
        """
        stop = threading.Event()

        def report(step: SyncProgress) -> None:
            if stop.is_set():
                from .index.indexer import SyncCancelled

                raise SyncCancelled("sync cancelled: the task awaiting it was cancelled")
            if progress is not None:
                progress(step)

        try:
            return await asyncio.to_thread(self.manager.sync, reason=reason, force=force, progress=report)
        except asyncio.CancelledError:
            stop.set()
            raise

    async def status(self) -> dict[str, Any]:
        """The status dict of behaviour §9."""
        return await asyncio.to_thread(self.manager.status)

    async def close(self) -> None:
        """Close the underlying manager."""
        await asyncio.to_thread(self.manager.close)

    async def append(self, text: str, *, target: str = "daily", allow_duplicate: bool = False) -> dict[str, Any]:
        """Append with dedup (:meth:`MemoryManager.append`)."""
        return await asyncio.to_thread(self.manager.append, text, target=target, allow_duplicate=allow_duplicate)

    async def memory_search(
        self, params: Mapping[str, Any], *, session_key: str | None = None
    ) -> dict[str, Any]:
        """The ``memory_search`` tool: params dict in, tool JSON out (errors as the error shape)."""
        return await asyncio.to_thread(tools.memory_search, self.manager, params, session_key=session_key)

    async def memory_get(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The ``memory_get`` tool."""
        return await asyncio.to_thread(tools.memory_get, self.manager, params)

    async def memory_append(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The ``memory_append`` tool."""
        return await asyncio.to_thread(tools.memory_append, self.manager, params)

    async def __aenter__(self) -> AsyncMemoryManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
