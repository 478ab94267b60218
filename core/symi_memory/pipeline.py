"""After fusion: reranker -> post-processors -> sort -> minScore -> maxResults.

Turning the result into hits (snippets, citations) is :mod:`symi_memory.presentation`.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import operator
import os
import reprlib
import select
import threading
import time
import weakref
from _thread import allocate_lock as _allocate_lock
from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from operator import attrgetter, ge
from typing import TYPE_CHECKING, Any

import attrs

from . import forking
from .closing import close_plugin_object
from .specs import LineVector, PostProcessContext, PostProcessor, Reranker
from .types import Candidate, LazyCandidates

if TYPE_CHECKING:
    from .plugins import Plugins

__all__ = ["DEFAULT_STAGE_DEADLINE_MS", "Pipeline", "SORT_ORDER", "StageState"]

log = logging.getLogger("symi_memory.search")

SORT_ORDER = 500

#: The default of ``query.stageDeadlineMs``: how long a search waits for a reranker call or a third-party
#: post-processor's call before it answers without that stage.
DEFAULT_STAGE_DEADLINE_MS = 5000


@attrs.define
class StageState:
    """One bounded search stage (the reranker, a third-party post-processor): who it is and how its last call
    went, for ``status`` and the search's warnings."""

    kind: str  # "reranker" or "postprocessor"
    name: str
    plugin: str
    order: int | None = None
    #: None (not called yet in this process), "ok", "failed" (raised or answered in the wrong shape),
    #: "timedOut" (past the deadline; it may still be running), or "skipped" (an earlier call still running).
    last_call: str | None = None
    last_reason: str | None = None
    last_at: float | None = None
    #: The "done" lock of each call that timed out and has not returned yet (each released once its call returns;
    #: those released are dropped at the next call). While any is held, the stage is skipped at once: two
    #: concurrent searches may each leave a call running, and the one that returns first does not make the stage
    #: callable again.
    hung: list[Any] = attrs.field(factory=list)
    #: Idle worker threads of this stage (each waits for its next call), and the pid that started them.
    idle: list[_StageThread] = attrs.field(factory=list)
    pid: int = attrs.field(factory=os.getpid)
    lock: threading.Lock = attrs.field(factory=threading.Lock)
    #: Set by :meth:`stop` (the pipeline closed): idle threads end, a hung one ends once its call returns.
    stopped: bool = False

    def __attrs_post_init__(self) -> None:
        forking.track(self)

    def _after_fork_in_child(self) -> None:
        """In a forked child: a parent thread inside ``lock`` at the fork (a search handing a call over, a worker
        going back to idle) left it held for ever, and the child's first call of this stage waited for it; the
        parent's threads (idle or hung) are not here either. Their pipes :data:`_PIPES` closes."""
        self.lock = threading.Lock()
        self.idle, self.hung, self.pid = [], [], os.getpid()

    def _keeps(self) -> bool:
        """Whether a worker done with its call goes back to idle (under ``lock``), or ends."""
        return self.pid == os.getpid() and not self.stopped and len(self.idle) < _StageThread.IDLE_KEPT

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            idle, self.idle = self.idle, []
        for worker in idle:
            worker.end()

    @property
    def label(self) -> str:
        what = "reranker" if self.kind == "reranker" else "post-processor"
        return f"{what} {self.name!r} of plugin {self.plugin!r}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "plugin": self.plugin}
        if self.order is not None:
            out["order"] = self.order
        out["lastCall"] = self.last_call
        out["lastReason"] = self.last_reason
        out["hung"] = any(done.locked() for done in self.hung)
        return out

    def record(self, outcome: str, reason: str | None) -> None:
        self.last_call, self.last_reason, self.last_at = outcome, reason, time.time()

    def call(self, fn: Callable[[], Any], deadline_s: float) -> tuple[str, Any]:
        """``fn()`` on a worker thread of this stage, waited for at most ``deadline_s``: ``("ok", value)``,
        ``("failed", exception)``, ``("timedOut", None)``, or ``("skipped", None)`` at once, without calling it,
        while a call that timed out earlier has not returned (a thread cannot be killed: they must not pile up).
        ``deadline_s`` 0: no deadline, ``fn()`` on this thread (no hand-over to wait for).

        The worker is long-lived, reused call after call (:class:`_StageThread`: woken through a pipe, so that
        neither side wakes the other holding the interpreter lock); nothing is allocated per call but the job and
        its "done" lock."""
        if deadline_s <= 0:
            try:
                return "ok", fn()
            except Exception as exc:
                return "failed", exc
        with self.lock:
            if self.pid != os.getpid():  # a forked child: the parent's threads (and a hung call) are not here
                self.idle, self.hung, self.pid = [], [], os.getpid()
            if self.hung:
                self.hung = [done for done in self.hung if done.locked()]
                if self.hung:
                    return "skipped", None
            worker = self.idle.pop() if self.idle else None
        if worker is None:
            worker = _StageThread(self)
        done = _allocate_lock()
        done.acquire()
        job = [fn, done, _NOTHING, _NOTHING, False]
        try:
            answered = worker.run(job, deadline_s)
        except BaseException:  # interrupted while waiting (a signal handler raised): the call goes on without it
            with self.lock:
                if not done.acquire(False):
                    job[4] = True  # the worker goes back to idle once the call returns (nobody waits on its pipe)
                    worker = None
                elif self._keeps():
                    self.idle.append(worker)
                    worker = None
            if worker is not None:
                worker.end()
            raise
        with self.lock:  # the worker releases ``done`` holding it: the call returned, or this search gives up on it
            if not answered and not done.acquire(False):
                # The worker goes back to idle (or ends) by itself once the call returns.
                job[4] = True
                self.hung.append(done)
                return "timedOut", None
            # Back to idle only now that this search no longer waits on the worker's pipe: a search handed it
            # while this one still polled that pipe shared it (poll() raised "concurrent poll() invocation", or
            # one search read the byte that was to wake the other).
            keep = self._keeps()
            if keep:
                self.idle.append(worker)
        if not keep:
            worker.end()
        if job[3] is not _NOTHING:
            return "failed", job[3]
        return "ok", job[2]


