"""A provider that hangs or misbehaves: searches stay short, syncs stop waiting, errors are said (issue 14).

Real HTTP on loopback (a server that really does not answer), real SQLite.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

from support.loopback_http import LoopbackServer, Recorded, Reply

from symi_memory import load_config
from symi_memory.manager import open_memory

KEY = "sk-test-faults-0123456789"


def _embeddings(req: Recorded, dims: int = 3) -> Reply:
    inputs = req.json()["input"]
    return Reply(json={"data": [{"index": i, "embedding": [0.1 * (i + 1)] + [0.2] * (dims - 1)}
                                for i in range(len(inputs))]})


def _workspace(tmp_path: Path, files: int) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(files):
        lines = [f"Day {i} line {j}: topic{i} and the quarterly planning of item{i}x{j}" for j in range(90)]
        (ws / "memory" / f"n{i:03d}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ws


def _open(tmp_path: Path, ws: Path, server: LoopbackServer, **remote):
    cfg = load_config(None, state_dir=tmp_path / "state", overrides={"agents": {"defaults": {"memorySearch": {
        "provider": "openai", "remote": {"baseUrl": server.url + "/v1", "apiKey": KEY, **remote}}}}})
    return open_memory(cfg, workspace=ws, start=False)


def test_a_hung_provider_costs_a_search_under_three_seconds_and_the_answer_says_keyword_only(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, 5)
    hang = threading.Event()

    def reply(req: Recorded) -> Reply:
        if hang.is_set():
            return Reply(json={"data": []}, delay=20)
        return _embeddings(req)

    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", reply)
        with _open(tmp_path, ws, server) as mem:  # the default 60 s request timeout
            mem.sync()
            assert mem.search("topic3 quarterly").mode == "hybrid"
            hang.set()
            for _ in range(2):
                started = time.monotonic()
                resp = mem.search("topic3 quarterly")
                assert time.monotonic() - started <= 3.0
                assert resp.mode == "fts-only"
                assert resp.fallback is not None and "keyword results only" in resp.fallback.reason
                assert resp.results and resp.results[0].path == "memory/n003.md"


def test_a_sync_waits_on_a_timed_out_provider_once_per_run(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, 120)  # well over one 256-chunk embedding group
    with LoopbackServer() as server:
        # The provider hangs far longer than the bound below: a sync that waited for its answer cannot pass.
        server.add("POST", "/v1/embeddings", Reply(json={"data": []}, delay=120))
        with _open(tmp_path, ws, server, timeoutMs=700) as mem:
            started = time.monotonic()
            report = mem.sync()
            took = time.monotonic() - started
            st = mem.status()
        calls = [r for r in server.requests if r.path == "/v1/embeddings"]
    assert len(calls) == 1, f"{len(calls)} requests: the sync waited on the hung provider once per batch"
    # Not a tight wall-clock budget (a loaded host stretches the indexing, not the timeout): one 0.7 s wait plus
    # indexing 120 files, far from waiting the 120 s reply out (the message names the configured 0.7 s).
    assert took < 40, f"the sync took {took:.1f} s"
    assert report.files_indexed == 120 and st["pendingFiles"] == 120
    assert "timed out after 0.7 s" in (st["lastError"] or "")


def test_vectors_of_varying_dimensions_are_rejected_with_a_clear_error(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, 40)  # several 64-chunk requests
    calls = []

    def varying(req: Recorded) -> Reply:
        calls.append(1)
        return _embeddings(req, dims=3 + len(calls) % 2)  # each request consistent, requests differ

    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", varying)
        with _open(tmp_path, ws, server) as mem:
            mem.sync()
            st = mem.status()
            store = mem.backend.store
            lengths = {len(blob) // 4 for _, blob in store.iter_vectors()}
            with_vectors = store.vector_count()
            in_vec_table = store.vector_stats(store.vector_dims() or 0)[0]
            # Each request is of one width: the message names the two, not "in one batch" (before: "vectors of
            # different dimensions (3, 4) in one batch" for a batch of one width).
            assert re.search(r"returned vectors of [34] dimensions where the index's \(or this sync's earlier ones\) "
                             r"have [34]; the batch was rejected", st["lastError"] or ""), st["lastError"]
            assert len(lengths) == 1 and with_vectors == in_vec_table, "no chunk silently missing from the vectors"
            assert st["pendingFiles"] > 0 and st["dirty"] is True
            assert mem.search("topic27 quarterly").results  # still found by keyword


def test_status_in_a_new_process_shows_what_the_last_sync_learnt(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, 3)
    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", Reply(status=400, body="model not found"))
        with _open(tmp_path, ws, server) as mem:
            mem.sync()
        with _open(tmp_path, ws, server) as fresh:  # has not synced: reports the recorded sync
            st = fresh.status()
    assert "model not found" in (st["lastError"] or "")
    assert st["pendingFiles"] == 3 and "model not found" in st["pendingReason"]
    assert KEY not in str(st)


def test_status_in_a_new_process_reports_the_fallback_that_built_the_index(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, 3)
    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", Reply(status=400, body="model not found"))
        cfg = load_config(None, state_dir=tmp_path / "state", overrides={"agents": {"defaults": {"memorySearch": {
            "provider": "openai", "fallback": "hash",
            "remote": {"baseUrl": server.url + "/v1", "apiKey": KEY}}}}})
        with open_memory(cfg, workspace=ws, start=False) as mem:
            mem.sync()
            assert mem.status()["vector"]["dims"] == 384
        with open_memory(cfg, workspace=ws, start=False) as fresh:
            st = fresh.status()
    assert st["index"]["provider"] == "hash"
    assert st["fallback"] is not None and st["fallback"]["from"] == "openai"
    assert "model not found" in st["fallback"]["reason"]


def test_index_exits_non_zero_and_says_so_when_every_embedding_failed(tmp_path: Path, cli) -> None:
    ws = _workspace(tmp_path, 3)
    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", Reply(status=400, body="model not found"))
        cfg = tmp_path / "c.json"
        cfg.write_text('{"agents": {"defaults": {"memorySearch": {"provider": "openai", "remote": '
                       f'{{"baseUrl": "{server.url}/v1", "apiKey": "{KEY}"}}}}}}}}}}', encoding="utf-8")
        code, out, err = cli("--config", str(cfg), "--workspace", str(ws), "index")
    assert code == 1
    assert "every embedding failed" in err and "model not found" in err and "3 file(s)" in err
    assert "Traceback" not in err and err.splitlines()[-1].startswith("symi-memory: error: every embedding failed")
    assert KEY not in out + err
