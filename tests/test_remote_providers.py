"""Remote embedding providers against a real loopback HTTP server."""

from __future__ import annotations

import logging
import random

import pytest
from support.loopback_http import Reply, Sleeps

from symi_memory.errors import EmbeddingError
from symi_memory.specs import EmbeddingProvider, ProviderContext, ProviderUnavailable
from symi_memory_remote import hooks
from symi_memory_remote.client import MAX_DELAY_S

SENTINEL = "sk-test-SENTINEL123"


def remote(**overrides):
    base = {
        "baseUrl": None,
        "apiKey": None,
        "headers": {},
        "timeoutMs": 60000,
        "batch": {
            "enabled": False,
            "wait": True,
            "concurrency": 2,
            "pollIntervalMs": 2000,
            "timeoutMinutes": 60,
        },
    }
    base.update(overrides)
    return base


def ctx(provider="openai", *, model=None, models=None, env=None, **remote_overrides):
    return ProviderContext(
        settings={"provider": provider, "model": model, "remote": remote(**remote_overrides)},
        models=models or {},
        env=env or {},
        model=model,
    )



def make(name, context, sleeps=None):
    return hooks.create_provider(
        name, context, sleep=sleeps if sleeps is not None else Sleeps(), rng=random.Random(7)
    )


def data(*vectors, reverse=False):
    items = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    return {"object": "list", "data": items[::-1] if reverse else items, "model": "m"}


# --------------------------------------------------------------- registration


def test_hook_registers_three_providers_with_auto_priorities():
    specs = []
    hooks.symi_memory_register_embedding_providers(register=specs.append)
    assert [(s.name, s.auto_priority, s.default_model) for s in specs] == [
        ("openai", 20, "text-embedding-3-small"),
        ("gemini", 30, "gemini-embedding-001"),
        ("voyage", 40, "voyage-4-large"),
    ]
    by_name = {s.name: s for s in specs}
    empty = ctx()
    assert (
        by_name["openai"].available(empty)
        == "no OpenAI API key: set OPENAI_API_KEY or memorySearch.remote.apiKey"
    )
    assert (
        by_name["gemini"].available(empty)
        == "no Gemini API key: set GEMINI_API_KEY or memorySearch.remote.apiKey"
    )
    assert by_name["voyage"].available(ctx(env={"VOYAGE_API_KEY": "v"})) is None
    assert by_name["gemini"].available(ctx(models={"providers": {"google": {"apiKey": "g"}}})) is None
    assert by_name["gemini"].available(ctx(models={"providers": {"gemini": {"apiKey": "g"}}})) is None
    with pytest.raises(ProviderUnavailable, match="OPENAI_API_KEY"):
        by_name["openai"].factory(empty)
    provider = by_name["openai"].factory(ctx(env={"OPENAI_API_KEY": "k"}))
    assert isinstance(provider, EmbeddingProvider)
    assert (provider.id, provider.model, provider.max_input_bytes) == (
        "openai",
        "text-embedding-3-small",
        8192,
    )
    provider.close()


def test_hooks_module_is_cheap_to_import():
    import subprocess
    import sys

    code = "import sys, symi_memory_remote.hooks; print('httpx' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
    )


@pytest.mark.parametrize(
    ("name", "model", "limit"),
    [
        ("openai", None, 8192),
        ("gemini", None, 2048),
        ("voyage", None, 32000),
        ("voyage", "voyage-3-lite", 16000),
    ],
)
def test_input_byte_limits(name, model, limit):
    provider = make(name, ctx(name, model=model, apiKey="k"))
    assert provider.max_input_bytes == limit
    provider.close()


# --------------------------------------------------------------------- openai


def test_openai_request_format_and_index_order(server):
    server.add("POST", "/v1/embeddings", Reply(json=data([1, 0], [0, 1.5], reverse=True)))
    provider = make("openai", ctx(env={"OPENAI_API_KEY": "env-key"}, baseUrl=server.url + "/v1"))
    assert provider.embed_documents(["alpha", "beta"]) == [[1.0, 0.0], [0.0, 1.5]]
    (req,) = server.requests
    assert (req.method, req.path) == ("POST", "/v1/embeddings")
    assert req.headers["authorization"] == "Bearer env-key"
    assert req.headers["content-type"] == "application/json"
    assert req.json() == {"model": "text-embedding-3-small", "input": ["alpha", "beta"]}


