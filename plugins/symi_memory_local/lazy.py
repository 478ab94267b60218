"""A local embedder that loads its model on first use.

A one-shot command that never embeds anything (``status``, ``get``, a
search that finds the index empty) should not pay for importing ONNX
Runtime and reading the model. The bundled model's identity is pinned (its
sha256 is known), so the fingerprint the index is keyed by is known before
loading; the file is still verified when it is loaded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from symi_memory.errors import EmbeddingError
from symi_memory.specs import ProviderUnavailable

__all__ = ["LazyEmbedder"]

log = logging.getLogger("symi_memory.local")


@attrs.define
class LazyEmbedder:
    """An :class:`~symi_memory.specs.EmbeddingProvider` whose real embedder is built by ``load`` when needed.

    ``fingerprint`` is the one the loaded embedder must report; a load that
    reports another one (a changed model behind a pinned name) is an error
    rather than a silently mixed index.
    """

    model: str
    fingerprint: str
    load: Callable[[], Any]
    id: str = "local"
    max_input_bytes: int = 65536
    _inner: Any = None
    _error: str | None = None
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    @property
    def loaded(self) -> bool:
        return self._inner is not None

    def embedder(self) -> Any:
        """The loaded embedder (loading it now if needed); raises EmbeddingError when it cannot load."""
        inner = self._inner
        if inner is not None:
            return inner
        with self._lock:
            if self._inner is None:
                if self._error is not None:
                    raise EmbeddingError(self._error, provider=self.id)
                try:
                    inner = self.load()
                except ProviderUnavailable as exc:
                    self._error = str(exc)
                    raise EmbeddingError(self._error, provider=self.id) from exc
                if inner.fingerprint != self.fingerprint:
                    inner.close()
                    self._error = (f"the local model {self.model!r} loaded as {inner.fingerprint}, "
                                   f"expected {self.fingerprint}; reinstall it")
                    raise EmbeddingError(self._error, provider=self.id)
                self._inner = inner
            return self._inner

    def warm(self) -> None:
        """Load the model now, in this thread (:class:`~symi_memory.specs.WarmsUp`); never raises.

        A load that fails is reported by the embedding call that needs the model (a load refused as
        unavailable is remembered, so that call does not try again).
        """
        try:
            self.embedder()
        except Exception as exc:
            log.debug("loading the local model ahead of its first use failed: %s", exc)

    @property
    def session(self) -> Any:
        return self.embedder().session

    @property
    def tokenizer(self) -> Any:
        return self.embedder().tokenizer

    def embed_query(self, text: str) -> list[float]:
        return self.embedder().embed_query(text)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return self.embedder().embed_documents(texts)

    def close(self) -> None:
        with self._lock:
            inner, self._inner = self._inner, None
        if inner is not None:
            inner.close()
