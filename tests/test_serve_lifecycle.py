"""`symi-memory serve`: agents opened and closed under the requests of MCP sessions and HTTP clients.

A real server process on loopback, driven by the MCP SDK's streamable HTTP client and plain HTTP.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
from test_serve import _write_config, make_setup, running_server

pytest.importorskip("uvicorn")
pytest.importorskip("mcp_types")

TESTS = Path(__file__).resolve().parent
# The `stall` provider (tests/support/stalling_provider.py): a query naming `stall2.5s` takes 2.5 s to embed.
STALL_ENV = {"SYMI_MEMORY_PLUGINS": "symi_memory.testing.plugin,support.stalling_provider",
             "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture
def setup(tmp_path: Path, workspace: Path) -> dict[str, Path]:
    return make_setup(tmp_path, workspace)


def _stall_config(setup: dict[str, Path], serve: str) -> Path:
    state = setup["state"]
    _write_config(state, setup["main"], setup["other"], extra=f"[serve]\n{serve}\n")
    cfg = state / "symi.toml"
    cfg.write_text(cfg.read_text().replace('provider = "hash"', 'provider = "stall"'))
    return state


async def _mcp(url: str, check: Any) -> Any:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        return await check(session)


def test_an_mcp_call_longer_than_idle_minutes_keeps_its_agent_and_a_later_call_reopens_it(
        setup: dict[str, Path]) -> None:
    """serve.idleMinutes shorter than one memory_search: the agent was closed under the running call
    (the tool answered an error), because the MCP endpoint let go of the agent as soon as it had looked it up."""
    state = _stall_config(setup, "idleMinutes = 0.005")  # 0.3 s; the reaper looks every second

    with running_server(state, env=STALL_ENV) as srv:
        def open_agents() -> list[str]:
            status, out = srv.request("GET", "/api/health")
            assert status == 200, out
            return list(out["agents"])

        async def session(s: Any) -> tuple[list[Any], list[list[str]]]:
            answers = []
            # Longer than idleMinutes (shorter than the 2.5 s a query embedding is waited for): the reaper runs
            # once or twice meanwhile. What the server says is open is sampled all along.
            call = asyncio.ensure_future(s.call_tool("memory_search", {"query": "launch code PLUM-42 stall2.2s"}))
            seen: list[list[str]] = []
            while not call.done():
                seen.append(await asyncio.to_thread(open_agents))
                await asyncio.sleep(0.1)
            answers.append(await call)
            # Idle between two calls of one session: the agent is closed meanwhile ...
            deadline = time.monotonic() + 20
            while "other" in await asyncio.to_thread(open_agents):
                assert time.monotonic() < deadline, "agent other was never closed for idleness"
                await asyncio.sleep(0.3)
            # ... and the session's next call opens it again.
            answers.append(await s.call_tool("memory_get", {"path": "MEMORY.md"}))
            answers.append(await s.call_tool("memory_search", {"query": "launch code PLUM-42"}))
            return answers, seen

        (slow, got, again), seen = asyncio.run(asyncio.wait_for(_mcp(srv.url + "/agents/other/mcp", session), 120))
        assert slow.is_error is False, slow.structured_content
        assert "PLUM-42" in slow.structured_content["results"][0]["snippet"]
        # Open from the moment the call opened it to its answer: never closed under it.
        held = ["other" in agents for agents in seen]
        assert True in held and all(held[held.index(True):]), seen
        assert got.is_error is False and "PLUM-42" in got.structured_content["text"], got.structured_content
        assert again.is_error is False and again.structured_content["results"], again.structured_content
        assert "other" in open_agents()
    assert "closing idle agent other" in srv.log.read_text()