def test_key_lookup_order(server):
    server.add("POST", "/v1/embeddings", Reply(json=data([1.0])))
    models = {"providers": {"openai": {"apiKey": "models-key"}}}
    env = {"OPENAI_API_KEY": "env-key"}
    for context, expected in [
        (ctx(models=models, env=env, apiKey="remote-key", baseUrl=server.url + "/v1"), "remote-key"),
        (ctx(models=models, env=env, baseUrl=server.url + "/v1"), "models-key"),
        (ctx(env=env, baseUrl=server.url + "/v1"), "env-key"),
    ]:
        provider = make("openai", context)
        provider.embed_query("q")
        provider.close()
        assert server.requests[-1].headers["authorization"] == f"Bearer {expected}"


def test_openai_compatible_base_url_and_headers(server):
    server.add("POST", "/compat/v1/embeddings", Reply(json=data([0.5, 0.5])))
    models = {
        "providers": {
            "openai": {
                "apiKey": "k",
                "baseUrl": "https://ignored.example/v1",
                "headers": {"X-Organization": "from-models", "X-Project": "p1"},
            }
        }
    }
    context = ctx(
        model="custom-embed",
        models=models,
        baseUrl=server.url + "/compat/v1/",
        headers={"x-organization": "org-remote", "X-Custom-Header": "value"},
    )
    provider = make("openai", context)
    assert provider.embed_query("hello") == [0.5, 0.5]
    (req,) = server.requests
    assert req.path == "/compat/v1/embeddings"
    assert req.headers["x-organization"] == "org-remote"
    assert req.headers["x-project"] == "p1"
    assert req.headers["x-custom-header"] == "value"
    assert req.json() == {"model": "custom-embed", "input": ["hello"]}
    fp = provider.fingerprint
    assert server.url + "/compat/v1" in fp and "custom-embed" in fp and "org-remote" in fp
    other = make("openai", ctx(model="custom-embed", models=models, baseUrl=server.url + "/compat/v1"))
    assert other.fingerprint != fp  # different headers, different vectors' identity


def test_documents_split_into_requests(server):
    server.add(
        "POST",
        "/v1/embeddings",
        lambda req: Reply(json=data(*[[float(len(t))] for t in req.json()["input"]])),
    )
    provider = make("openai", ctx(apiKey="k", baseUrl=server.url + "/v1"))
    texts = [f"text number {i}" for i in range(300)]
    vectors = provider.embed_documents(texts)
    assert vectors == [[float(len(t))] for t in texts]
    assert [len(r.json()["input"]) for r in server.requests] == [256, 44]
    assert provider.embed_documents([]) == []
    assert len(server.requests) == 2


# --------------------------------------------------------------------- voyage


def test_voyage_input_type(server):
    server.add("POST", "/v1/embeddings", Reply(json=data([0.1, 0.2])))
    provider = make("voyage", ctx("voyage", env={"VOYAGE_API_KEY": "vk"}, baseUrl=server.url + "/v1"))
    provider.embed_query("what")
    provider.embed_documents(["doc"])
    q, d = server.requests
    assert q.headers["authorization"] == "Bearer vk"
    assert q.json() == {"model": "voyage-4-large", "input": ["what"], "input_type": "query"}
    assert d.json() == {"model": "voyage-4-large", "input": ["doc"], "input_type": "document"}


# --------------------------------------------------------------------- gemini


def test_gemini_query_and_documents(server):
    server.add(
        "POST",
        "/v1beta/models/gemini-embedding-001:embedContent",
        Reply(json={"embedding": {"values": [1, 2]}}),
    )
    server.add(
        "POST",
        "/v1beta/models/gemini-embedding-001:batchEmbedContents",
        Reply(json={"embeddings": [{"values": [3, 4]}, {"values": [5, 6]}]}),
    )
    models = {"providers": {"google": {"apiKey": "gk"}}}
    provider = make("gemini", ctx("gemini", models=models, baseUrl=server.url + "/v1beta"))
    assert provider.embed_query("q") == [1.0, 2.0]
    assert provider.embed_documents(["a", "b"]) == [[3.0, 4.0], [5.0, 6.0]]
    q, d = server.requests
    assert q.headers["x-goog-api-key"] == "gk" and "authorization" not in q.headers
    assert q.query == "" and d.query == ""  # the key never travels in the URL
    assert q.json() == {
        "model": "models/gemini-embedding-001",
        "content": {"parts": [{"text": "q"}]},
        "taskType": "RETRIEVAL_QUERY",
    }
    assert d.json() == {
        "requests": [
            {
                "model": "models/gemini-embedding-001",
                "content": {"parts": [{"text": t}]},
                "taskType": "RETRIEVAL_DOCUMENT",
            }
            for t in ("a", "b")
        ]
    }


