"""The typed config this plugin owns, declared with the core's field DSL (see symi_memory_register_config_sections)."""

from __future__ import annotations

import attrs

from symi_memory.config.fields import opt, section

__all__ = ["Batch", "Remote"]


@attrs.define(kw_only=True, eq=False, repr=False)
class Batch:
    enabled: bool = opt("enabled", False, doc="Use the provider's batch API for indexing.")
    wait: bool = opt("wait", True, doc="Wait for batch jobs to finish.")
    concurrency: int = opt("concurrency", 2, lo=1, hi=64, doc="Batch jobs submitted in parallel.")
    poll_interval_ms: int = opt("pollIntervalMs", 2000, lo=1, hi=86_400_000, doc="Batch status poll interval.")
    timeout_minutes: float = opt("timeoutMinutes", 60, kind="float", lo=0.01, hi=525_600, doc="Give up on a batch job after this long.")


@attrs.define(kw_only=True, eq=False, repr=False)
class Remote:
    base_url: str | None = opt("baseUrl", None, kind="str", doc="Override the provider's API base URL (OpenAI-compatible endpoints).")
    api_key: str | None = opt("apiKey", None, kind="str", doc="API key; wins over models.providers.<p>.apiKey and env.")
    headers: dict = opt("headers", {}, item="str", doc="Extra headers, merged over the provider's; these win.")
    timeout_ms: int = opt("timeoutMs", 60_000, lo=1, hi=86_400_000, doc="Per-request timeout.")
    batch: Batch = section(Batch, "batch")
