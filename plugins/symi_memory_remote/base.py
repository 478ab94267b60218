"""What every remote embedding provider shares: client, fingerprint, request splitting, batch mode."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from symi_memory.errors import EmbeddingError
from symi_memory.secrets import split_base_url

from .batch_runner import BatchApi, BatchRunner
from .client import RemoteClient
from .keys import fingerprint, merge_headers
from .settings import RemoteSettings
from .vectors import plan_slices

__all__ = ["RemoteEmbeddingProvider", "input_limit"]


def input_limit(provider: str, model: str) -> int:
    """The per-input UTF-8 byte limit of ``spec/behaviour.md`` §3."""
    if provider == "gemini":
        return 2048
    if provider == "voyage":
        return 16000 if "voyage-3-lite" in model else 32000
    return 8192


class RemoteEmbeddingProvider:
    """Base class; subclasses supply the auth headers and one request's wire format.

    ``sleep``, ``clock``, ``rng`` and ``transport`` exist so tests can drive
    retries, batch polling and the HTTP layer without patching this code.
    """

    max_request_items = 128
    max_request_bytes = 400_000

    def __init__(
        self,
        settings: RemoteSettings,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.BaseTransport | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if not settings.api_key:
            raise EmbeddingError(f"{settings.provider}: no API key resolved", provider=settings.provider)
        self.settings = settings
        self.id = settings.provider
        self.model = settings.model
        # Without its query and user info: the client sends those (see RemoteClient).
        self.base_url = split_base_url(settings.base_url)[0]
        self.max_input_bytes = input_limit(settings.provider, settings.model)
        self.fingerprint = fingerprint(
            settings.base_url, settings.model, settings.headers, secrets=[settings.api_key]
        )
        self._client = RemoteClient(
            provider=settings.provider,
            headers=merge_headers(self._auth_headers(settings.api_key), settings.headers),
            timeout_s=settings.timeout_s,
            secrets=[settings.api_key],
            base_url=settings.base_url,
            sleep=sleep,
            transport=transport,
            rng=rng,
        )
        api = self._batch_api() if settings.batch.enabled else None
        self.batch = (
            BatchRunner(api, settings.batch, provider=settings.provider, sleep=sleep, clock=clock)
            if api
            else None
        )

    # -- subclass hooks

    def _auth_headers(self, api_key: str) -> dict[str, str]:
        raise NotImplementedError

    def _embed_request(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        """Embed one request's worth of texts; ``kind`` is ``query`` or ``document``."""
        raise NotImplementedError

    def _batch_api(self) -> BatchApi | None:
        return None

    # -- EmbeddingProvider

    def embed_query(self, text: str) -> list[float]:
        """One vector for a search query."""
        return self._embed_request([text], "query")[0]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; through the batch API when enabled and not disabled."""
        if not texts:
            return []
        if self.batch is not None and not self.batch.disabled:
            return self.batch.run(list(texts), self._embed_direct)
        return self._embed_direct(texts)

    def begin_sync(self) -> None:
        """Called by the core at the start of each sync run: batch failures count per run."""
        if self.batch is not None:
            self.batch.begin_run()

    def batch_status(self) -> dict[str, Any]:
        """``status().batch``: ``{enabled, failures, disabled, pending}`` for this provider instance.

        ``enabled`` is false when ``remote.batch.enabled`` is off or the
        provider has no batch API; ``pending`` counts jobs still running.
        """
        runner = self.batch
        return {
            "enabled": runner is not None,
            "failures": runner.failures if runner is not None else 0,
            "disabled": runner.disabled if runner is not None else False,
            "pending": runner.pending if runner is not None else 0,
        }

    def _embed_direct(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for part in plan_slices(texts, max_items=self.max_request_items, max_bytes=self.max_request_bytes):
            vectors.extend(self._embed_request(texts[part], "document"))
        return vectors

    def close(self) -> None:
        """Release the HTTP connection pool."""
        self._client.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"