def test_gemini_documents_batched_by_100(server):
    server.add(
        "POST",
        "/v1beta/models/gemini-embedding-001:batchEmbedContents",
        lambda req: Reply(json={"embeddings": [{"values": [1.0]} for _ in req.json()["requests"]]}),
    )
    provider = make("gemini", ctx("gemini", apiKey="gk", baseUrl=server.url + "/v1beta"))
    assert len(provider.embed_documents(["x"] * 150)) == 150
    assert [len(r.json()["requests"]) for r in server.requests] == [100, 50]


# -------------------------------------------------------------------- retries


def test_429_then_success(server):
    server.add(
        "POST", "/v1/embeddings", Reply(status=429, json={"error": "slow down"}), Reply(json=data([1.0]))
    )
    sleeps = Sleeps()
    provider = make("openai", ctx(apiKey="k", baseUrl=server.url + "/v1"), sleeps)
    assert provider.embed_query("q") == [1.0]
    assert len(server.requests) == 2
    assert len(sleeps) == 1 and 0.375 <= sleeps[0] <= 0.625


def test_rate_limit_message_is_retried_even_without_429(server):
    body = {"error": {"message": "Rate limit reached for requests"}}
    server.add("POST", "/v1/embeddings", Reply(status=400, json=body), Reply(json=data([2.0])))
    provider = make("openai", ctx(apiKey="k", baseUrl=server.url + "/v1"))
    assert provider.embed_query("q") == [2.0]


def test_5xx_exhaustion_backs_off_and_gives_up(server):
    server.add("POST", "/v1/embeddings", Reply(status=503, body="upstream unavailable"))
    sleeps = Sleeps()
    provider = make("openai", ctx(apiKey="k", baseUrl=server.url + "/v1"), sleeps)
    with pytest.raises(EmbeddingError) as info:
        provider.embed_documents(["a"])
    assert info.value.retryable is True and info.value.provider == "openai"
    assert "HTTP 503" in str(info.value) and "upstream unavailable" in str(info.value)
    assert len(server.requests) == 4
    assert len(sleeps) == 3
    for attempt, delay in enumerate(sleeps):
        nominal = min(MAX_DELAY_S, 0.5 * 2**attempt)
        assert 0.75 * nominal <= delay <= 1.25 * nominal


def test_client_error_is_not_retried(server):
    server.add("POST", "/v1/embeddings", Reply(status=400, json={"error": {"message": "bad model"}}))
    provider = make("openai", ctx(apiKey="k", baseUrl=server.url + "/v1"))
    with pytest.raises(EmbeddingError, match="bad model") as info:
        provider.embed_query("q")
    assert info.value.retryable is False
    assert len(server.requests) == 1


def test_timeout_applies_to_each_request(server):
    server.add("POST", "/v1/embeddings", Reply(json=data([1.0]), delay=1.0))
    provider = make("openai", ctx(apiKey="k", baseUrl=server.url + "/v1", timeoutMs=100))
    with pytest.raises(EmbeddingError, match=r"timed out after 0.1 s.*remote.timeoutMs") as info:
        provider.embed_query("q")
    assert info.value.retryable is True


# ----------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply(body="<html>proxy error</html>"), "malformed JSON"),
        (Reply(json={"data": "nope"}), "no data"),
        (Reply(json=data([1.0])), "expected 2 embeddings, got 1"),
        (Reply(json=data([1.0], ["x"])), "non-numeric value 'x'"),
        (Reply(json=data([1.0], [1.0, 2.0])), "mixed dimensions"),
        (Reply(json=data([1.0], [])), "non-empty list"),
    ],
)
def test_bad_answers_raise_clear_errors(server, reply, message):
    server.add("POST", "/v1/embeddings", reply)
    provider = make("openai", ctx(apiKey="k", baseUrl=server.url + "/v1"))
    with pytest.raises(EmbeddingError, match=message):
        provider.embed_documents(["a", "b"])


