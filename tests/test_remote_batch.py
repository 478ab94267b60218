"""Batch embedding flows (OpenAI, Voyage, Gemini) against a loopback server."""

from __future__ import annotations

import json
import logging
import random
import threading

import pytest
from support.loopback_http import Reply

from symi_memory.specs import ProviderContext
from symi_memory_remote import hooks
from symi_memory_remote.batch_runner import BatchPending

KEY = "sk-test-SENTINEL123"


class FakeTime:
    """Injectable sleep + clock: sleeping advances the clock instantly."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


def provider_for(name, base, t, *, model=None, **batch):
    settings = {"enabled": True, "wait": True, "concurrency": 2, "pollIntervalMs": 2000, "timeoutMinutes": 60}
    settings.update(batch)
    context = ProviderContext(
        settings={
            "provider": name,
            "model": model,
            "remote": {"apiKey": KEY, "baseUrl": base, "batch": settings},
        },
        model=model,
    )
    return hooks.create_provider(name, context, sleep=t.sleep, clock=t.clock, rng=random.Random(1))


def output_line(custom_id, vector):
    return json.dumps(
        {
            "id": f"req-{custom_id}",
            "custom_id": str(custom_id),
            "response": {
                "status_code": 200,
                "body": {"object": "list", "data": [{"index": 0, "embedding": vector}]},
            },
            "error": None,
        }
    )


def normal_embeddings(req):
    return Reply(
        json={"data": [{"index": i, "embedding": [float(len(t))]} for i, t in enumerate(req.json()["input"])]}
    )


# --------------------------------------------------------------------- openai


def test_openai_batch_flow(server):
    t = FakeTime()
    server.add("POST", "/v1/files", Reply(json={"id": "file-in", "object": "file", "purpose": "batch"}))
    server.add("POST", "/v1/batches", Reply(json={"id": "batch_abc", "status": "validating"}))
    server.add(
        "GET",
        "/v1/batches/batch_abc",
        Reply(json={"id": "batch_abc", "status": "in_progress"}),
        Reply(json={"id": "batch_abc", "status": "completed", "output_file_id": "file-out"}),
    )
    lines = [output_line(1, [0.0, 1.0]), output_line(0, [1.0, 0.0])]  # out of order on purpose
    server.add("GET", "/v1/files/file-out/content", Reply(body="\n".join(lines) + "\n"))
    provider = provider_for("openai", server.url + "/v1", t, pollIntervalMs=1500)

    assert provider.embed_documents(["first", "second"]) == [[1.0, 0.0], [0.0, 1.0]]

    assert server.paths() == [
        "POST /v1/files",
        "POST /v1/batches",
        "GET /v1/batches/batch_abc",
        "GET /v1/batches/batch_abc",
        "GET /v1/files/file-out/content",
    ]
    upload, create = server.requests[0], server.requests[1]
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in server.requests)
    fields = upload.multipart()
    assert fields["purpose"] == (None, b"batch")
    filename, content = fields["file"]
    assert filename.endswith(".jsonl")
    assert [json.loads(line) for line in content.decode().splitlines()] == [
        {
            "custom_id": "0",
            "method": "POST",
            "url": "/v1/embeddings",
            "body": {"model": "text-embedding-3-small", "input": "first"},
        },
        {
            "custom_id": "1",
            "method": "POST",
            "url": "/v1/embeddings",
            "body": {"model": "text-embedding-3-small", "input": "second"},
        },
    ]
    assert create.json() == {
        "input_file_id": "file-in",
        "endpoint": "/v1/embeddings",
        "completion_window": "24h",
    }
    assert t.slept == [1.5]


def test_two_batch_failures_disable_batch_mode(server, caplog):
    caplog.set_level(logging.WARNING, logger="symi_memory")
    t = FakeTime()
    server.add("POST", "/v1/files", Reply(json={"id": "file-in"}))
    server.add("POST", "/v1/batches", Reply(json={"id": "b1", "status": "validating"}))
    failed = {"id": "b1", "status": "failed", "errors": {"data": [{"message": "invalid jsonl"}]}}
    server.add("GET", "/v1/batches/b1", Reply(json=failed))
    server.add("POST", "/v1/embeddings", normal_embeddings)
    provider = provider_for("openai", server.url + "/v1", t)

    assert provider.embed_documents(["a", "bb"]) == [[1.0], [2.0]]
    assert server.paths() == ["POST /v1/files", "POST /v1/batches", "GET /v1/batches/b1"] * 2 + [
        "POST /v1/embeddings"
    ]
    assert provider.batch.disabled
    assert "invalid jsonl" in caplog.text and "batch mode disabled" in caplog.text
    assert KEY not in caplog.text

    # For the rest of the instance's life, documents go straight to normal requests.
    assert provider.embed_documents(["ccc"]) == [[3.0]]
    assert server.paths()[-1] == "POST /v1/embeddings" and len(server.requests) == 8


def test_batch_failures_count_per_sync_run_and_show_in_status(server):
    t = FakeTime()
    server.add("POST", "/v1/files", Reply(json={"id": "file-in"}))
    server.add("POST", "/v1/batches", Reply(json={"id": "b1", "status": "validating"}))
    failed = {"id": "b1", "status": "failed", "errors": {"data": [{"message": "invalid jsonl"}]}}
    server.add("GET", "/v1/batches/b1", Reply(json=failed))
    server.add("POST", "/v1/embeddings", normal_embeddings)
    provider = provider_for("openai", server.url + "/v1", t)
    assert provider.batch_status() == {"enabled": True, "failures": 0, "disabled": False, "pending": 0}

    provider.begin_sync()
    assert provider.embed_documents(["a"]) == [[1.0]]
    assert provider.batch_status() == {"enabled": True, "failures": 2, "disabled": True, "pending": 0}
    assert provider.embed_documents(["bb"]) == [[2.0]]  # same run: no new batch job
    assert server.paths().count("POST /v1/batches") == 2

    provider.begin_sync()  # the next run tries batch mode again
    assert provider.batch_status() == {"enabled": True, "failures": 0, "disabled": False, "pending": 0}
    assert provider.embed_documents(["ccc"]) == [[3.0]]
    assert server.paths().count("POST /v1/batches") == 4


def test_batch_status_when_off_and_pending_jobs(server):
    t = FakeTime()
    off = provider_for("openai", server.url + "/v1", t, enabled=False)
    assert off.batch_status() == {"enabled": False, "failures": 0, "disabled": False, "pending": 0}
    off.begin_sync()  # harmless without batch mode
    server.add("POST", "/v1/files", Reply(json={"id": "file-in"}))
    server.add("POST", "/v1/batches", Reply(json={"id": "b9"}))
    server.add("GET", "/v1/batches/b9", Reply(json={"id": "b9", "status": "in_progress"}))
    provider = provider_for("openai", server.url + "/v1", t, wait=False)
    with pytest.raises(BatchPending):
        provider.embed_documents(["doc"])
    provider.begin_sync()  # a new run keeps the job to collect
    assert provider.batch_status() == {"enabled": True, "failures": 0, "disabled": False, "pending": 1}


def test_partial_output_is_completed_by_normal_requests(server):
    t = FakeTime()
    server.add("POST", "/v1/files", Reply(json={"id": "file-in"}))
    server.add("POST", "/v1/batches", Reply(json={"id": "b1"}))
    server.add(
        "GET", "/v1/batches/b1", Reply(json={"id": "b1", "status": "completed", "output_file_id": "out"})
    )
    error_line = json.dumps({"custom_id": "1", "response": {"status_code": 500, "body": {}}, "error": None})
    server.add("GET", "/v1/files/out/content", Reply(body=output_line(0, [9.0]) + "\n" + error_line + "\n"))
    server.add("POST", "/v1/embeddings", normal_embeddings)
    provider = provider_for("openai", server.url + "/v1", t)

    assert provider.embed_documents(["x", "yy"]) == [[9.0], [2.0]]
    assert server.requests[-1].json()["input"] == ["yy"]
    assert provider.batch.failures == 1 and not provider.batch.disabled


def test_batch_timeout_counts_as_failure(server):
    t = FakeTime()
    server.add("POST", "/v1/files", Reply(json={"id": "file-in"}))
    server.add("POST", "/v1/batches", Reply(json={"id": "slow"}))
    server.add("GET", "/v1/batches/slow", Reply(json={"id": "slow", "status": "in_progress"}))
    server.add("POST", "/v1/embeddings", normal_embeddings)
    provider = provider_for("openai", server.url + "/v1", t, timeoutMinutes=1, pollIntervalMs=20000)

    assert provider.embed_documents(["abcd"]) == [[4.0]]
    assert provider.batch.disabled
    assert t.now >= 120 and set(t.slept) == {20.0}


def test_wait_false_returns_pending_then_collects_the_same_job(server):
    t = FakeTime()
    server.add("POST", "/v1/files", Reply(json={"id": "file-in"}))
    server.add("POST", "/v1/batches", Reply(json={"id": "b9"}))
    server.add(
        "GET",
        "/v1/batches/b9",
        Reply(json={"id": "b9", "status": "in_progress"}),
        Reply(json={"id": "b9", "status": "completed", "output_file_id": "out"}),
    )
    server.add("GET", "/v1/files/out/content", Reply(body=output_line(0, [0.25]) + "\n"))
    provider = provider_for("openai", server.url + "/v1", t, wait=False)

    with pytest.raises(BatchPending, match="b9 still running") as info:
        provider.embed_documents(["doc"])
    assert info.value.retryable is True
    assert t.slept == []  # never blocked
    assert provider.embed_documents(["doc"]) == [[0.25]]
    assert [p for p in server.paths() if p == "POST /v1/files"] == ["POST /v1/files"]  # no second job


def test_jobs_run_concurrently(server):
    t = FakeTime()
    uploads: dict[str, list[str]] = {}
    lock = threading.Lock()
    both_created = threading.Barrier(2, timeout=5)

    def upload(req):
        _, content = req.multipart()["file"]
        with lock:
            file_id = f"file-{len(uploads) + 1}"
            uploads[file_id] = [json.loads(line)["body"]["input"] for line in content.decode().splitlines()]
        return Reply(json={"id": file_id})

    def create(req):
        both_created.wait()  # fails (broken barrier -> 500s) unless two jobs are in flight at once
        return Reply(json={"id": "batch-" + req.json()["input_file_id"]})

    def content(file_id):
        return lambda req: Reply(
            body="\n".join(output_line(i, [float(len(x))]) for i, x in enumerate(uploads[file_id]))
        )

    server.add("POST", "/v1/files", upload)
    server.add("POST", "/v1/batches", create)
    for n in (1, 2):
        done = {"status": "completed", "output_file_id": f"out-{n}"}
        server.add("GET", f"/v1/batches/batch-file-{n}", Reply(json=done))
        server.add("GET", f"/v1/files/out-{n}/content", content(f"file-{n}"))
    provider = provider_for("openai", server.url + "/v1", t, concurrency=2)
    provider.batch.api.max_job_items = 2

    assert provider.embed_documents(["a", "bb", "ccc", "dddd"]) == [[1.0], [2.0], [3.0], [4.0]]
    assert sorted(map(sorted, uploads.values())) == [["a", "bb"], ["ccc", "dddd"]]
    assert provider.batch.failures == 0


# --------------------------------------------------------------------- voyage


def test_voyage_batch_flow(server):
    t = FakeTime()
    server.add("POST", "/v1/files", Reply(json={"id": "file-v", "object": "file"}))
    server.add("POST", "/v1/batches", Reply(json={"id": "batch-v", "status": "validating"}))
    server.add(
        "GET",
        "/v1/batches/batch-v",
        Reply(json={"id": "batch-v", "status": "completed", "output_file_id": "out-v"}),
    )
    server.add(
        "GET", "/v1/files/out-v/content", Reply(body=output_line(1, [2.0]) + "\n" + output_line(0, [1.0]))
    )
    provider = provider_for("voyage", server.url + "/v1", t)

    assert provider.embed_documents(["one", "two"]) == [[1.0], [2.0]]
    upload, create = server.requests[0], server.requests[1]
    assert upload.multipart()["purpose"] == (None, b"batch")
    lines = upload.multipart()["file"][1].decode().splitlines()
    assert [json.loads(line) for line in lines] == [
        {"custom_id": "0", "body": {"input": ["one"]}},
        {"custom_id": "1", "body": {"input": ["two"]}},
    ]
    assert create.json() == {
        "input_file_id": "file-v",
        "endpoint": "/v1/embeddings",
        "completion_window": "12h",
        "request_params": {"model": "voyage-4-large", "input_type": "document"},
    }


# --------------------------------------------------------------------- gemini


def gemini_done(name, items):
    return {
        "name": name,
        "done": True,
        "metadata": {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.EmbedContentBatch",
            "state": "BATCH_STATE_SUCCEEDED",
            "output": {"inlinedResponses": {"inlinedResponses": items}},
        },
    }


def test_gemini_async_batch_flow(server):
    t = FakeTime()
    create_path = "/v1beta/models/gemini-embedding-001:asyncBatchEmbedContent"
    server.add(
        "POST", create_path, Reply(json={"name": "batches/g1", "metadata": {"state": "BATCH_STATE_PENDING"}})
    )
    items = [
        {"response": {"embedding": {"values": [2.0, 2.0]}}, "metadata": {"key": "1"}},
        {"response": {"embedding": {"values": [1.0, 1.0]}}, "metadata": {"key": "0"}},
    ]
    server.add(
        "GET",
        "/v1beta/batches/g1",
        Reply(json={"name": "batches/g1", "metadata": {"state": "BATCH_STATE_RUNNING"}}),
        Reply(json=gemini_done("batches/g1", items)),
    )
    provider = provider_for("gemini", server.url + "/v1beta", t)

    assert provider.embed_documents(["a", "b"]) == [[1.0, 1.0], [2.0, 2.0]]
    assert server.paths() == [f"POST {create_path}", "GET /v1beta/batches/g1", "GET /v1beta/batches/g1"]
    assert all(r.headers["x-goog-api-key"] == KEY and r.query == "" for r in server.requests)

    def request(i, text):
        return {
            "request": {
                "model": "models/gemini-embedding-001",
                "content": {"parts": [{"text": text}]},
                "taskType": "RETRIEVAL_DOCUMENT",
            },
            "metadata": {"key": str(i)},
        }

    assert server.requests[0].json() == {
        "batch": {
            "displayName": "symi-memory-embeddings",
            "inputConfig": {"requests": {"requests": [request(0, "a"), request(1, "b")]}},
        }
    }
    assert t.slept == [2.0]


def test_gemini_batch_failures_fall_back_to_batch_embed_contents(server):
    t = FakeTime()
    create_path = "/v1beta/models/m:asyncBatchEmbedContent"
    server.add(
        "POST",
        create_path,
        Reply(json={"name": "batches/g2"}),
        Reply(status=400, json={"error": {"message": "Batch API not available for this key"}}),
    )
    failed = {"name": "batches/g2", "metadata": {"state": "BATCH_STATE_FAILED"}, "error": {"message": "boom"}}
    server.add("GET", "/v1beta/batches/g2", Reply(json=failed))
    server.add(
        "POST",
        "/v1beta/models/m:batchEmbedContents",
        lambda req: Reply(
            json={
                "embeddings": [
                    {"values": [float(len(r["content"]["parts"][0]["text"]))]} for r in req.json()["requests"]
                ]
            }
        ),
    )
    provider = provider_for("gemini", server.url + "/v1beta", t, model="m")

    assert provider.embed_documents(["xy", "xyz"]) == [[2.0], [3.0]]
    assert provider.batch.disabled
    assert server.paths() == [
        f"POST {create_path}",
        "GET /v1beta/batches/g2",
        f"POST {create_path}",
        "POST /v1beta/models/m:batchEmbedContents",
    ]


def test_gemini_responses_file_is_downloaded(server):
    t = FakeTime()
    server.add("POST", "/v1beta/models/m:asyncBatchEmbedContent", Reply(json={"name": "batches/g3"}))
    done = {
        "name": "batches/g3",
        "done": True,
        "metadata": {"state": "BATCH_STATE_SUCCEEDED", "output": {"responsesFile": "files/out3"}},
    }
    server.add("GET", "/v1beta/batches/g3", Reply(json=done))
    lines = [
        {"key": "1", "response": {"embedding": {"values": [0.5]}}},
        {"key": "0", "response": {"embedding": {"values": [0.25]}}},
    ]
    server.add("GET", "/download/v1beta/files/out3:download", Reply(body="\n".join(map(json.dumps, lines))))
    provider = provider_for("gemini", server.url + "/v1beta", t, model="m")

    assert provider.embed_documents(["p", "q"]) == [[0.25], [0.5]]
    download = server.requests[-1]
    assert download.query == "alt=media" and download.headers["x-goog-api-key"] == KEY
