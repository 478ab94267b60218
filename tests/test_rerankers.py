"""Hosted rerankers (Cohere, Voyage, Jina) against a loopback server."""

from __future__ import annotations

import logging
import random

import pytest
from support.loopback_http import Reply, Sleeps

from symi_memory.errors import EmbeddingError
from symi_memory.specs import ProviderUnavailable, Reranker, RerankerContext
from symi_memory_rerank import hooks

SENTINEL = "sk-test-SENTINEL123"
DOCS = ["cats purr", "dogs bark", "fish swim"]


def rerank_settings(**overrides):
    settings = {
        "provider": "none",
        "model": None,
        "topN": 20,
        "baseUrl": None,
        "apiKey": None,
        "headers": {},
        "timeoutMs": 10000,
    }
    settings.update(overrides)
    return settings



def make(name, *, models=None, env=None, sleeps=None, **settings):
    context = RerankerContext(
        settings=rerank_settings(provider=name, **settings), models=models or {}, env=env or {}
    )
    return hooks.create_reranker(
        name, context, sleep=sleeps if sleeps is not None else Sleeps(), rng=random.Random(3)
    )


def test_hook_registers_three_rerankers():
    specs = []
    hooks.symi_memory_register_rerankers(register=specs.append)
    assert [s.name for s in specs] == ["cohere", "voyage", "jina"]
    reranker = specs[0].factory(RerankerContext(settings=rerank_settings(), env={"COHERE_API_KEY": "c"}))
    assert isinstance(reranker, Reranker)
    reranker.close()
    with pytest.raises(ProviderUnavailable, match="JINA_API_KEY"):
        specs[2].factory(RerankerContext(settings=rerank_settings()))


@pytest.mark.parametrize(
    ("name", "path", "top_key", "results_key", "model"),
    [
        ("cohere", "/v2/rerank", "top_n", "results", "rerank-v3.5"),
        ("voyage", "/v1/rerank", "top_k", "data", "rerank-2.5"),
        ("jina", "/v1/rerank", "top_n", "results", "jina-reranker-v2-base-multilingual"),
    ],
)
def test_request_and_response_format(server, name, path, top_key, results_key, model):
    results = [{"index": 2, "relevance_score": 0.2}, {"index": 0, "relevance_score": 0.9}]
    server.add("POST", path, Reply(json={"id": "r1", results_key: results}))
    reranker = make(name, apiKey="rk", baseUrl=server.url + path.removesuffix("/rerank") + "/")

    assert reranker.rerank("which animal purrs", DOCS, 2) == [(0, 0.9), (2, 0.2)]

    (req,) = server.requests
    assert req.path == path and req.headers["authorization"] == "Bearer rk"
    assert req.json() == {"model": model, "query": "which animal purrs", "documents": DOCS, top_key: 2}


def test_scores_are_clamped_sorted_and_trimmed(server):
    results = [
        {"index": 1, "relevance_score": 1.7},
        {"index": 0, "relevance_score": -0.3},
        {"index": 2, "relevance_score": 0.5},
    ]
    server.add("POST", "/v2/rerank", Reply(json={"results": results}))
    reranker = make("cohere", apiKey="rk", baseUrl=server.url + "/v2")
    assert reranker.rerank("q", DOCS, 2) == [(1, 1.0), (2, 0.5)]
    assert reranker.rerank("q", [], 5) == []
    assert len(server.requests) == 1  # no request for nothing to rerank


def test_key_lookup_headers_and_model(server):
    server.add("POST", "/v1/rerank", Reply(json={"results": [{"index": 0, "relevance_score": 0.5}]}))
    models = {"providers": {"jina": {"apiKey": "models-key", "headers": {"X-Team": "t", "X-Keep": "k"}}}}
    env = {"JINA_API_KEY": "env-key"}
    base = server.url + "/v1"
    make("jina", models=models, env=env, apiKey="own-key", baseUrl=base).rerank("q", ["d"], 1)
    make("jina", models=models, env=env, baseUrl=base, headers={"x-team": "override"}).rerank("q", ["d"], 1)
    make("jina", env=env, baseUrl=base, model="jina-reranker-m0").rerank("q", ["d"], 0)
    own, from_models, from_env = server.requests
    assert own.headers["authorization"] == "Bearer own-key"
    assert from_models.headers["authorization"] == "Bearer models-key"
    assert from_models.headers["x-team"] == "override" and from_models.headers["x-keep"] == "k"
    assert from_env.headers["authorization"] == "Bearer env-key"
    assert from_env.json() == {"model": "jina-reranker-m0", "query": "q", "documents": ["d"], "top_n": 1}


def test_429_then_success(server):
    server.add(
        "POST",
        "/v1/rerank",
        Reply(status=429, json={"detail": "Too many requests"}),
        Reply(json={"data": [{"index": 0, "relevance_score": 0.7}]}),
    )
    sleeps = Sleeps()
    reranker = make("voyage", apiKey="vk", baseUrl=server.url + "/v1", sleeps=sleeps)
    assert reranker.rerank("q", ["d"], 1) == [(0, 0.7)]
    assert len(server.requests) == 2 and len(sleeps) == 1


def test_timeout(server):
    server.add("POST", "/v2/rerank", Reply(json={"results": []}, delay=1.0))
    reranker = make("cohere", apiKey="rk", baseUrl=server.url + "/v2", timeoutMs=100)
    with pytest.raises(EmbeddingError, match="timed out") as info:
        reranker.rerank("q", DOCS, 3)
    assert info.value.retryable


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply(body="oops"), "malformed JSON"),
        (Reply(json={"results": [{"index": 7, "relevance_score": 0.1}]}), "index 7 is not within 0..2"),
        (Reply(json={"results": [{"index": 0, "relevance_score": "high"}]}), "non-numeric relevance_score"),
        (Reply(json={"message": "nope"}), "no results"),
    ],
)
def test_bad_answers(server, reply, message):
    server.add("POST", "/v2/rerank", reply)
    reranker = make("cohere", apiKey="rk", baseUrl=server.url + "/v2")
    with pytest.raises(EmbeddingError, match=message):
        reranker.rerank("q", DOCS, 3)


def test_sentinel_key_never_leaks(server, caplog):
    caplog.set_level(logging.DEBUG)
    server.add("POST", "/v2/rerank", lambda req: Reply(status=502, body=f"bad gateway, got {req.headers}"))
    reranker = make("cohere", apiKey=SENTINEL, baseUrl=server.url + "/v2")
    with pytest.raises(EmbeddingError) as info:
        reranker.rerank("q", DOCS, 3)
    assert len(server.requests) == 4
    assert SENTINEL in server.requests[0].headers["authorization"]
    assert SENTINEL not in str(info.value) and "***" in str(info.value)
    assert SENTINEL not in caplog.text
