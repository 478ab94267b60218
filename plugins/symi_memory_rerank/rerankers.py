"""Rerankers for the common hosted ``/rerank`` APIs (Cohere, Voyage, Jina).

The HTTP, retry and key-lookup code is the remote-embeddings plugin's, imported
inside the constructor so this module stays cheap to import.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from symi_memory.specs import ProviderUnavailable, RerankerContext

if TYPE_CHECKING:  # the hooks import this module for APIS on every command; only an annotation needs random
    import random

__all__ = ["APIS", "HttpReranker", "RerankApi"]


@attrs.frozen(kw_only=True)
class RerankApi:
    """The fixed facts of one hosted rerank API."""

    name: str
    label: str
    base_url: str
    default_model: str
    env_var: str
    top_key: str
    results_key: str


APIS: dict[str, RerankApi] = {
    api.name: api
    for api in (
        RerankApi(
            name="cohere",
            label="Cohere",
            base_url="https://api.cohere.com/v2",
            default_model="rerank-v3.5",
            env_var="COHERE_API_KEY",
            top_key="top_n",
            results_key="results",
        ),
        RerankApi(
            name="voyage",
            label="Voyage",
            base_url="https://api.voyageai.com/v1",
            default_model="rerank-2.5",
            env_var="VOYAGE_API_KEY",
            top_key="top_k",
            results_key="data",
        ),
        RerankApi(
            name="jina",
            label="Jina",
            base_url="https://api.jina.ai/v1",
            default_model="jina-reranker-v2-base-multilingual",
            env_var="JINA_API_KEY",
            top_key="top_n",
            results_key="results",
        ),
    )
}


def missing_key_reason(api: RerankApi) -> str:
    """The actionable message shown when no key resolves."""
    return f"no {api.label} API key for reranking: set {api.env_var} or memorySearch.query.rerank.apiKey"


def resolve_key(api: RerankApi, ctx: RerankerContext) -> str | None:
    """``rerank.apiKey``, then ``models.providers.<name>.apiKey``, then the environment."""
    from symi_memory_remote.keys import resolve_api_key

    return resolve_api_key(
        ctx.settings or {}, ctx.models, ctx.env or {}, provider_names=(api.name,), env_var=api.env_var
    )


class HttpReranker:
    """One hosted rerank API behind :class:`symi_memory.specs.Reranker`."""

    def __init__(
        self,
        api: RerankApi,
        ctx: RerankerContext,
        *,
        sleep: Callable[[float], None] = time.sleep,
        transport: Any = None,
        rng: random.Random | None = None,
    ) -> None:
        from symi_memory.secrets import split_base_url
        from symi_memory_remote.client import RemoteClient
        from symi_memory_remote.keys import (
            merge_headers,
            positive_number,
            provider_entry,
            resolve_base_url,
            section,
        )

        settings = ctx.settings or {}
        key = resolve_key(api, ctx)
        if not key:
            raise ProviderUnavailable(missing_key_reason(api))
        entry = provider_entry(ctx.models, (api.name,))
        self.api = api
        self.model = str(ctx.model or settings.get("model") or api.default_model)
        base_url = resolve_base_url(settings, entry, api.base_url)
        self.url = f"{split_base_url(base_url)[0]}/rerank"
        top_n = settings.get("topN")
        self.default_top_n = (
            top_n if isinstance(top_n, int) and not isinstance(top_n, bool) and top_n > 0 else 20
        )
        self._client = RemoteClient(
            provider=api.name,
            headers=merge_headers(
                {"Authorization": f"Bearer {key}"}, section(entry, "headers"), section(settings, "headers")
            ),
            timeout_s=positive_number(settings.get("timeoutMs"), 10000.0) / 1000.0,
            secrets=[key],
            base_url=base_url,
            sleep=sleep,
            transport=transport,
            rng=rng,
        )

    def rerank(self, query: str, documents: Sequence[str], top_n: int) -> list[tuple[int, float]]:
        """``(index, score)`` pairs, best first, scores clamped to 0..1."""
        if not documents:
            return []
        limit = min(top_n if top_n > 0 else self.default_top_n, len(documents))
        body = {"model": self.model, "query": query, "documents": list(documents), self.api.top_key: limit}
        what = f"{self.api.name} rerank"
        payload = self._client.post_json(self.url, body, what=what)
        items = payload.get(self.api.results_key) if isinstance(payload, Mapping) else None
        if not isinstance(items, list):
            raise self._client.error(f"{what}: answer from {self.url} has no {self.api.results_key}[] list")
        pairs: dict[int, float] = {}
        for item in items:
            index = item.get("index") if isinstance(item, Mapping) else None
            score = item.get("relevance_score") if isinstance(item, Mapping) else None
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(documents):
                raise self._client.error(
                    f"{what}: result index {index!r} is not within 0..{len(documents) - 1}"
                )
            if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
                raise self._client.error(f"{what}: result {index} has non-numeric relevance_score {score!r}")
            pairs.setdefault(index, min(1.0, max(0.0, float(score))))
        ranked = sorted(pairs.items(), key=lambda pair: (-pair[1], pair[0]))
        return ranked[:limit]

    def close(self) -> None:
        """Release the HTTP connection pool."""
        self._client.close()