def test_gemini_wrong_count_is_an_error(server):
    server.add("POST", "/v1beta/models/m:batchEmbedContents", Reply(json={"embeddings": [{"values": [1.0]}]}))
    provider = make("gemini", ctx("gemini", model="m", apiKey="gk", baseUrl=server.url + "/v1beta"))
    with pytest.raises(EmbeddingError, match="expected 3 embeddings, got 1"):
        provider.embed_documents(["a", "b", "c"])


# ------------------------------------------------------------------- secrets


def echo_headers(req):
    # A hostile or careless server that reflects the credentials back.
    return Reply(status=500, body=f"internal error; you sent {req.headers}")


@pytest.mark.parametrize("name", ["openai", "gemini", "voyage"])
def test_sentinel_key_never_leaks(server, caplog, name):
    caplog.set_level(logging.DEBUG)
    base = server.url + "/api"
    server.add("POST", "/api/embeddings", echo_headers)
    server.add("POST", "/api/models/m:embedContent", echo_headers)
    server.add("POST", "/api/models/m:batchEmbedContents", Reply(body=f"not json {SENTINEL}"))
    context = ctx(name, model="m", apiKey=SENTINEL, baseUrl=base, headers={"X-Trace": "t1"})
    provider = make(name, context)
    errors = []
    for call in (lambda: provider.embed_query("q"), lambda: provider.embed_documents(["d"])):
        with pytest.raises(EmbeddingError) as info:
            call()
        errors.append(info.value)
    slow = make(name, ctx(name, model="m", apiKey=SENTINEL, baseUrl=server.url + "/slow", timeoutMs=50))
    server.add("POST", "/slow/embeddings", Reply(delay=0.5))
    server.add("POST", "/slow/models/m:embedContent", Reply(delay=0.5))
    with pytest.raises(EmbeddingError) as info:
        slow.embed_query("q")
    errors.append(info.value)
    assert any(SENTINEL in str(r.headers) for r in server.requests)  # the key was really sent
    for exc in errors:
        assert SENTINEL not in str(exc) and SENTINEL not in repr(exc.args)
        assert SENTINEL not in str(exc.__context__) and SENTINEL not in str(exc.__cause__)
    assert "***" in str(errors[0])  # the echoed key was there and got scrubbed
    assert SENTINEL not in caplog.text
    assert all(SENTINEL not in r.getMessage() for r in caplog.records)
    assert SENTINEL not in provider.fingerprint and "X-Trace".lower() in provider.fingerprint
    assert SENTINEL not in repr(provider) and SENTINEL not in repr(provider.settings)


def test_key_in_a_custom_header_stays_out_of_the_fingerprint():
    provider = make(
        "openai",
        ctx(
            apiKey=SENTINEL,
            headers={"X-Api-Token": "tok-1", "X-Forward": f"Bearer {SENTINEL}", "X-Team": "a"},
        ),
    )
    assert SENTINEL not in provider.fingerprint and "tok-1" not in provider.fingerprint
    assert '"x-team":"a"' in provider.fingerprint


@pytest.mark.parametrize(
    "header",
    ["X-Amz-Security-Credential", "X-Goog-Signature", "X-Session-Id", "Set-Cookie2", "X-Db-Password", "X-Passwd"],
)
def test_credential_like_headers_stay_out_of_the_fingerprint(header):
    provider = make("openai", ctx(apiKey=SENTINEL, headers={header: "hush-value-1", "X-Team": "a"}))
    assert "hush-value-1" not in provider.fingerprint and header.lower() not in provider.fingerprint
    assert '"x-team":"a"' in provider.fingerprint


def test_sparse_or_null_settings_fall_back_to_defaults():
    for settings in (
        {},
        {"remote": None, "model": None},
        {"remote": {"headers": None, "batch": None, "timeoutMs": "x"}},
    ):
        context = ProviderContext(settings=settings, models={"providers": None}, env={"OPENAI_API_KEY": "k"})
        provider = make("openai", context)
        assert provider.model == "text-embedding-3-small"
        assert provider.base_url == "https://api.openai.com/v1"
        assert provider.settings.timeout_s == 60.0
        assert provider.batch is None
        provider.close()
