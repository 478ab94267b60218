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

from symi_memory import forking
from symi_memory.errors import EmbeddingError
from symi_memory.specs import ProviderUnavailable

__all__ = ["LazyEmbedder"]

QUERIES_KEPT = 256  # query vectors kept for query_at_once (384 floats each: about 3 MB as Python lists)
#: Longer queries are not kept (their text is the key: 256 of 100 KB held 31 MB); they take the worker's path.
QUERY_KEPT_CHARS = 2048

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
    #: Imports the libraries ``load`` needs; :meth:`warm` runs it in the calling thread.
    prepare: Callable[[], None] | None = None
    _inner: Any = None
    _error: str | None = None
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    _warming: threading.Thread | None = None
    #: The vectors of the last ``QUERIES_KEPT`` queries embedded (text -> vector): a query asked again is answered
    #: from here, on the searching thread (:meth:`query_at_once`).
    #: Kept as tuples: a caller that changes the list it was given changes no later search's vector.
    _queries: dict[str, tuple[float, ...]] = attrs.field(factory=dict)
    _queries_lock: threading.Lock = attrs.field(factory=threading.Lock)
    #: The loaded embedder's ``session`` the kept vectors came from. The bundled model opens unoptimised for a
    #: fast start and swaps the optimised session in later; their vectors differ in the 7th digit, so the kept
    #: ones are dropped then (query_at_once gives what embed_query gives now).
    _kept_for: Any = None

    def __attrs_post_init__(self) -> None:
        forking.track(self)

    def _after_fork_in_child(self) -> None:
        """In a forked child: ONNX Runtime's session runs on thread pools that are the parent's (a run in the child
        would wait for them for ever), so the model is loaded again when the child first embeds; the parent's
        session is kept, never closed. A lock a parent thread held (loading) would stay held: new ones."""
        if self._inner is not None:
            forking.keep(self._inner)
        self._inner, self._kept_for, self._warming = None, None, None
        self._lock, self._queries_lock = threading.Lock(), threading.Lock()

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
        """Start loading the model (:class:`~symi_memory.specs.WarmsUp`); returns before it is loaded, never raises.

        ``prepare`` (importing numpy and ONNX Runtime) runs here: imports hold the GIL, so running them on
        another thread beside the caller's work would take as long. The rest of the load (mostly ONNX
        Runtime building the session, which releases the GIL) runs on a thread of its own while the caller
        goes on. A load that fails is reported by the embedding call that needs the model.
        """
        if self._inner is not None or self._error is not None or self._warming is not None:
            return
        try:
            if self.prepare is not None:
                self.prepare()
        except Exception as exc:
            log.debug("preparing to load the local model failed: %s", exc)
            return
        # Not a daemon: a process must not exit while ONNX Runtime is building a session (it aborts).
        self._warming = threading.Thread(target=self._load_quietly, name="symi-local-load")
        self._warming.start()

    def _load_quietly(self) -> None:
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
        inner = self.embedder()
        session = getattr(inner, "session", None)  # read before: a session swapped in meanwhile is a newer one
        vector = inner.embed_query(text)
        if len(text) <= QUERY_KEPT_CHARS:
            kept = tuple(vector)
            queries = self._queries
            with self._queries_lock:  # not the model's lock: query_at_once never waits on a running embedding
                if session is not self._kept_for:
                    if session is not getattr(inner, "session", None):
                        return vector  # perhaps from a session swapped out since: not kept
                    queries.clear()
                    self._kept_for = session
                if text not in queries and len(queries) >= QUERIES_KEPT:
                    del queries[next(iter(queries))]  # the oldest
                queries[text] = kept
        return vector

    def query_at_once(self, text: str) -> list[float] | None:
        """The vector of a query embedded before (:class:`~symi_memory.specs.EmbedsQueriesAtOnce`), else None.

        The model gives a text the same vector every time; a search asking again is answered without handing
        the query to the embedding worker. None in a subclass that changes ``embed_query`` (the kept vectors are
        this class's, not the subclass's): asked on the worker."""
        if len(text) > QUERY_KEPT_CHARS or type(self).embed_query is not LazyEmbedder.embed_query:
            return None
        inner = self._inner
        if inner is None or getattr(inner, "session", None) is not self._kept_for:
            return None  # closed, or another session swapped in since the vectors were kept
        kept = self._queries.get(text)
        return None if kept is None else list(kept)  # the caller's own list

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return self.embedder().embed_documents(texts)

    def close(self) -> None:
        warming = self._warming
        if warming is not None and warming is not threading.current_thread():
            warming.join()  # a session being built must not be left behind
        with self._lock:
            inner, self._inner = self._inner, None
        if inner is not None:
            inner.close()