_NOTHING = object()


class _StageThread:
    """A daemon thread running one stage's calls, one at a time; back in the stage's idle list after each.

    A call is ``job`` (``[fn, done, value, error, gave_up]``, ``done`` a held raw lock): :meth:`run` hands it over
    and waits; the thread fills in the value or the error and releases ``done``. The search that handed it over puts
    the worker back in the idle list once it has its answer, or, when it stopped waiting (``gave_up``, set under the
    stage's lock), the thread does: one search at a time waits on a worker's pipe. ``job`` None ends the thread.

    Where ``select.poll`` exists each side is woken by a byte written to a pipe: ``os.write`` lets go of the
    interpreter lock around the system call, so the side woken finds it free. Waking through a lock (an Event, a
    queue, a raw lock) is done holding it: on a busy host the woken thread often took the waker's core at once,
    found the interpreter lock held and slept again, and the waker, pushed off its core mid-search, waited for
    one (milliseconds per search). Elsewhere (Windows) two raw locks."""

    IDLE_KEPT = 4  # more idle threads than this (after concurrent searches) end

    __slots__ = ("__weakref__", "_closing", "_done_r", "_done_w", "_poll", "_stage", "_wake_r", "_wake_w", "ident",
                 "job", "wake")

    def __init__(self, stage: StageState) -> None:
        self._stage = stage
        self.job: list[Any] | None = None
        self.wake: Any = None
        self._poll: Any = None
        self._closing: Any = None
        self.ident: int | None = None
        if _POLL is not None:
            self._wake_r, self._wake_w, self._done_r, self._done_w = _PIPES.opened(self)
            os.set_blocking(self._done_r, False)  # bytes of calls that timed out are drained, never waited for
            os.set_blocking(self._done_w, False)  # nor written into a full pipe: one byte there wakes as well
            self._poll = _POLL()
            self._poll.register(self._done_r, select.POLLIN)
            closing = self._closing = weakref.finalize(
                self, _PIPES.close_recorded, (self._wake_r, self._wake_w, self._done_r, self._done_w))
            # Not at exit: a daemon worker still in a hung call would write into a number reused by then.
            closing.atexit = False
        else:  # Windows
            self.wake = _allocate_lock()
            self.wake.acquire()
        threading.Thread(target=self._loop, daemon=True, name=f"symi-stage-{stage.name}").start()

    @property
    def fds(self) -> tuple[int, ...]:
        return (self._wake_r, self._wake_w, self._done_r, self._done_w) if self._poll is not None else ()

    def run(self, job: list[Any], timeout: float) -> bool:
        """Hand ``job`` over and wait at most ``timeout`` seconds for it: False when it has not returned."""
        done = job[1]
        self.job = job
        if self._poll is None:  # Windows
            self.wake.release()
            return bool(done.acquire(True, timeout))
        os.write(self._wake_w, b"\0")
        end = time.monotonic() + timeout
        while not done.acquire(False):  # the call may have returned before this thread had the interpreter lock
            left = end - time.monotonic()
            if left <= 0 or not self._poll.poll(max(1, math.ceil(left * 1000))):
                return bool(done.acquire(False))
            with contextlib.suppress(BlockingIOError):
                os.read(self._done_r, 4096)  # this call's byte, and those of earlier calls that timed out
        return True

    def end(self) -> None:
        self.job = None
        if self._poll is None:  # Windows
            self.wake.release()
        else:
            os.write(self._wake_w, b"\0")

    def _wait(self) -> None:
        if self._poll is None:  # Windows
            self.wake.acquire()
        else:
            os.read(self._wake_r, 1)

    def _loop(self) -> None:
        self.ident = threading.get_ident()
        try:
            self._serve()
        finally:
            self.ident = None  # a later thread may be given the same ident: a forked child keeps its pipes only

    def _serve(self) -> None:
        stage = self._stage
        while True:
            self._wait()
            job = self.job
            if job is None:
                return
            self.job = None
            try:
                job[2] = job[0]()
            except BaseException as exc:  # handed to the waiting search
                job[3] = exc
            # Nothing of the call is kept while the thread waits for the next (its closure holds what the search
            # handed the stage, its value the answer): the caller holds ``job`` until it has read it.
            done = job[1]
            with stage.lock:  # ``gave_up`` is read under it: the search decides under it that it stops waiting
                gave_up, job = job[4], None
                keep = True  # the search waiting for the call puts the worker back to idle (or ends it)
                if gave_up:  # the search timed out: nobody waits on this worker any more
                    keep = stage._keeps()
                    if keep:  # idle before ``done`` is released: the next call (no longer skipped) reuses it
                        stage.idle.append(self)
                done.release()
            if self._poll is not None:
                with contextlib.suppress(BlockingIOError):
                    os.write(self._done_w, b"\0")
            if not keep:
                return


