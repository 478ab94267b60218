"""The resolved ``memory.qmd`` settings the sidecar runs with.

Defaults come from the core's typed config model, so a partial dict (as in
tests or an embedding application) gets the same values as a config file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from symi_memory.config.fields import deep_merge, defaults_of, parse_duration_ms
from symi_memory.errors import ConfigError

from .config_schema import QmdSection
from .scope import scope_problems

__all__ = ["QmdSettings", "qmd_defaults"]

SEARCH_MODES = ("search", "vsearch", "query")


def qmd_defaults() -> dict[str, Any]:
    """The ``memory.qmd`` defaults as a camelCase dict."""
    return defaults_of(QmdSection)


def _duration(section: Mapping[str, Any], key: str) -> float:
    try:
        return parse_duration_ms(section[key]) / 1000.0
    except ValueError as exc:
        raise ConfigError(f"memory.qmd.update.{key}: {exc}") from None


@attrs.frozen(kw_only=True)
class QmdSettings:
    """``memory.qmd`` with durations in seconds. ``raw`` keeps the camelCase dict."""

    raw: dict[str, Any]
    command: str
    search_mode: str
    interval_s: float
    embed_interval_s: float
    debounce_s: float

    @classmethod
    def from_config(cls, section: Mapping[str, Any] | None) -> QmdSettings:
        """Fill defaults and check the values the sidecar interprets itself.

        Raises :class:`~symi_memory.errors.ConfigError` (one line per problem)
        so a bad scope stops ``open_memory`` instead of the first search.
        """
        raw = deep_merge(qmd_defaults(), section or {})
        mode = str(raw["searchMode"]).lower()
        problems = scope_problems(raw.get("scope"))
        if mode not in SEARCH_MODES:
            problems.insert(0, f"memory.qmd.searchMode is {raw['searchMode']!r}; use one of {', '.join(SEARCH_MODES)}")
        if problems:
            raise ConfigError(problems)
        update = raw["update"]
        return cls(
            raw=raw,
            command=str(raw["command"]),
            search_mode=mode,
            interval_s=_duration(update, "interval"),
            embed_interval_s=_duration(update, "embedInterval"),
            debounce_s=max(0, int(update["debounceMs"])) / 1000.0,
        )

    @property
    def update(self) -> dict[str, Any]:
        return self.raw["update"]

    @property
    def limits(self) -> dict[str, Any]:
        return self.raw["limits"]

    @property
    def sessions(self) -> dict[str, Any]:
        return self.raw["sessions"]

    @property
    def scope(self) -> dict[str, Any]:
        return self.raw["scope"]
