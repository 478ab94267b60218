"""Gemini embeddings: ``:embedContent`` for queries, ``:batchEmbedContents`` for documents."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .base import RemoteEmbeddingProvider
from .batch_gemini import GeminiBatchApi
from .batch_runner import BatchApi
from .vectors import check_vectors

__all__ = ["GeminiEmbeddings", "gemini_request"]

_TASK = {"query": "RETRIEVAL_QUERY", "document": "RETRIEVAL_DOCUMENT"}


def gemini_request(model_path: str, text: str, kind: str) -> dict[str, Any]:
    """One ``EmbedContentRequest`` body."""
    return {"model": model_path, "content": {"parts": [{"text": text}]}, "taskType": _TASK[kind]}


def _values(item: Any) -> Any:
    return item.get("values") if isinstance(item, Mapping) else None


class GeminiEmbeddings(RemoteEmbeddingProvider):
    """The Gemini API; the key travels in ``x-goog-api-key``, never in the URL."""

    max_request_items = 100
    max_request_bytes = 250_000

    @property
    def model_path(self) -> str:
        """``models/<model>`` as the API names it."""
        return self.model if self.model.startswith("models/") else f"models/{self.model}"

    def _auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-goog-api-key": api_key}

    def _embed_request(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        what = f"{self.id} embeddings"
        if kind == "query" and len(texts) == 1:
            url = f"{self.base_url}/{self.model_path}:embedContent"
            payload = self._client.post_json(url, gemini_request(self.model_path, texts[0], kind), what=what)
            embedding = payload.get("embedding") if isinstance(payload, Mapping) else None
            if not isinstance(embedding, Mapping):
                raise self._client.error(f"{what}: answer from {url} has no embedding object")
            return check_vectors([_values(embedding)], 1, where=what, make_error=self._client.error)
        url = f"{self.base_url}/{self.model_path}:batchEmbedContents"
        body = {"requests": [gemini_request(self.model_path, text, kind) for text in texts]}
        payload = self._client.post_json(url, body, what=what)
        embeddings = payload.get("embeddings") if isinstance(payload, Mapping) else None
        if not isinstance(embeddings, list):
            raise self._client.error(f"{what}: answer from {url} has no embeddings[] list")
        raws = [_values(item) for item in embeddings]
        return check_vectors(raws, len(texts), where=what, make_error=self._client.error)

    def _batch_api(self) -> BatchApi | None:
        return GeminiBatchApi(self._client, base_url=self.base_url, model_path=self.model_path)