_POLL: Any = getattr(select, "poll", None)


class _WorkerPipes(forking.Descriptors):
    """The pipes of this process's stage workers (:class:`_StageThread`), two each, whose copies a forked child
    closes: nothing there reads or writes them (the parent's worker threads do not exist in the child, though their
    frames keep the workers referenced), and they stayed open for the child's life, four descriptors per worker per
    fork (a pre-forking server's children, a multiprocessing pool's workers).

    A fork in the instant between a worker's ``os.pipe()`` and the record of its pipes left the child up to four
    descriptors nothing knew of; so the pipes are made and recorded in one step under the guard a fork takes first
    (:class:`~symi_memory.forking.Descriptors`, as the qmd update lock's). Reentrant: a worker's pipes are closed by
    its finalizer once it is collected, which the garbage collector may run inside the guard. A child forked by a
    stage call, on its worker's thread, keeps that worker's pipes: the thread goes on there, waiting on them."""

    def __init__(self) -> None:
        super().__init__(reentrant=True)
        self.workers: weakref.WeakSet[_StageThread] = weakref.WeakSet()

    def opened(self, worker: _StageThread) -> tuple[int, int, int, int]:
        """Two new pipes for ``worker``, recorded: ``(wake_r, wake_w, done_r, done_w)``."""
        with self.opening() as record:
            wake_r, wake_w = os.pipe()
            try:
                done_r, done_w = os.pipe()
            except OSError:  # descriptors ran out (EMFILE): the search goes on without the stage, leaking none
                os.close(wake_r)
                os.close(wake_w)
                raise
            for fd in (wake_r, wake_w, done_r, done_w):
                record(fd)
            self.workers.add(worker)
        return wake_r, wake_w, done_r, done_w

    def _kept_in_child(self) -> set[int]:
        here = threading.get_ident()
        return {fd for worker in list(self.workers) if worker.ident == here for fd in worker.fds}


_PIPES = _WorkerPipes()


