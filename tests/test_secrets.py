"""Secrets other than apiKey (issue 14): header values and baseUrl credentials never leak.

A loopback server echoes every request header and the query string back in
its error bodies; the sentinels must not show up in exceptions, logs,
``status``, tool output, ``config show`` or the index files (main + WAL).
"""

from __future__ import annotations

import base64
import json
import logging
import random
from pathlib import Path

import pytest
from support.loopback_http import LoopbackServer, Recorded, Reply, Sleeps

from symi_memory import load_config, tools
from symi_memory.errors import EmbeddingError
from symi_memory.manager import open_memory
from symi_memory.secrets import mask_dsn, mask_url, public_url, split_base_url
from symi_memory.specs import ProviderContext, RerankerContext
from symi_memory_remote import hooks

KEY = "sk-SENTINEL-apikey-1111"
AUTH = "SENTINEL-custom-auth-2222"
SUB = "SENTINEL-subscription-3333"
PASS = "SENTINEL-urlpass-4444"
QKEY = "SENTINEL-querykey-5555"
BEARER = "SENTINEL-bearer-6666"
ALL = (KEY, AUTH, SUB, PASS, QKEY, BEARER)


def _echo(status: int):
    def reply(req: Recorded) -> Reply:
        echoed = {"error": "denied", "headers": req.headers, "query": req.query, "path": req.path}
        return Reply(status=status, body=json.dumps(echoed))

    return reply


def _embeddings(req: Recorded) -> Reply:
    inputs = req.json()["input"]
    return Reply(json={"data": [{"index": i, "embedding": [0.1 * (i + 1), 0.2, 0.3]} for i in range(len(inputs))]})


def _remote(server: LoopbackServer) -> dict:
    host = server.url.removeprefix("http://")
    return {
        "baseUrl": f"http://svc:{PASS}@{host}/v1?api-key={QKEY}&api-version=2024-02-01",
        "apiKey": KEY,
        "headers": {"X-Custom-Auth": AUTH, "Ocp-Apim-Subscription-Key": SUB, "X-Tenant": "acme"},
        "timeoutMs": 2000,
    }


def _assert_clean(text: str) -> None:
    for s in ALL:
        assert s not in text, s


def test_base_url_with_query_and_credentials_builds_a_correct_request(server) -> None:
    server.add("POST", "/v1/embeddings", _embeddings)
    provider = hooks.create_provider("openai", ProviderContext(
        settings={"provider": "openai", "remote": _remote(server)}, models={}, env={}), sleep=Sleeps())
    assert provider.embed_query("hello") == [0.1, 0.2, 0.3]
    (req,) = server.requests
    assert req.path == "/v1/embeddings"
    assert dict(p.split("=", 1) for p in req.query.split("&")) == {"api-key": QKEY, "api-version": "2024-02-01"}
    assert req.headers["authorization"].startswith("Basic ")  # URL user info, as httpx sent it before
    assert req.headers["x-custom-auth"] == AUTH and req.headers["ocp-apim-subscription-key"] == SUB
    # The fingerprint (stored in the index meta) keeps what shapes vectors, no credential.
    _assert_clean(provider.fingerprint)
    assert "api-version=2024-02-01" in provider.fingerprint and "x-tenant" in provider.fingerprint
    _assert_clean(repr(provider))


def test_basic_auth_from_url_user_info(server) -> None:
    server.add("POST", "/v1/embeddings", _embeddings)
    remote = _remote(server) | {"headers": {}}
    provider = hooks.create_provider("openai", ProviderContext(
        settings={"provider": "openai", "remote": remote}, models={}, env={}), sleep=Sleeps())
    provider.embed_query("x")
    # URL user info is sent as HTTP basic auth (as httpx did with it in the URL), never as part of the path.
    req = server.requests[0]
    assert req.path == "/v1/embeddings"
    assert req.headers["authorization"] == "Basic " + base64.b64encode(f"svc:{PASS}".encode()).decode()


