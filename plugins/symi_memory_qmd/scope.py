"""Which session keys may search qmd (``memory.qmd.scope``, behaviour §7).

The schema is ``session.sendPolicy``'s: ``{default, rules: [{action, match}]}``.
The first rule whose every ``match`` field matches wins; otherwise
``default`` applies (unset means allow).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["ScopeDecision", "check_scope", "derive_channel", "normalise_key", "scope_problems"]

_AGENT_PREFIX = re.compile(r"^agent:[^:]*:")
_CHAT_TYPES = ("group", "channel", "direct", "dm")
_ACTIONS = ("allow", "deny")
_MATCH_FIELDS = ("chatType", "channel", "keyPrefix", "rawKeyPrefix")


@attrs.frozen(kw_only=True)
class ScopeDecision:
    """The verdict, with what it was derived from (for the denial log line)."""

    allowed: bool
    channel: str | None
    chat_type: str
    normalised_key: str


def normalise_key(raw: str | None) -> str:
    """Lower-case the key and strip a leading ``agent:<id>:``."""
    return _AGENT_PREFIX.sub("", (raw or "").strip().lower(), count=1)


def derive_channel(normalised: str) -> tuple[str | None, str]:
    """Return ``(channel, chatType)`` for a normalised key."""
    parts = normalised.split(":") if normalised else []
    if len(parts) >= 2 and parts[1] in _CHAT_TYPES:
        return parts[0] or None, "direct" if parts[1] == "dm" else parts[1]
    if "group" in parts:
        return None, "group"
    if "channel" in parts:
        return None, "channel"
    return None, "direct"


def _rule_matches(match: Mapping[str, Any], raw: str, normalised: str, channel: str | None, chat: str) -> bool:
    unknown = set(match) - set(_MATCH_FIELDS)
    if unknown:
        raise ValueError(
            f"memory.qmd.scope.rules[].match: unknown field(s) {sorted(unknown)}; use {', '.join(_MATCH_FIELDS)}"
        )
    if "chatType" in match and str(match["chatType"]).lower() != chat:
        return False
    if "channel" in match and str(match["channel"]).lower() != (channel or ""):
        return False
    if "keyPrefix" in match:
        prefix = str(match["keyPrefix"]).lower()
        # A legacy keyPrefix written with the agent: prefix is a raw-key prefix.
        subject = raw.lower() if prefix.startswith("agent:") else normalised
        if not subject.startswith(prefix):
            return False
    if "rawKeyPrefix" in match and not raw.lower().startswith(str(match["rawKeyPrefix"]).lower()):
        return False
    return True


def scope_problems(scope: Any) -> list[str]:
    """Every mistake in a ``memory.qmd.scope`` value, one actionable line each (empty when valid)."""
    if scope is None:
        return []
    if not isinstance(scope, Mapping):
        return [f"memory.qmd.scope is {scope!r}; use an object {{default, rules}}"]
    problems: list[str] = []
    unknown = sorted(set(scope) - {"default", "rules"})
    if unknown:
        problems.append(f"memory.qmd.scope: unknown field(s) {unknown}; use default and rules")
    default = scope.get("default")
    if default is not None and str(default).lower() not in _ACTIONS:
        problems.append(f"memory.qmd.scope.default is {default!r}; use allow or deny")
    rules = scope.get("rules") or []
    if not isinstance(rules, list):
        return [*problems, f"memory.qmd.scope.rules is {rules!r}; use a list of {{action, match}}"]
    for i, rule in enumerate(rules):
        where = f"memory.qmd.scope.rules[{i}]"
        if not isinstance(rule, Mapping):
            problems.append(f"{where} is {rule!r}; use an object {{action, match}}")
            continue
        if str(rule.get("action") or "").lower() not in _ACTIONS:
            problems.append(f"{where}.action is {rule.get('action')!r}; use allow or deny")
        match = rule.get("match") or {}
        if not isinstance(match, Mapping):
            problems.append(f"{where}.match is {match!r}; use an object with {', '.join(_MATCH_FIELDS)}")
            continue
        bad = sorted(set(match) - set(_MATCH_FIELDS))
        if bad:
            problems.append(f"{where}.match: unknown field(s) {bad}; use {', '.join(_MATCH_FIELDS)}")
    return problems


def check_scope(scope: Mapping[str, Any] | None, session_key: str | None) -> ScopeDecision:
    """Apply the scope rules to a session key (None counts as a direct chat)."""
    raw = (session_key or "").strip()
    normalised = normalise_key(raw)
    channel, chat = derive_channel(normalised)
    scope = scope or {}
    verdict = str(scope.get("default") or "allow").lower()
    if verdict not in _ACTIONS:
        raise ValueError(f"memory.qmd.scope.default is {scope.get('default')!r}; use allow or deny")
    for i, rule in enumerate(scope.get("rules") or []):
        action = str(rule.get("action") or "").lower()
        if action not in _ACTIONS:
            raise ValueError(f"memory.qmd.scope.rules[{i}].action is {rule.get('action')!r}; use allow or deny")
        if _rule_matches(rule.get("match") or {}, raw, normalised, channel, chat):
            verdict = action
            break
    return ScopeDecision(allowed=verdict == "allow", channel=channel, chat_type=chat, normalised_key=normalised)
