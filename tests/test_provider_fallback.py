"""Provider selection and fallback through the whole stack: real HTTP on loopback, real SQLite."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import pytest
from support.loopback_http import LoopbackServer, Recorded, Reply

from symi_memory.config import load_config
from symi_memory.manager import open_memory

SENTINEL = "sk-test-SENTINEL123fallback"


def _embeddings(req: Recorded) -> Reply:
    inputs = req.json()["input"]
    return Reply(json={"data": [{"index": i, "embedding": [0.1 * (i + 1), 0.2, 0.3]} for i in range(len(inputs))]})


def _workspace(tmp_path: Path, files: int = 40) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(files):
        lines = [f"Day {i}: note about topic{i} and the quarterly planning" for _ in range(60)]
        (ws / "memory" / f"2026-01-{i % 28 + 1:02d}-n{i}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ws


def test_provider_failing_mid_sync_ends_with_index_built_by_the_fallback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ws = _workspace(tmp_path)
    with LoopbackServer() as server:
        # The first batch succeeds, then the endpoint breaks for good (retries exhaust).
        server.add("POST", "/v1/embeddings", _embeddings, Reply(status=503, body="overloaded"))
        cfg = load_config(None, state_dir=tmp_path / "state", overrides={"agents": {"defaults": {"memorySearch": {
            "provider": "openai", "fallback": "hash",
            "remote": {"baseUrl": server.url + "/v1", "apiKey": SENTINEL, "timeoutMs": 2000},
        }}}})
        caplog.set_level(logging.DEBUG)
        with open_memory(cfg, workspace=ws, start=False) as mem:
            report = mem.sync()
            st = mem.status()
            assert report.full
            assert st["provider"] == "hash" and st["model"] == "hash-384"
            assert st["fallback"]["from"] == "openai" and st["fallback"]["reason"]
            assert st["vector"]["dims"] == 384  # every vector came from the fallback, none of openai's 3-d ones
            assert st["files"] == 40
            resp = mem.search("topic17 quarterly planning")
            assert resp.provider == "hash" and resp.mode == "hybrid"
            assert resp.fallback is not None and resp.fallback.from_ == "openai"
            assert any("n17" in h.path for h in resp.results)
        assert len([r for r in server.requests if r.path == "/v1/embeddings"]) >= 2
    assert SENTINEL not in caplog.text
    assert SENTINEL not in str(st)
    db = tmp_path / "state" / "memory" / "main.sqlite"
    assert SENTINEL.encode() not in db.read_bytes()


def test_failure_without_fallback_keeps_keyword_search_and_retries_later(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, files=3)
    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", Reply(status=500, body="boom"))
        cfg = load_config(None, state_dir=tmp_path / "state", overrides={"agents": {"defaults": {"memorySearch": {
            "provider": "openai", "remote": {"baseUrl": server.url + "/v1", "apiKey": SENTINEL}}}}})
        with open_memory(cfg, workspace=ws, start=False) as mem:
            mem.sync()
            assert "openai" in (mem.status()["lastError"] or "")
            hits = mem.search("topic1 quarterly").results
            assert any("n1" in h.path for h in hits)
            assert mem.status()["dirty"] is True  # pending files are retried on the next sync


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None,
                    reason='the local model needs the local extra (pip install "symi-memory[local]")')
def test_auto_selects_local_offline_then_keyword_only_without_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _workspace(tmp_path, files=2)
    cfg = load_config(None, state_dir=tmp_path / "state")
    with open_memory(cfg, workspace=ws, start=False) as mem:
        assert mem.status()["provider"] == "local"
    cfg = load_config(None, state_dir=tmp_path / "state2", overrides={"plugins": {"disabled": ["local-embeddings"]}})
    with open_memory(cfg, workspace=ws, start=False) as mem:
        st = mem.status()
        assert st["provider"] == "none"
        assert "openai" in st["providerReason"] and "no embedding provider available" in st["providerReason"]
        mem.sync()
        assert mem.search("topic1").mode == "fts-only"
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    cfg = load_config(None, state_dir=tmp_path / "state3", overrides={"plugins": {"disabled": ["local-embeddings"]}})
    with open_memory(cfg, workspace=ws, start=False) as mem:
        assert mem.status()["provider"] == "openai"


def test_vectors_of_another_model_are_not_used_until_reindexed(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, files=3)

    def open_with(model: str):
        cfg = load_config(None, state_dir=tmp_path / "state", overrides={"agents": {"defaults": {"memorySearch": {
            "provider": "hash", "model": model}}}})
        return open_memory(cfg, workspace=ws, start=False)

    with open_with("hash-384") as mem:
        mem.sync()
        assert mem.search("topic1 quarterly").mode == "hybrid"
    with open_with("hash-64") as mem:
        before = mem.search("topic1 quarterly")
        assert before.mode == "fts-only" and any("n1" in h.path for h in before.results)
        assert mem.status()["dirty"] is True
        assert mem.sync().full
        assert mem.search("topic1 quarterly").mode == "hybrid"
        assert mem.status()["vector"]["dims"] == 64
