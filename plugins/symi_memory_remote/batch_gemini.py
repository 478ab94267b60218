"""Gemini's asynchronous batch: ``models/<m>:asyncBatchEmbedContent`` and the ``batches`` resource.

Inputs go inline (up to the API's 20 MB request limit, so jobs are kept
well under it); results come back inline in the same order, each tagged
with the ``metadata.key`` we sent. A ``responsesFile`` answer is downloaded
from the media endpoint instead.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from .batch_runner import JobStatus
from .client import RemoteClient
from .vectors import check_vector

__all__ = ["GeminiBatchApi"]

log = logging.getLogger("symi_memory.remote.batch")

_FAILED = {"BATCH_STATE_FAILED", "BATCH_STATE_CANCELLED", "BATCH_STATE_EXPIRED"}


class GeminiBatchApi:
    """:class:`~symi_memory_remote.batch_runner.BatchApi` for the Gemini API."""

    max_job_items = 10_000
    max_job_bytes = 10_000_000

    def __init__(self, client: RemoteClient, *, base_url: str, model_path: str) -> None:
        self._client = client
        self._base = base_url
        self._model_path = model_path
        self._what = f"{client.provider} batch"

    def submit(self, texts: Sequence[str]) -> str:
        """Create the batch with inline requests; returns its ``batches/<id>`` name."""
        from .gemini import gemini_request  # the request shape lives with the provider

        requests = [
            {"request": gemini_request(self._model_path, text, "document"), "metadata": {"key": str(i)}}
            for i, text in enumerate(texts)
        ]
        body = {
            "batch": {
                "displayName": "symi-memory-embeddings",
                "inputConfig": {"requests": {"requests": requests}},
            }
        }
        url = f"{self._base}/{self._model_path}:asyncBatchEmbedContent"
        payload = self._client.post_json(url, body, what=f"{self._what} create")
        name = _get(payload, "name") or _get(payload, "metadata", "name")
        if not isinstance(name, str) or not name:
            raise self._client.error(f"{self._what}: create answer has no batch name")
        return name

    def status(self, job_id: str) -> JobStatus:
        """One look at ``GET {base}/batches/<id>`` (an operation wrapping the batch)."""
        payload = self._client.get_json(f"{self._base}/{job_id}", what=f"{self._what} status")
        state = _get(payload, "metadata", "state") or _get(payload, "state") or ""
        error = _get(payload, "error")
        if state in _FAILED or error:
            message = _get(error, "message") if isinstance(error, Mapping) else None
            return JobStatus(failed=f"state {state or 'error'}{f': {message}' if message else ''}")
        if state == "BATCH_STATE_SUCCEEDED" or _get(payload, "done") is True:
            return JobStatus(done=True, result=payload)
        return JobStatus()

    def results(self, status: JobStatus, count: int) -> dict[int, list[float]]:
        """Read inline responses, or download the responses file."""
        payload = status.result
        output = next(
            (
                o
                for o in (
                    _get(payload, "metadata", "output"),
                    _get(payload, "response", "output"),
                    _get(payload, "response"),
                    _get(payload, "output"),
                )
                if isinstance(o, Mapping)
                and ("inlinedResponses" in o or "inlinedEmbedContentResponses" in o or "responsesFile" in o)
            ),
            None,
        )
        if output is None:
            return {}
        inline = output.get("inlinedResponses") or output.get("inlinedEmbedContentResponses")
        if isinstance(inline, Mapping):
            items = inline.get("inlinedResponses")
        elif output.get("responsesFile"):
            items = self._download(str(output["responsesFile"]))
        else:
            items = None
        return self._collect(items if isinstance(items, list) else [], count)

    def _download(self, file_name: str) -> list[Any]:
        root = (
            self._base[: -len("/v1beta")] + "/download/v1beta"
            if self._base.endswith("/v1beta")
            else self._base
        )
        response = self._client.request(
            "GET", f"{root}/{file_name}:download", what=f"{self._what} download", params={"alt": "media"}
        )
        items = []
        for line in filter(str.strip, response.text.splitlines()):
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError:
                log.warning("%s: skipping an unreadable responses-file line", self._what)
        return items

    def _collect(self, items: list[Any], count: int) -> dict[int, list[float]]:
        vectors: dict[int, list[float]] = {}
        for position, item in enumerate(items):
            try:
                key = _get(item, "metadata", "key") or _get(item, "key")
                index = int(key) if key is not None else position
                values = _get(item, "response", "embedding", "values") or _get(item, "embedding", "values")
                if _get(item, "error") or values is None or not 0 <= index < count:
                    raise ValueError(f"no embedding ({_get(item, 'error', 'message') or 'missing'})")
                vectors[index] = check_vector(
                    values, where=f"response {position}", make_error=self._client.error
                )
            except Exception as exc:  # one bad response must not sink the others
                log.warning(
                    "%s: skipping response %d: %s", self._what, position, self._client.redact(str(exc))
                )
        return vectors


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj
