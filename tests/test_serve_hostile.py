"""`symi-memory serve` as operators behind proxies and hostile or sloppy clients use it: a real server on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_serve import TOKEN, make_setup, running_server

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")


@pytest.fixture
def setup(tmp_path: Path, workspace: Path) -> dict[str, Path]:
    return make_setup(tmp_path, workspace)


def test_the_bearer_scheme_is_case_insensitive_and_the_token_exact(setup: dict[str, Path]) -> None:
    """``Authorization: bearer <token>`` (the scheme is case-insensitive, RFC 9110) was refused 401."""
    with running_server(setup["state"], env={"SYMI_SERVE_TOKEN": f"  {TOKEN}  "}) as srv:
        for header in (f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER   {TOKEN}"):
            status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"},
                                      headers={"Authorization": header})
            assert status == 200 and out["results"], (header, status, out)
        for header in ("", "Bearer", f"Basic {TOKEN}", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}",
                       f"Bearer {TOKEN.upper()}", f"Bearer{TOKEN}", f"{TOKEN}"):
            status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"},
                                      headers={"Authorization": header} if header else None)
            assert status == 401 and "results" not in out and TOKEN not in json.dumps(out), (header, status)
    assert TOKEN not in srv.log.read_text()


def test_a_tokenless_server_reached_through_a_proxy_from_elsewhere_says_so_once(setup: dict[str, Path]) -> None:
    """A reverse proxy others can reach makes a loopback-bound server theirs: it said nothing. Now the first request
    forwarded for a client that is not loopback logs one warning naming the fix; loopback clients log none."""
    with running_server(setup["state"]) as srv:
        local = {"X-Forwarded-For": "127.0.0.1, ::1", "Forwarded": 'for="[::1]:5000";proto=https'}
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"}, headers=local)
        assert status == 200 and out["results"]
        assert "through a proxy" not in srv.log.read_text()
        for headers in ({"X-Forwarded-For": "127.0.0.1, 203.0.113.9"}, {"Forwarded": "for=198.51.100.7:443"},
                        {"X-Real-IP": "192.0.2.1"}):
            status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"}, headers=headers)
            assert status == 200 and out["results"]  # not refused: the proxy may authenticate its clients
        log = srv.log.read_text()
    assert log.count("through a proxy") == 1 and "203.0.113.9" in log and "serve.token" in log, log
    with running_server(setup["state"], env={"SYMI_SERVE_TOKEN": TOKEN}) as srv:
        status, _ = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"},
                                headers={"X-Forwarded-For": "203.0.113.9", "Authorization": f"Bearer {TOKEN}"})
        assert status == 200
    assert "through a proxy" not in srv.log.read_text()
