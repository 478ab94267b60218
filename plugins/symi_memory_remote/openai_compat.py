"""OpenAI-compatible and Voyage embeddings: ``POST {base}/embeddings``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import RemoteEmbeddingProvider
from .batch_files import FileBatchApi
from .batch_runner import BatchApi
from .vectors import check_vectors, read_embedding_data

__all__ = ["OpenAIEmbeddings", "VoyageEmbeddings"]


class OpenAIEmbeddings(RemoteEmbeddingProvider):
    """OpenAI and any OpenAI-compatible endpoint (set ``remote.baseUrl``)."""

    max_request_items = 256
    max_request_bytes = 600_000

    def _auth_headers(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"}

    def _body(self, texts: Sequence[str], kind: str) -> dict[str, Any]:
        return {"model": self.model, "input": list(texts)}

    def _embed_request(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        what = f"{self.id} embeddings"
        payload = self._client.post_json(f"{self.base_url}/embeddings", self._body(texts, kind), what=what)
        raws = read_embedding_data(payload)
        if raws is None:
            raise self._client.error(f"{what}: answer from {self.base_url}/embeddings has no data[] list")
        return check_vectors(raws, len(texts), where=what, make_error=self._client.error)

    def _batch_api(self) -> BatchApi | None:
        return FileBatchApi(self._client, base_url=self.base_url, model=self.model, flavour="openai")


class VoyageEmbeddings(OpenAIEmbeddings):
    """Voyage AI: the OpenAI shape plus ``input_type``."""

    max_request_items = 128
    max_request_bytes = 320_000

    def _body(self, texts: Sequence[str], kind: str) -> dict[str, Any]:
        return {"model": self.model, "input": list(texts), "input_type": kind}

    def _batch_api(self) -> BatchApi | None:
        return FileBatchApi(self._client, base_url=self.base_url, model=self.model, flavour="voyage")
