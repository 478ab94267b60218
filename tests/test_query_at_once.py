"""A provider that can give a query's vector at once (``EmbedsQueriesAtOnce``) is asked on the searching thread.

No query is handed to the embedding worker then; a query it cannot answer at once still goes to the worker,
under the query deadline. Real SQLite/FTS5 index, providers registered through the plugin hook.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from support.sqlite_memory import open_local

from symi_memory import hookimpl, load_config, open_memory
from symi_memory.errors import EmbeddingError
from symi_memory.specs import EmbedsQueriesAtOnce, ProviderSpec
from symi_memory.testing import HashEmbedder

QUERIES = ["quarterly planning of topic3", "otters and herons", "item4x2 budget", "topic1 review notes"]


class _Worker(HashEmbedder):
    """The hash provider, asked on the embedding worker only (its embed_query is its own: no query_at_once)."""

    def embed_query(self, text: str) -> list[float]:
        self.worker_calls = getattr(self, "worker_calls", 0) + 1
        self.threads = getattr(self, "threads", set()) | {threading.current_thread().name}
        return super().embed_query(text)


class _Table:
    """Answers the queries it knows at once; embeds (or stalls on) the others on the worker."""

    id, model, fingerprint, max_input_bytes = "table", "hash-384", "hash:384", 8192

    def __init__(self) -> None:
        self.hash = HashEmbedder()
        self.known: dict[str, list[float]] = {}
        self.stall = threading.Event()
        self.release = threading.Event()
        self.broken = False
        self.asked_on: list[str] = []

    def query_at_once(self, text: str) -> list[float] | None:
        if self.broken:
            raise EmbeddingError("the table is unreadable", provider=self.id)
        self.asked_on.append(threading.current_thread().name)
        return self.known.get(text)

    def embed_query(self, text: str) -> list[float]:
        if self.stall.is_set():
            self.release.wait(30)
        return self.hash.embed_query(text)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self.hash.embed_documents(texts)

    def close(self) -> None:
        pass


class _Plugin:
    def __init__(self, provider: Any) -> None:
        self.provider = provider

    @hookimpl
    def symi_memory_register_embedding_providers(self, register: Callable[[Any], None]) -> None:
        register(ProviderSpec(name=self.provider.id, factory=lambda ctx: self.provider))


def _workspace(tmp_path: Path, lines_per_file: int = 40) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(6):
        lines = [f"Day {i} line {j}: topic{i} and the quarterly planning of item{i}x{j}, otters and herons"
                 for j in range(lines_per_file)]
        (ws / "memory" / f"n{i:03d}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ws


def _open(tmp_path: Path, ws: Path, provider: Any, state: str) -> Any:
    """A manager on ``provider`` (registered by a plugin), or on the registered ``hash`` provider when None."""
    cfg = load_config(None, state_dir=tmp_path / state,
                      overrides={"agents": {"defaults": {"memorySearch": {"provider": provider.id if provider else "hash"}}}})
    plugins = [("at-once-test", _Plugin(provider))] if provider is not None else None
    return open_memory(cfg, workspace=ws, start=False, plugins=plugins)


def _answers(mem: Any) -> list[Any]:
    return [[(r.path, r.start_line, r.score) for r in mem.search(q, min_score=0).results] for q in QUERIES]


def test_a_provider_answering_at_once_gives_the_worker_path_s_answers_without_the_worker(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    worker = _Worker(id="worker")
    with _open(tmp_path, ws, worker, "worker") as mem:
        mem.sync()
        on_worker = _answers(mem)
    assert worker.worker_calls == len(QUERIES)
    assert "MainThread" not in worker.threads  # the worker path really ran on another thread
    with _open(tmp_path, ws, None, "hash") as mem:
        at_once = mem.backend.choice.provider
        assert isinstance(at_once, EmbedsQueriesAtOnce)
        mem.sync()
        calls = at_once.calls
        assert _answers(mem) == on_worker
        assert at_once.calls == calls + len(QUERIES)
        assert mem.backend._query_worker is None  # no embedding worker was ever started
    assert all(r for r in on_worker)


def test_a_query_not_known_at_once_still_has_the_deadline_and_a_known_one_answers_meanwhile(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    table = _Table()
    with _open(tmp_path, ws, table, "table") as mem:
        mem.sync()
        assert mem.search(QUERIES[0], min_score=0).mode == "hybrid"  # embedded on the worker
        assert table.asked_on == ["MainThread"]
        table.known[QUERIES[1]] = table.hash.embed_query(QUERIES[1])
        table.stall.set()
        try:
            started = time.monotonic()
            resp = mem.search(QUERIES[2], min_score=0)  # not known: the worker's call stalls, the deadline holds
            assert time.monotonic() - started <= 3.0
            assert resp.mode == "fts-only" and resp.fallback is not None
            assert "keyword results only" in resp.fallback.reason
            # While that call is still out, a query the provider knows is answered from it, by both sides.
            started = time.monotonic()
            resp = mem.search(QUERIES[1], min_score=0)
            assert time.monotonic() - started < 1.0
            assert resp.mode == "hybrid" and resp.fallback is None and resp.results
        finally:
            table.release.set()


def test_an_error_answering_at_once_is_an_embedding_error_of_the_search(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    table = _Table()
    with _open(tmp_path, ws, table, "broken") as mem:
        mem.sync()
        table.broken = True
        resp = mem.search(QUERIES[0], min_score=0)
    assert resp.mode == "fts-only" and resp.results
    assert resp.fallback is not None and "the table is unreadable" in resp.fallback.reason


def test_the_local_provider_answers_a_query_it_embedded_before_at_once(tmp_path: Path) -> None:
    pytest.importorskip("symi_memory_local")
    ws = _workspace(tmp_path, 6)  # the real model embeds every chunk and line: a few are enough here
    with open_local(tmp_path, ws) as mem:
        mem.sync()
        provider = mem.backend.choice.provider
        assert isinstance(provider, EmbedsQueriesAtOnce)
        assert provider.query_at_once(QUERIES[0]) is None  # never embedded: the worker's
        first = [(r.path, r.start_line, r.score) for r in mem.search(QUERIES[0], min_score=0).results]
        kept = provider.query_at_once(QUERIES[0])
        assert kept is not None and kept == provider.embedder().embed_query(QUERIES[0])
        # Asked again: answered from the kept vector, the same results.
        assert [(r.path, r.start_line, r.score) for r in mem.search(QUERIES[0], min_score=0).results] == first
        assert first


# --- review (rev13): what the kept vectors and the at-once path must not do


def _local_over_hash() -> Any:
    """The local provider's lazy wrapper (what keeps the last queries) over the hash embedder: no model file."""
    lazy = pytest.importorskip("symi_memory_local.lazy")
    return lazy.LazyEmbedder(model="hash-384", fingerprint="hash:384", load=HashEmbedder)