@pytest.mark.parametrize("status", [400, 503])
def test_echoed_headers_never_reach_errors_or_logs(server, status: int, caplog) -> None:
    server.add("POST", "/v1/embeddings", _echo(status))
    caplog.set_level(logging.DEBUG)
    provider = hooks.create_provider("openai", ProviderContext(
        settings={"provider": "openai", "remote": _remote(server)}, models={}, env={}),
        sleep=Sleeps(), rng=random.Random(1))
    with pytest.raises(EmbeddingError) as err:
        provider.embed_query("x")
    assert "denied" in str(err.value)  # the body is still shown, minus the secrets
    _assert_clean(str(err.value))
    _assert_clean(caplog.text)


def test_reranker_headers_and_url_credentials_are_redacted(server) -> None:
    from symi_memory_rerank import hooks as rerank_hooks

    host = server.url.removeprefix("http://")
    server.add("POST", "/v1/rerank", _echo(401))
    ctx = RerankerContext(settings={"provider": "cohere", "apiKey": KEY,
                                    "baseUrl": f"http://u:{PASS}@{host}/v1?key={QKEY}",
                                    "headers": {"X-Custom-Auth": AUTH, "Authorization": f"Bearer {BEARER}"}},
                          models={}, env={})
    specs = []
    rerank_hooks.symi_memory_register_rerankers(register=specs.append)
    reranker = next(s for s in specs if s.name == "cohere").factory(ctx)
    with pytest.raises(EmbeddingError) as err:
        reranker.rerank("q", ["a", "b"], 2)
    assert server.requests[0].path == "/v1/rerank" and f"key={QKEY}" in server.requests[0].query
    _assert_clean(str(err.value))


def test_whole_stack_keeps_header_and_url_secrets_out_of_status_tools_logs_and_db(tmp_path: Path, caplog) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-01-01.md").write_text("the quarterly okapi planning\n" * 20, encoding="utf-8")
    caplog.set_level(logging.DEBUG)
    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", _embeddings)
        cfg = load_config(None, state_dir=tmp_path / "state", overrides={"agents": {"defaults": {"memorySearch": {
            "provider": "openai", "remote": _remote(server)}}}})
        with open_memory(cfg, workspace=ws, start=False) as mem:
            mem.sync()
            ok = tools.memory_search(mem, {"query": "okapi planning"})
            assert ok["results"]
            server.add("POST", "/v1/embeddings", _echo(400))
            (ws / "memory" / "2026-01-02.md").write_text("new okapi note\n", encoding="utf-8")
            mem.sync()
            out = json.dumps([tools.memory_search(mem, {"query": "okapi"}), mem.status()])
            assert "denied" in (mem.status()["lastError"] or "")
    _assert_clean(out)
    _assert_clean(caplog.text)
    for f in (tmp_path / "state" / "memory").iterdir():
        data = f.read_bytes()
        for s in ALL:
            assert s.encode() not in data, (f.name, s)


def test_config_show_masks_header_values_and_url_credentials(cli, tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"agents": {"defaults": {"memorySearch": {
        "remote": {"baseUrl": f"https://u:{PASS}@example.test/v1?api-key={QKEY}&api-version=2024-02-01",
                   "headers": {"X-Custom-Auth": AUTH, "Ocp-Apim-Subscription-Key": SUB}},
        "query": {"rerank": {"headers": {"Authorization": f"Bearer {BEARER}"}}}}}},
        "models": {"providers": {"openai": {"headers": {"X-Custom-Auth": AUTH}}}}}), encoding="utf-8")
    for args in (("config", "show"), ("config", "show", "--json"),
                 ("config", "get", "agents.defaults.memorySearch.remote.headers.X-Custom-Auth"),
                 ("config", "get", "agents.defaults.memorySearch.remote.baseUrl")):
        code, out, err = cli("--config", str(cfg), *args)
        assert code == 0, err
        _assert_clean(out + err)
    code, out, _ = cli("--config", str(cfg), "config", "show", "--json")
    remote = json.loads(out)["agents"]["defaults"]["memorySearch"]["remote"]
    assert remote["baseUrl"] == "https://u:***@example.test/v1?api-key=***&api-version=2024-02-01"
    code, out, _ = cli("--config", str(cfg), "config", "show", "--json", "--show-secrets")
    assert AUTH in out and PASS in out


