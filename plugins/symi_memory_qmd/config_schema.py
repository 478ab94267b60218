"""The typed config this plugin owns, declared with the core's field DSL (see symi_memory_register_config_sections)."""

from __future__ import annotations

import attrs

from symi_memory.config.fields import opt, section

__all__ = ["QmdSection"]


@attrs.define(kw_only=True, eq=False, repr=False)
class QmdUpdate:
    interval: str = opt("interval", "5m", kind="duration", doc="Periodic qmd update.")
    debounce_ms: int = opt("debounceMs", 15_000, lo=0, hi=86_400_000, doc="Skip non-forced updates within this window.")
    on_boot: bool = opt("onBoot", True, doc="Update when the backend starts.")
    wait_for_boot_sync: bool = opt("waitForBootSync", False, doc="Block start-up until the boot update finishes.")
    embed_interval: str = opt("embedInterval", "60m", kind="duration", doc="Run qmd embed at most this often.")
    command_timeout_ms: int = opt("commandTimeoutMs", 30_000, lo=1, hi=86_400_000, doc="Timeout of collection commands.")
    update_timeout_ms: int = opt("updateTimeoutMs", 120_000, lo=1, hi=86_400_000, doc="Timeout of qmd update.")
    embed_timeout_ms: int = opt("embedTimeoutMs", 120_000, lo=1, hi=86_400_000, doc="Timeout of qmd embed.")


@attrs.define(kw_only=True, eq=False, repr=False)
class QmdLimits:
    max_results: int = opt("maxResults", 6, lo=1, doc="Results per search.")
    max_snippet_chars: int = opt("maxSnippetChars", 700, lo=1, doc="Snippet cap.")
    max_injected_chars: int = opt("maxInjectedChars", 4000, lo=1, doc="Total snippet characters per search (citation footers count).")
    timeout_ms: int = opt("timeoutMs", 4000, lo=1, hi=86_400_000, doc="Timeout of one qmd search call.")


@attrs.define(kw_only=True, eq=False, repr=False)
class QmdSessions:
    enabled: bool = opt("enabled", False, doc="Export session transcripts into a qmd collection.")
    retention_days: float | None = opt("retentionDays", None, kind="float", lo=0, doc="Drop the exports of transcripts not written to for this many days (changing it marks the index stale: the next sync applies it).")
    export_dir: str | None = opt("exportDir", None, kind="str", doc="Where exports go; default <stateDir>/agents/<id>/qmd/sessions.")


@attrs.define(kw_only=True, eq=False, repr=False)
class QmdSection:
    command: str = opt("command", "qmd", doc="qmd executable (shell-split).")
    search_mode: str = opt("searchMode", "search", choices=("search", "vsearch", "query"), doc="qmd command behind memory_search.")
    include_default_memory: bool = opt("includeDefaultMemory", True, doc="Index MEMORY.md + memory/**/*.md.")
    paths: list = opt("paths", [], item="collection", doc="Extra collections: a path, or {path, pattern?, name?}.")
    sessions: QmdSessions = section(QmdSessions, "sessions")
    update: QmdUpdate = section(QmdUpdate, "update")
    limits: QmdLimits = section(QmdLimits, "limits")
    scope: dict = opt(
        "scope",
        {"default": "deny", "rules": [{"action": "allow", "match": {"chatType": "direct"}}]},
        doc="session.sendPolicy-style rules deciding which session keys may search.",
    )