def test_a_caller_changing_the_vector_it_was_given_does_not_change_later_searches(tmp_path: Path) -> None:
    pytest.importorskip("symi_memory_local")
    ws = _workspace(tmp_path, 6)  # the real model embeds every chunk and line: a few are enough here
    with open_local(tmp_path, ws) as mem:
        mem.sync()
        provider = mem.backend.choice.provider
        first = [(r.path, r.start_line, r.score) for r in mem.search(QUERIES[1], min_score=0).results]
        # A caller of the provider (a vector side, a plugin, a script) works on the list it was given in place.
        given = provider.embed_query(QUERIES[1])
        given[:] = [-x for x in given]
        kept = provider.query_at_once(QUERIES[1])
        assert kept is not None and kept == provider.embedder().embed_query(QUERIES[1])
        kept.reverse()  # and on the one query_at_once gave
        assert [(r.path, r.start_line, r.score) for r in mem.search(QUERIES[1], min_score=0).results] == first
        assert first


def test_the_local_provider_keeps_no_more_than_a_few_megabytes_of_queries_however_long() -> None:
    import tracemalloc

    provider = _local_over_hash()
    # ~40 KB a query, mostly blanks: 256 such texts kept would be over 10 MB, and the hash embedder splits
    # three words, not thousands, so 300 of them take seconds, not minutes, under tracemalloc.
    body = "otters and herons" + " " * 40_000
    provider.embed_query("warm the hash embedder")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(300):
            provider.embed_query(f"q{i} " + body)  # the caller keeps none of them
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 6_000_000, f"{kept / 1e6:.1f} MB kept for 256 queries"
    # Short queries are still answered at once; at most the last 256.
    for i in range(300):
        provider.embed_query(f"short query {i}")
    assert provider.query_at_once("short query 299") == provider.embed_query("short query 299")
    assert provider.query_at_once("short query 0") is None
    assert len(provider._queries) <= 256


