"""Running document embeddings through a provider's asynchronous batch API.

The runner is provider-neutral: it splits inputs into jobs, submits up to
``concurrency`` of them at once, polls, and maps results back by position.
A job that fails counts against the current sync run; after two failures
batch mode is off for the rest of that run (:meth:`BatchRunner.begin_run`
starts a new one) and every input that is still missing goes through
normal requests.

``wait: false`` means: submit (or re-find) the jobs, look at each once, and
if any is still running raise :class:`BatchPending` (retryable) instead of
blocking. The job ids are remembered by the digest of their inputs, so the
next sync with the same inputs picks the finished results up instead of
paying for a second job.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import attrs

from symi_memory.errors import EmbeddingError, EmbeddingPending

from .settings import BatchSettings
from .vectors import plan_slices

__all__ = ["MAX_BATCH_FAILURES", "BatchApi", "BatchJobFailed", "BatchPending", "BatchRunner", "JobStatus"]

log = logging.getLogger("symi_memory.remote.batch")

MAX_BATCH_FAILURES = 2


class BatchPending(EmbeddingPending):
    """``remote.batch.wait`` is false and a submitted job has not finished yet; retry later."""


class BatchJobFailed(Exception):
    """One batch job failed (internal: turned into a fallback, never raised to the core)."""


@attrs.frozen(kw_only=True)
class JobStatus:
    """One look at a job: finished, failed (with a reason) or still running."""

    done: bool = False
    failed: str | None = None
    result: Any = None


class BatchApi(Protocol):
    """The provider-specific half: how to submit, inspect and read a job."""

    max_job_items: int
    max_job_bytes: int

    def submit(self, texts: Sequence[str]) -> str: ...

    def status(self, job_id: str) -> JobStatus: ...

    def results(self, status: JobStatus, count: int) -> dict[int, list[float]]: ...


_PENDING = object()


class BatchRunner:
    """Drives :class:`BatchApi` jobs for one provider instance."""

    def __init__(
        self,
        api: BatchApi,
        settings: BatchSettings,
        *,
        provider: str,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.settings = settings
        self.provider = provider
        self.failures = 0
        self._sleep = sleep
        self._clock = clock
        self._lock = threading.Lock()
        self._jobs: dict[str, str] = {}

    @property
    def disabled(self) -> bool:
        """True once :data:`MAX_BATCH_FAILURES` jobs have failed in this run."""
        return self.failures >= MAX_BATCH_FAILURES

    @property
    def pending(self) -> int:
        """Jobs submitted and not yet collected (``wait: false`` leaves them for the next sync)."""
        with self._lock:
            return len(self._jobs)

    def begin_run(self) -> None:
        """A new sync run: forget the failures (batch mode is on again); keep pending jobs."""
        with self._lock:
            if self.failures >= MAX_BATCH_FAILURES:
                log.info("%s: new sync run; batch mode is on again", self.provider)
            self.failures = 0

    def run(
        self, texts: Sequence[str], fallback: Callable[[Sequence[str]], list[list[float]]]
    ) -> list[list[float]]:
        """Embed ``texts`` through batch jobs; whatever they do not deliver goes to ``fallback``."""
        slices = plan_slices(texts, max_items=self.api.max_job_items, max_bytes=self.api.max_job_bytes)
        vectors: list[list[float] | None] = [None] * len(texts)
        still_running: list[str] = []
        workers = max(1, min(self.settings.concurrency, len(slices)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="symi-batch") as pool:
            outcomes = list(pool.map(lambda s: (s, self._run_job(texts[s])), slices))
        for part, outcome in outcomes:
            if outcome is _PENDING:
                still_running.append(self._jobs.get(_digest(texts[part]), "?"))
                continue
            for offset, vector in outcome.items():
                vectors[part.start + offset] = vector
        if still_running:
            raise BatchPending(
                f"{self.provider} batch job(s) {', '.join(still_running)} still running "
                "(remote.batch.wait is false); the next sync collects the results",
                provider=self.provider,
            )
        for part, _ in outcomes:
            self._jobs.pop(_digest(texts[part]), None)
        missing = [i for i, v in enumerate(vectors) if v is None]
        if missing:
            for i, vector in zip(missing, fallback([texts[i] for i in missing]), strict=True):
                vectors[i] = vector
        return [v for v in vectors if v is not None]

    def _run_job(self, texts: Sequence[str]) -> Any:
        while not self.disabled:
            try:
                return self._attempt(texts)
            except (BatchJobFailed, EmbeddingError) as exc:
                self._record_failure(texts, str(exc))
        return {}

    def _attempt(self, texts: Sequence[str]) -> Any:
        key = _digest(texts)
        with self._lock:
            job_id = self._jobs.get(key)
        if job_id is None:
            job_id = self.api.submit(texts)
            log.info("%s: submitted batch job %s with %d inputs", self.provider, job_id, len(texts))
            with self._lock:
                self._jobs[key] = job_id
        deadline = self._clock() + self.settings.timeout_s
        while True:
            status = self.api.status(job_id)
            if status.failed:
                raise BatchJobFailed(f"batch job {job_id} failed: {status.failed}")
            if status.done:
                break
            if not self.settings.wait:
                return _PENDING
            if self._clock() >= deadline:
                raise BatchJobFailed(
                    f"batch job {job_id} not finished after {self.settings.timeout_s / 60:g} minutes "
                    "(remote.batch.timeoutMinutes)"
                )
            self._sleep(self.settings.poll_interval_s)
        got = self.api.results(status, len(texts))
        if len(got) < len(texts):
            # Keep what arrived; the rest goes through normal requests.
            self._record_failure(texts, f"batch job {job_id} returned {len(got)} of {len(texts)} embeddings")
        return got

    def _record_failure(self, texts: Sequence[str], reason: str) -> None:
        with self._lock:
            self._jobs.pop(_digest(texts), None)
            self.failures += 1
            failures = self.failures
        log.warning("%s: %s (batch failure %d of %d)", self.provider, reason, failures, MAX_BATCH_FAILURES)
        if failures == MAX_BATCH_FAILURES:
            log.warning(
                "%s: batch mode disabled after %d failures; using normal requests", self.provider, failures
            )


def _digest(texts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for text in texts:
        h.update(text.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()
