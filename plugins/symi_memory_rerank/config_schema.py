"""The typed config this plugin owns, declared with the core's field DSL (see symi_memory_register_config_sections)."""

from __future__ import annotations

import attrs

from symi_memory.config.fields import opt

__all__ = ["RerankApi"]


@attrs.define(kw_only=True, eq=False, repr=False)
class RerankApi:
    model: str | None = opt("model", None, kind="str", doc="Reranker model; unset: the reranker's default.")
    base_url: str | None = opt("baseUrl", None, kind="str", doc="Override the rerank API base URL.")
    api_key: str | None = opt("apiKey", None, kind="str", doc="Rerank API key (else models.providers.<name>.apiKey, else env).")
    headers: dict = opt("headers", {}, item="str", doc="Extra HTTP headers.")
    timeout_ms: int = opt("timeoutMs", 10_000, lo=1, hi=86_400_000, doc="Per-request timeout.")