def _takes_plugin_settings(factory: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin or C callable without a signature
        return False
    p = params.get("plugin_settings")
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


_SCORE = attrgetter("score")


def _sorted(candidates: Sequence[Candidate]) -> list[Candidate] | LazyCandidates:
    """``candidates`` best first (stable: equal scores keep their order)."""
    return candidates if isinstance(candidates, (list, LazyCandidates)) and _best_first(candidates) else sorted(
        candidates, key=lambda c: -c.score)


def _best_first(candidates: Sequence[Candidate]) -> bool:
    """True when no candidate scores above the one before it (and none scores NaN, which compares as neither): the
    order ``_sorted`` gives them (most searches: the backend's order, which the default post-processors keep)."""
    scores = candidates.scores if isinstance(candidates, LazyCandidates) else list(map(_SCORE, candidates))
    return all(map(ge, scores, islice(scores, 1, None)))


@attrs.define
class Pipeline:
    """The backend-agnostic tail of every search."""

    processors: list[tuple[int, str, PostProcessor]]
    reranker: Reranker | None = None
    rerank_top_n: int = 20
    clock: Any = time.time
    #: Processors of third-party plugins, by name -> plugin id: one that raises or hands back what is not a sequence
    #: of candidates with finite scores is skipped for that search (logged), never fails it. The builtins' own
    #: errors are bugs of ours and are raised as they are.
    guarded: Mapping[str, str] = attrs.field(factory=dict)
    #: How warnings name the reranker: its name and plugin (what the operator turns off).
    reranker_label: str = "?"
    #: ``query.stageDeadlineMs`` in seconds: how long a search waits for a reranker call or a guarded processor's
    #: call (on a worker thread) before it answers without that stage.
    deadline_s: float = DEFAULT_STAGE_DEADLINE_MS / 1000
    #: The reranker's and each guarded processor's :class:`StageState` (for ``status``), by kind and name.
    reranker_state: StageState | None = None
    stage_states: dict[str, StageState] = attrs.field(factory=dict)
    #: Why the configured reranker is not used (its factory failed, it is unavailable), for ``status``.
    reranker_reason: str | None = None

    @classmethod
    def from_settings(cls, plugins: Plugins, memory_search: dict[str, Any], reranker: Reranker | None = None,
                      *, entries: Mapping[str, Any] | None = None, reranker_reason: str | None = None) -> Pipeline:
        """Every registered post-processor whose factory returns one, in order.

        ``entries`` is ``plugins.entries``: a factory that names a
        ``plugin_settings`` parameter gets its plugin's table by keyword.
        """
        hybrid = memory_search["query"]["hybrid"]
        from .plugins import OWN_DISTRIBUTION

        procs = []
        guarded: dict[str, str] = {}
        for spec in plugins.postprocessors.values():
            owner = plugins.owners.get("postprocessors", {}).get(spec.name, "")
            if plugins.dists.get(owner, ("",))[0] != OWN_DISTRIBUTION:
                guarded[spec.name] = owner
            try:
                if _takes_plugin_settings(spec.factory):
                    own = plugins.entry_settings("postprocessors", spec.name, entries or {})
                    factory: Any = spec.factory  # its signature names plugin_settings, checked just above
                    proc = factory(hybrid, plugin_settings=own)
                else:
                    proc = spec.factory(hybrid)
            except Exception as exc:
                if spec.name not in guarded:
                    raise
                log.warning("post-processor %r of plugin %r failed to start (%s: %s); searches run without it",
                            spec.name, guarded[spec.name], type(exc).__name__, exc)
                continue
            if proc is not None and spec.name in guarded and not callable(getattr(proc, "process", None)):
                log.warning("post-processor %r of plugin %r failed to start (its factory returned %s, not a "
                            "PostProcessor: it has no process method); searches run without it",
                            spec.name, guarded[spec.name], answer_shape(proc))
                continue
            if proc is not None:
                procs.append((spec.order, spec.name, proc))
        procs.sort(key=lambda p: (p[0], p[1]))
        rerank = memory_search["query"]["rerank"]
        label = "?"
        state = None
        name = rerank.get("provider") or "none"
        if name != "none":
            owner = plugins.owners.get("rerankers", {}).get(name, "?")
            label = f"{name!r} of plugin {owner!r}"
            state = StageState(kind="reranker", name=name, plugin=owner)
        states = {n: StageState(kind="postprocessor", name=n, plugin=guarded[n], order=order)
                  for order, n, _ in procs if n in guarded}
        deadline = memory_search["query"].get("stageDeadlineMs", DEFAULT_STAGE_DEADLINE_MS)
        return cls(processors=procs, reranker=reranker, rerank_top_n=rerank["topN"], guarded=guarded,
                   reranker_label=label, deadline_s=float(deadline) / 1000, reranker_state=state,
                   stage_states=states, reranker_reason=None if reranker is not None else reranker_reason)

    def describe(self, plugins: Plugins) -> dict[str, Any]:
        """``status``'s ``reranker`` (None when none is configured) and ``postprocessors`` (those running, in
        order): each one's name, plugin and how its last call went in this process."""
        rr: dict[str, Any] | None = None
        st = self.reranker_state
        if st is not None:
            rr = {**st.to_dict(), "active": self.reranker is not None, "reason": self.reranker_reason}
        owners = plugins.owners.get("postprocessors", {})
        procs = []
        for order, name, _ in self.processors:
            state = self.stage_states.get(name)
            procs.append({**state.to_dict(), "running": True} if state is not None
                         else {"name": name, "plugin": owners.get(name, "?"), "order": order, "running": True,
                               "lastCall": None, "lastReason": None, "hung": False})
        return {"reranker": rr, "postprocessors": procs}

    def _skip_reason(self, outcome: str) -> str:
        return self._skip_reason_of(outcome, self.deadline_s)

    @staticmethod
    def _skip_reason_of(outcome: str, deadline_s: float) -> str:
        if outcome == "timedOut":
            return f"did not answer within {deadline_s:g} s (query.stageDeadlineMs)"
        return (f"has not returned from an earlier call that took longer than {deadline_s:g} s "
                "(query.stageDeadlineMs); not called again until it does")

    def close(self) -> None:
        for state in (self.reranker_state, *self.stage_states.values()):
            if state is not None:
                state.stop()
        if self.reranker is not None:
            close_plugin_object(self.reranker, f"reranker {self.reranker_label}")

    def rerank(self, query: str, candidates: list[Candidate]) -> list[Candidate]:
        out = self._reranked(query, candidates)
        return candidates if out is None else out

    def _reranked(self, query: str, candidates: Sequence[Candidate],
                  warnings: list[str] | None = None) -> list[Candidate] | None:
        """The reranked top N of ``candidates`` with the reranker's scores; None without a reranker, without
        candidates, or when the reranker fails, misses ``deadline_s`` or is still running an earlier call that
        missed it (logged, and said in ``warnings``)."""
        reranker = self.reranker
        if reranker is None or not candidates:
            return None
        head = candidates[: self.rerank_top_n]
        texts = [c.text for c in head]
        state = self.reranker_state
        try:
            if state is None:
                pairs = _read_pairs(reranker.rerank(query, texts, len(head)))
            else:
                # Its answer is read on the worker too: a generator's work runs as it is read.
                outcome, got = state.call(lambda: _read_pairs(reranker.rerank(query, texts, len(head))),
                                          self.deadline_s)
                if outcome != "ok":
                    if outcome == "failed":
                        raise got
                    why = self._skip_reason(outcome)
                    state.record(outcome, why)
                    _say(f"reranker {self.reranker_label} {why}; keeping the fused order", warnings)
                    return None
                # What it returned was checked as a whole (_read_pairs) before any of it is used: None, a dict, an
                # index that is not an integer or a score that is not a finite number (NaN would compare as
                # neither better nor worse) is the reranker's bug, and the search keeps the fused order as when
                # it raises.
                pairs = got
        except Exception as exc:  # a reranker failure never fails the search
            why = f"failed ({type(exc).__name__}: {exc})"
            if state is not None:
                state.record("failed", why)
            _say(f"reranker failed ({type(exc).__name__}: {exc}; reranker {self.reranker_label}); keeping the "
                 "fused order", warnings)
            return None
        if state is not None:
            state.record("ok", None)
        seen = set()
        out = []
        for idx, score in pairs:
            if 0 <= idx < len(head) and idx not in seen:
                seen.add(idx)
                out.append(attrs.evolve(head[idx], score=max(0.0, min(1.0, score))))
        # Only the reranked top N go on: fused scores are not comparable with the reranker's
        # relevance scores, so mixing the two would make minScore and the order meaningless.
        return out

    def run(self, query: str, candidates: Sequence[Candidate], *, max_results: int, min_score: float,
            now: float | None = None, as_of: float | None = None,
            vectors: Callable[[Sequence[str]], Mapping[str, Sequence[float]]] | None = None,
            written_at: Callable[[Sequence[Candidate]], Mapping[str, tuple[float, float]]] | None = None,
            trace: dict[str, Any] | None = None,
            line_vectors: Callable[[Sequence[str]], Mapping[str, Sequence[LineVector]]] | None = None,
            query_vector: Sequence[float] | None = None,
            section_dates: Callable[[Sequence[Candidate]], Mapping[str, Mapping[int, float]]] | None = None,
            line_analysis: Callable[[Sequence[str]], Mapping[str, bytes]] | None = None,
            plain: Callable[[Sequence[str]], Mapping[str, bool]] | None = None,
            warnings: list[str] | None = None,
            ) -> list[Candidate]:
        """Rerank, post-process, sort and cut ``candidates``.

        A stage skipped (the reranker or a third-party post-processor that raised, answered in the wrong shape,
        missed ``query.stageDeadlineMs`` or is still running a call that missed it) is logged and named in
        ``warnings`` (a list to append to) and in ``trace["skipped"]``.

        ``as_of`` (epoch seconds, exclusive) first leaves out what was written
        at or after it (:func:`symi_memory.supersession.written_after`);
        ``section_dates`` gives the dates headings and section intros of
        undated notes give their lines (``{id: {line: epoch seconds}}``);
        ``plain`` the backend's stored plain-chunk answers
        (``PostProcessContext.plain``).
        ``trace`` (a dict to fill, for ``explain``) records each stage's scores
        and ranks per candidate id and why a candidate was cut; it never
        changes the result.
        """
        # The backend's candidates made as they are read (LazyCandidates) stay so while nothing needs them all: the
        # processors that read them through the Sequence interface alone (``takes_lazy_candidates``) get them.
        items: Sequence[Candidate] = candidates if isinstance(candidates, LazyCandidates) else list(candidates)
        handed = items  # the backend's candidates as it handed them out (``plain``'s answers are of their texts)
        if trace is not None:
            _trace_stage(trace, "fused", items)
        left_out: list[Candidate] = []
        if as_of is not None:
            items = exclude_written_after(query, list(items), as_of, written_at, section_dates, line_vectors,
                                          query_vector, line_analysis)
            kept_ids = {c.id for c in items}
            left_out = [c for c in candidates if c.id not in kept_ids]
            if trace is not None:
                _trace_stage(trace, "asOf", items)
                for c in candidates:
                    if c.id not in kept_ids:
                        trace["candidates"][c.id]["outcome"] = "written after asOf"
        if trace is not None and warnings is None:
            warnings = []
        said = len(warnings) if warnings is not None else 0
        reranked = self._reranked(query, items, warnings)
        if reranked is not None:
            items = reranked
            if left_out:
                # What was left out goes to processors on the results' scale: fused scores are not comparable
                # with the reranker's. One more reranker call, in an "as of" search only; none when it fails.
                left_out = self._reranked(query, sorted(left_out, key=lambda c: -c.score), warnings) or []
        if trace is not None and self.reranker is not None:
            _trace_stage(trace, "rerank", items)
        # The processor being run and the candidates it was handed (``_plain_of_handed`` reads them).
        given: Sequence[Candidate] = handed
        read_plain: Callable[[], None] | None = None
        if plain is not None and self.deadline_s > 0 and self.stage_states:
            # A backend keeps what this search read per searching thread (``candidate_plain`` answers from it): a
            # third-party processor run on its stage's worker thread would be told nothing. Its answers for the
            # candidates handed out are read here, on this thread, at most once, the first time one is asked for.
            plain, read_plain = _plain_read_here(plain, handed)
        ctx = PostProcessContext(query=query, now=self.clock() if now is None else now, as_of=as_of,
                                 vectors=vectors, written_at=written_at, line_vectors=line_vectors,
                                 query_vector=query_vector, line_analysis=line_analysis, left_out=tuple(left_out),
                                 plain=None if plain is None else _plain_of_handed(plain, handed, lambda: given,
                                                                                   left_out))
        sorted_yet = False
        guarded = self.guarded
        for order, name, proc in self.processors:
            if order >= SORT_ORDER and not sorted_yet:
                items, sorted_yet = _sorted(items), True
            given = items if isinstance(items, LazyCandidates) and getattr(proc, "takes_lazy_candidates", False) \
                else tuple(items)
            if guarded and name in guarded:  # none with the builtins alone: no look-up a processor
                if read_plain is not None:
                    read_plain()
                items = _guarded_process(name, guarded[name], proc, given, ctx, items, self.stage_states.get(name),
                                         self.deadline_s, warnings)
            else:
                got = proc.process(given, ctx)
                items = got if isinstance(got, LazyCandidates) else list(got)
            if trace is not None:
                _trace_stage(trace, name, items)
        ordered = _best_first(items)
        if not sorted_yet and not ordered:
            items = _sorted(items)
            ordered = _best_first(items)  # unless a score is NaN
        # Best first, those at minScore or above come first: the first maxResults of them are among the first
        # maxResults (unless a NaN score, which compares as neither, broke the order). A negative maxResults
        # (``history`` passes it unchecked) cuts from the end of those at minScore or above: all are read.
        kept, repeats = _first_of_their_lines(items, max_results if ordered and max_results >= 0 else None,
                                              min_score)
        if trace is not None:
            _trace_stage(trace, "final", items)
            trace["skipped"] = list(warnings[said:]) if warnings is not None else []
            rows = trace["candidates"]
            returned = {c.id for c in kept[:max_results]}
            for c in items:
                if c.id in returned:
                    rows[c.id]["outcome"] = "returned"
                elif c.id in repeats:
                    rows[c.id]["outcome"] = "same lines as a better hit"
                elif c.score < min_score:
                    rows[c.id]["outcome"] = "below minScore"
                else:
                    rows[c.id]["outcome"] = "beyond maxResults"
            for row in rows.values():
                row.setdefault("outcome", "dropped by reranker (beyond topN)" if "rerank" in trace["stages"]
                               else "dropped by a post-processor")
        return kept[:max_results]


def _say(warning: str, warnings: list[str] | None) -> None:
    log.warning("%s", warning)
    if warnings is not None:
        warnings.append(warning)


def _first_of_their_lines(items: Sequence[Candidate], limit: int | None,
                          min_score: float) -> tuple[list[Candidate], set[str]]:
    """The candidates at ``min_score`` or above, in order, each the first of its ``(source, path, start, end)``: the
    pieces of a line longer than a chunk all cite that line, and a hit more of it is the same lines for the reader
    (memory_get) taking a result's place; what a piece left out so ``supersedes`` is added to the kept one's. Also
    the ids left out so.

    With a ``limit`` the candidates are best first: they are read a slice at a time, no more than ``limit`` still
    wanted (a backend's :class:`LazyCandidates` makes only those read: iterating them makes every one), and the
    first below ``min_score`` ends the reading (none after it reaches it). None: all are read."""
    kept: list[Candidate] = []
    seen: dict[tuple[str, str, int, int], int] = {}  # -> its place in ``kept``
    repeats: set[str] = set()
    n = len(items)
    start = 0
    while start < n:
        if limit is None:
            batch, end = items, n
        else:
            wanted = limit - len(kept)
            if wanted <= 0:
                break
            end = min(n, start + wanted)
            batch = items[start:end]
        for c in batch:
            if not c.score >= min_score:
                if limit is not None:
                    return kept, repeats
                continue
            lines = (c.source, c.path, c.start_line, c.end_line)
            at = seen.get(lines)
            if at is not None:
                repeats.add(c.id)
                if c.supersedes:
                    # What the piece left out supersedes, those lines supersede: the result returned for them says so
                    # (else an older hit's supersededBy names lines whose result lists nothing they supersede). An
                    # older hit ranks below what supersedes it, so the piece is read before any older hit it names.
                    first = kept[at]
                    more = tuple(s for s in c.supersedes if s not in first.supersedes)
                    if more:
                        kept[at] = attrs.evolve(first, supersedes=(*first.supersedes, *more))
                continue
            seen[lines] = len(kept)
            kept.append(c)
        start = end
    return kept, repeats


def _guarded_process(name: str, plugin_id: str, proc: PostProcessor, given: Sequence[Candidate],
                     ctx: PostProcessContext, items: Sequence[Candidate], state: StageState | None = None,
                     deadline_s: float = DEFAULT_STAGE_DEADLINE_MS / 1000,
                     warnings: list[str] | None = None) -> Sequence[Candidate]:
    """A third-party processor's answer, or ``items`` (what it was handed) when it raised, its answer is not a
    sequence of :class:`Candidate` records with finite scores (a NaN score compares as below any ``minScore``: every
    hit would be lost without a word), it missed ``deadline_s`` (run on ``state``'s worker thread), or a call of
    it that missed the deadline earlier is still running. The search goes on without it, saying so in the log
    and ``warnings``."""
    label = f"post-processor {name!r} of plugin {plugin_id!r}"
    try:
        if state is None:
            got = _read_answer(proc.process(given, ctx))
        else:
            # Its answer is read on the worker too (a generator's work runs as it is read): the core's own lazy
            # sequence handed back is read here, below.
            outcome, got = state.call(lambda: _read_answer(proc.process(given, ctx)), deadline_s)
            if outcome == "failed":
                raise got
            if outcome != "ok":
                why = Pipeline._skip_reason_of(outcome, deadline_s)
                state.record(outcome, why)
                _say(f"{label} {why}; skipped for this search", warnings)
                return items
        out = list(got)  # a LazyCandidates too: each candidate is looked at
        bad = next((c for c in out if not isinstance(c, Candidate) or not math.isfinite(c.score)), None)
        if bad is not None:
            what = (f"a candidate scored {bad.score!r}" if isinstance(bad, Candidate)
                    else f"a {type(bad).__name__}, not a Candidate")
            raise TypeError(f"it returned {what}")
    except Exception as exc:
        why = f"failed ({type(exc).__name__}: {exc})"
        if state is not None:
            state.record("failed", why)
        _say(f"{label} {why}; skipped for this search", warnings)
        return items
    if state is not None:
        state.record("ok", None)
    return got if isinstance(got, LazyCandidates) else out


_SHAPE = reprlib.Repr()
_SHAPE.maxstring = _SHAPE.maxother = 60


def answer_shape(got: Any) -> str:
    """What a plugin returned, for an error message: ``None``, or its type and a short repr."""
    if got is None:
        return "None"
    if type(got).__repr__ is object.__repr__:  # no repr of its own: its address says nothing
        return f"a {type(got).__qualname__} object"
    return f"{type(got).__name__} {_SHAPE.repr(got)}"


def _not_a_sequence(got: Any) -> bool:
    """Whether a plugin's answer cannot be read as a sequence of items (a dict would be read as its keys)."""
    return got is None or isinstance(got, (str, bytes, Mapping)) or not hasattr(got, "__iter__")


def _read_answer(got: Any) -> Any:
    """A processor's answer read whole (a list), unless it is the core's :class:`LazyCandidates`; TypeError, saying
    what it returned, when it is not a sequence of candidates at all (None, a dict, a string)."""
    if isinstance(got, LazyCandidates):
        return got
    if _not_a_sequence(got):
        raise TypeError(f"it returned {answer_shape(got)}, not a sequence of Candidate records")
    return list(got)


def _read_pairs(got: Any) -> list[tuple[int, float]]:
    """A reranker's answer read whole and checked: ``(index, score)`` pairs, an integer index and a finite score.
    TypeError or ValueError, saying what it returned, for anything else."""
    if _not_a_sequence(got):
        raise TypeError(f"it returned {answer_shape(got)}, not a list of (index, score) pairs")
    pairs = []
    for item in got:
        try:
            idx, score = item
            pairs.append((operator.index(idx), float(score)))
        except (TypeError, ValueError):
            raise TypeError(f"it returned {answer_shape(item)} among its answers, not an (index, score) pair "
                            "with an integer index") from None
    if not all(map(math.isfinite, (s for _, s in pairs))):
        raise ValueError("a score is NaN or infinite")
    return pairs


def _plain_read_here(plain: Callable[[Sequence[str]], Mapping[str, bool]], handed: Sequence[Candidate],
                     ) -> tuple[Callable[[Sequence[str]], Mapping[str, bool]], Callable[[], None]]:
    """``plain`` answering on any thread, and what reads its answers on this one: asked on the thread that makes
    it (the searching one), it is ``plain`` itself; asked on another (a stage's worker), it answers from
    ``plain``'s answers for every candidate in ``handed``, read by the second callable on the searching thread
    (once; :meth:`Pipeline.run` calls it before each guarded processor runs)."""
    home = threading.get_ident()
    kept: dict[str, Mapping[str, bool]] = {}

    def read() -> None:  # on the searching thread
        if "all" not in kept:
            ids = handed.ids if isinstance(handed, LazyCandidates) and handed.ids is not None else [c.id for c in handed]
            kept["all"] = plain(list(ids))

    def answers(ids: Sequence[str]) -> Mapping[str, bool]:
        if threading.get_ident() == home:
            return plain(ids)
        known = kept.get("all") or {}
        return {cid: answer for cid in ids if (answer := known.get(cid)) is not None}

    return answers, read


def _plain_of_handed(plain: Callable[[Sequence[str]], Mapping[str, bool]], handed: Sequence[Candidate],
                     given: Callable[[], Sequence[Candidate]], left_out: Sequence[Candidate],
                     ) -> Callable[[Sequence[str]], Mapping[str, bool]]:
    """``PostProcessContext.plain``: the backend's stored answers (told of the texts it handed out), for the
    candidates the calling processor was handed (``given()``) or left out by ``as_of`` whose text is still the one
    the backend handed out. One whose text an earlier processor changed (``attrs.evolve(c, text=...)``) is left out:
    the caller tells it from the text it holds. Nothing is compared when the processor was handed the backend's
    own sequence (no processor before it changed it)."""

    def answers(ids: Sequence[str]) -> Mapping[str, bool]:
        got = plain(ids)
        now = given()
        if not got or now is handed:
            return got
        first = {c.id: c.text for c in handed}
        held = {c.id: c.text for c in left_out}
        held.update((c.id, c.text) for c in now)
        return {cid: answer for cid, answer in got.items()
                if (text := held.get(cid)) is not None and text == first.get(cid)}

    return answers


def _trace_stage(trace: dict[str, Any], stage: str, items: Sequence[Candidate]) -> None:
    trace.setdefault("stages", []).append(stage)
    rows = trace.setdefault("candidates", {})
    for rank, c in enumerate(items, start=1):
        row = rows.get(c.id)
        if row is None:
            row = rows[c.id] = {"id": c.id, "path": c.path, "startLine": c.start_line, "endLine": c.end_line,
                                "source": c.source, "keyword": c.text_score, "vector": c.vector_score,
                                "identifierMatch": c.identifier_match, "stages": {}}
        entry: dict[str, Any] = {"score": c.score, "rank": rank}
        if c.superseded_by is not None:
            entry["supersededBy"] = dict(c.superseded_by)
        if c.supersedes:
            entry["supersedes"] = [dict(s) for s in c.supersedes]
        row["stages"][stage] = entry


def exclude_written_after(query: str, candidates: list[Candidate], cutoff: float,
                          written_at: Callable[[Sequence[Candidate]], Mapping[str, tuple[float, float]]] | None,
                          section_dates: Callable[[Sequence[Candidate]], Mapping[str, Mapping[int, float]]]
                          | None = None,
                          line_vectors: Callable[[Sequence[str]], Mapping[str, Sequence[LineVector]]] | None = None,
                          query_vector: Sequence[float] | None = None,
                          line_analysis: Callable[[Sequence[str]], Mapping[str, bytes]] | None = None,
                          ) -> list[Candidate]:
    """``candidates`` minus those written at or after ``cutoff``.

    A hit from an undated note is judged by its lines most about the query
    (closest to ``query_vector`` by their stored ``line_vectors``, else
    holding the query's most telling words):
    left out when each of them dates itself, or is dated by its heading or
    section intro (``section_dates``), at or after the cutoff. Kept hits of
    an undated note changed after the cutoff may hold later knowledge in
    lines that do not say so; their score is scaled by
    ``THRESHOLDS.as_of_undated``, unless their lines are known to hold on
    the date (dated before it, or a past state that ended after it), so that
    memory known to predate the cutoff answers first.
    """
    from .chronology import file_date, line_since
    from .supersession import (
        THRESHOLDS,
        Line,
        answered_later,
        as_of_state,
        closest_lines,
        remembered_lines,
        salient,
        split_lines,
        term_weights,
        value_starts,
        written_after,
    )

    known = written_at(candidates) if written_at is not None else {}
    undated = [c for c in candidates if c.id not in known and file_date(c.path) is None]
    dates = section_dates(undated) if section_dates is not None and undated else {}
    terms = salient(query)
    # Stored line analyses (one read, for the candidates not remembered from an earlier search) save analysing.
    unknown = [c.id for c in candidates if not remembered_lines(c.path, c.start_line, c.text, c.mtime)]
    stored = line_analysis(unknown) if line_analysis is not None and unknown else {}
    lines = {c.id: split_lines(c.path, c.start_line, c.text, c.mtime, None, stored.get(c.id)) for c in candidates}
    weights = term_weights(terms, list(lines.values()))
    units = line_vectors([c.id for c in undated]) if line_vectors is not None and undated and query_vector else {}
    # When each identifier is first known to hold: a dated note's date, an undated line's own or heading date.
    stated: list[tuple[Line, float]] = []
    for c in candidates:
        day = known[c.id][0] if c.id in known else file_date(c.path)
        for ln in lines[c.id]:
            since = day if day is not None else line_since(ln.text, dates.get(c.id, {}).get(ln.line_no))
            if since is not None:
                stated.append((ln, since))
    starts = value_starts(stated)
    out = []
    for c in candidates:
        answer = closest_lines(lines[c.id], units.get(c.id), query_vector) if c.id in units else None
        if written_after(c, cutoff, terms, known.get(c.id), dates.get(c.id), weights, answer, starts):
            continue
        if (c.id not in known and file_date(c.path) is None and c.mtime is not None and c.mtime >= cutoff
                and as_of_state(c, cutoff, dates.get(c.id), weights, answer, starts) != "held"):
            factor = THRESHOLDS.as_of_undated
            if answer and answered_later(c, cutoff, dates.get(c.id), answer):
                factor *= THRESHOLDS.as_of_undated  # its closeness by meaning came from lines written later
            c = attrs.evolve(c, score=c.score * factor)
        out.append(c)
    return out