def test_a_local_provider_subclass_with_its_own_embed_query_is_not_answered_from_the_parent_s_vectors() -> None:
    lazy = pytest.importorskip("symi_memory_local.lazy")

    class Prefixed(lazy.LazyEmbedder):  # type: ignore[misc,name-defined]
        def embed_query(self, text: str) -> list[float]:
            return super().embed_query("query: " + text)

    provider = Prefixed(model="hash-384", fingerprint="hash:384", load=HashEmbedder)
    for q in ("query: otters", "otters"):
        provider.embed_query(q)
    for q in ("query: otters", "otters"):
        at_once = provider.query_at_once(q)
        assert at_once is None or at_once == provider.embed_query(q), q


class _Raising(_Table):
    """A query_at_once with a bug (a KeyError from its table), an embed_query that works."""

    def query_at_once(self, text: str) -> list[float] | None:
        self.asked_on.append(threading.current_thread().name)
        raise KeyError(text)


def test_a_query_at_once_that_fails_with_a_bug_leaves_the_query_to_embed_query(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    table = _Raising()
    with _open(tmp_path, ws, table, "raising") as mem:
        mem.sync()
        resp = mem.search(QUERIES[0], min_score=0)
    assert table.asked_on == ["MainThread"]
    assert resp.mode == "hybrid" and resp.fallback is None and resp.results


class _PrefixedHash:
    """A third-party provider: the hash provider with E5-style query prefixes, the rest delegated to it."""

    id = "prefixed"

    def __init__(self) -> None:
        self.inner = HashEmbedder()

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query("query: " + text)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self.inner.embed_documents(["passage: " + t for t in texts])


class _Delegating(_PrefixedHash):
    def __getattr__(self, name: str) -> Any:  # model, fingerprint, max_input_bytes, close, ... and query_at_once
        return getattr(self.inner, name)


class _Explicit(_PrefixedHash):
    model, fingerprint, max_input_bytes = "hash-384", "hash:384", 8192

    def close(self) -> None:
        pass


def test_a_wrapper_delegating_to_the_hash_provider_is_searched_with_its_own_query_vectors(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    with _open(tmp_path, ws, _Explicit(), "explicit") as mem:
        mem.sync()
        expected = _answers(mem)
    with _open(tmp_path, ws, _Delegating(), "delegating") as mem:
        mem.sync()
        assert _answers(mem) == expected
    assert all(expected)


def test_agents_served_from_a_shared_provider_are_still_answered_at_once(tmp_path: Path) -> None:
    from symi_memory.serve.pool import AgentPool

    ws = _workspace(tmp_path)
    cfg = load_config(None, state_dir=tmp_path / "served",
                      overrides={"agents": {"defaults": {"memorySearch": {"provider": "hash"}}}})
    pool = AgentPool(cfg, workspaces={"main": str(ws)})
    try:
        mem = pool.acquire("main")
        try:
            resp = mem.search(QUERIES[0], min_score=0)
            assert resp.mode == "hybrid" and resp.results
            assert mem.backend._query_worker is None  # the shared provider's handle gave the vector at once
        finally:
            pool.release("main")
    finally:
        pool.close()


def test_the_local_provider_s_kept_vectors_are_the_ones_its_optimised_session_gives(tmp_path: Path) -> None:
    """The bundled model opens unoptimised for a fast start and swaps the optimised session in after its second
    call; the two differ in the 7th digit, so a vector kept from the first is not what embed_query gives after."""
    pytest.importorskip("symi_memory_local")
    ws = _workspace(tmp_path)
    with open_local(tmp_path, ws) as mem:
        provider = mem.backend.choice.provider
        provider.embed_query(QUERIES[1])  # the first call: the fast-start session
        provider.embed_query(QUERIES[2])  # the second: the optimised session is built and swapped in
        inner = provider.embedder()
        if inner._optimiser is not None:
            inner._optimiser.join()
        kept = provider.query_at_once(QUERIES[1])
        assert kept is None or kept == inner.embed_query(QUERIES[1])
        provider.embed_query(QUERIES[1])
        kept = provider.query_at_once(QUERIES[1])
        assert kept is not None and kept == inner.embed_query(QUERIES[1])  # kept again, from the session in use
