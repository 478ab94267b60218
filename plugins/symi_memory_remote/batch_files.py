"""The files + batches flow shared by OpenAI and Voyage.

upload JSONL (``POST /files``, purpose ``batch``) -> ``POST /batches`` ->
poll ``GET /batches/{id}`` -> download ``GET /files/{output_file_id}/content``
-> map lines back by ``custom_id``. The two differ only in the line shape and
the create body: OpenAI names model and endpoint on every line, Voyage once
in ``request_params``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from .batch_runner import JobStatus
from .client import RemoteClient
from .vectors import check_vector, read_embedding_data

__all__ = ["FileBatchApi"]

log = logging.getLogger("symi_memory.remote.batch")

_FAILED = {"failed", "expired", "cancelled", "cancelling"}


class FileBatchApi:
    """:class:`~symi_memory_remote.batch_runner.BatchApi` for OpenAI (``flavour="openai"``) and Voyage."""

    max_job_items = 50_000
    max_job_bytes = 100_000_000

    def __init__(self, client: RemoteClient, *, base_url: str, model: str, flavour: str) -> None:
        self._client = client
        self._base = base_url
        self._model = model
        self._flavour = flavour
        self._what = f"{client.provider} batch"

    def _line(self, index: int, text: str) -> dict[str, Any]:
        if self._flavour == "voyage":
            return {"custom_id": str(index), "body": {"input": [text]}}
        return {
            "custom_id": str(index),
            "method": "POST",
            "url": "/v1/embeddings",
            "body": {"model": self._model, "input": text},
        }

    def _create_body(self, file_id: str) -> dict[str, Any]:
        if self._flavour == "voyage":
            return {
                "input_file_id": file_id,
                "endpoint": "/v1/embeddings",
                "completion_window": "12h",
                "request_params": {"model": self._model, "input_type": "document"},
            }
        return {"input_file_id": file_id, "endpoint": "/v1/embeddings", "completion_window": "24h"}

    def submit(self, texts: Sequence[str]) -> str:
        """Upload the inputs and create the batch; returns the batch id."""
        jsonl = "".join(json.dumps(self._line(i, t), ensure_ascii=False) + "\n" for i, t in enumerate(texts))
        upload = self._client.request(
            "POST",
            f"{self._base}/files",
            what=f"{self._what} file upload",
            data={"purpose": "batch"},
            files={"file": ("symi-memory-embeddings.jsonl", jsonl.encode("utf-8"), "application/jsonl")},
        )
        file_id = _id_of(self._client.json_of(upload, what=f"{self._what} file upload"))
        if not file_id:
            raise self._client.error(f"{self._what}: file upload answer has no id")
        created = self._client.post_json(
            f"{self._base}/batches", self._create_body(file_id), what=f"{self._what} create"
        )
        batch_id = _id_of(created)
        if not batch_id:
            raise self._client.error(f"{self._what}: create answer has no id")
        return batch_id

    def status(self, job_id: str) -> JobStatus:
        """One look at ``GET /batches/{id}``."""
        payload = self._client.get_json(f"{self._base}/batches/{job_id}", what=f"{self._what} status")
        state = str(payload.get("status", "")) if isinstance(payload, Mapping) else ""
        if state in _FAILED:
            return JobStatus(failed=f"status {state}{_first_error(payload)}")
        if state == "completed":
            if not payload.get("output_file_id"):
                return JobStatus(failed=f"completed without an output file{_first_error(payload)}")
            return JobStatus(done=True, result=payload)
        return JobStatus()

    def results(self, status: JobStatus, count: int) -> dict[int, list[float]]:
        """Download the output file and map each line back by ``custom_id``."""
        file_id = status.result["output_file_id"]
        response = self._client.request(
            "GET", f"{self._base}/files/{file_id}/content", what=f"{self._what} download"
        )
        vectors: dict[int, list[float]] = {}
        for n, line in enumerate(response.text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                index = int(record["custom_id"])
                reply = record.get("response") or {}
                code = reply.get("status_code", 200)
                raws = read_embedding_data(reply.get("body", reply))
                if code != 200 or not raws or not 0 <= index < count:
                    raise ValueError(f"status {code}, error {record.get('error')!r}")
                vectors[index] = check_vector(raws[0], where=f"line {n}", make_error=self._client.error)
            except Exception as exc:  # one bad line must not sink the others
                log.warning("%s: skipping output line %d: %s", self._what, n, self._client.redact(str(exc)))
        return vectors


def _id_of(payload: Any) -> str | None:
    value = payload.get("id") if isinstance(payload, Mapping) else None
    return str(value) if value else None


def _first_error(payload: Mapping[str, Any]) -> str:
    errors = payload.get("errors")
    data = errors.get("data") if isinstance(errors, Mapping) else None
    if isinstance(data, list) and data and isinstance(data[0], Mapping) and data[0].get("message"):
        return f": {data[0]['message']}"
    return ""