def test_url_helpers() -> None:
    clean, params, auth = split_base_url(f"http://u:{PASS}@h:8080/v1/?api-key={QKEY}&v=1")
    assert (clean, params, auth) == ("http://h:8080/v1", [("api-key", QKEY), ("v", "1")], ("u", PASS))
    assert public_url(f"http://u:{PASS}@h/v1?api-key={QKEY}&api-version=1") == "http://h/v1?api-version=1"
    assert mask_url(f"http://{PASS}@h/v1") == "http://***@h/v1"
    assert mask_dsn(f"postgresql://u:{PASS}@h:5432/db?sslmode=require") == "postgresql://u:***@h:5432/db?sslmode=require"
    assert mask_dsn(f"host=h user=u password='{PASS} x' dbname=db") == "host=h user=u password=*** dbname=db"
    assert mask_dsn("host=h passfile=/p dbname=db") == "host=h passfile=/p dbname=db"


@pytest.mark.parametrize(("dsn", "shown"), [
    # libpq ends a URL's password at the '@': '?', '#' and ':' in it need no percent-encoding.
    (f"postgresql://u:{PASS}#x@h/db", "postgresql://u:***@h/db"),
    (f"postgresql://u:x?{PASS}@h/db?sslmode=require", "postgresql://u:***@h/db?sslmode=require"),
    (f"postgresql://u:{PASS}:x@h1:5432,h2:5433/db", "postgresql://u:***@h1:5432,h2:5433/db"),
    (f"postgresql:///db?host=%2Ftmp&password={PASS}", "postgresql:///db?host=%2Ftmp&password=***"),
    (f"postgresql://u@h/db?sslpassword={PASS}&application_name=a%20b", "postgresql://u@h/db?sslpassword=***&application_name=a%20b"),
    # key=value: an unquoted value may hold backslash-escaped spaces, a quoted one escaped quotes.
    (f"host=h password=x\\ {PASS} dbname=db", "host=h password=*** dbname=db"),
    (f"host=h password = 'x\\' {PASS}' dbname=db", "host=h password = *** dbname=db"),
    (f"host=h\tsslpassword={PASS}", "host=h\tsslpassword=***"),
    (f"host='unclosed password={PASS}", "***"),
])
def test_mask_dsn_reads_the_dsn_as_libpq_does(dsn: str, shown: str) -> None:
    """A URL's password holding '#' or '?', or a key=value password with an escaped space, was shown (in part) by
    `config show`; a `postgresql:///db` URL lost a slash."""
    from psycopg.conninfo import conninfo_to_dict

    if shown != "***":  # each is a DSN libpq reads with PASS in a credential
        assert PASS in "".join(str(v) for k, v in conninfo_to_dict(dsn).items() if "password" in k), dsn
    assert mask_dsn(dsn) == shown


@pytest.mark.parametrize("remote", [{"headers": f"Bearer {BEARER}"}, {"apiKey": [KEY]},
                                    {"headers": {"X-Custom-Auth": [AUTH]}}])
def test_config_errors_do_not_repeat_the_credential(tmp_path: Path, remote: dict) -> None:
    from symi_memory.errors import ConfigError

    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"agents": {"defaults": {"memorySearch": {"remote": remote}}}}), encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(cfg, state_dir=tmp_path / "state")
    assert "remote" in str(err.value) and "***" in str(err.value)
    _assert_clean(str(err.value))
