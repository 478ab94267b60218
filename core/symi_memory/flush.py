"""Pre-compaction memory flush policy (behaviour §8).

An agent runtime calls :func:`should_flush` each turn with the session's
entry from ``sessions.json``. When it says yes, the runtime runs one silent
turn with :func:`build_flush_prompts` and then records it with
``SessionStore.record_flush``. Config lives under
``agents.defaults.compaction``.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs

from .arguments import whole_number
from .errors import ConfigError
from .session_store import whole_count

__all__ = [
    "DEFAULT_FLUSH_PROMPT",
    "DEFAULT_FLUSH_SYSTEM_PROMPT",
    "FlushDecision",
    "FlushPrompts",
    "FlushSettings",
    "build_flush_prompts",
    "resolve_timezone",
    "should_flush",
    "user_moment",
    "workspace_writable",
]

DEFAULT_FLUSH_PROMPT = (
    "Pre-compaction memory flush. Store durable memories now (use memory/YYYY-MM-DD.md; "
    "create memory/ if needed). IMPORTANT: If the file already exists, APPEND new content only "
    "and do not overwrite existing entries. If nothing to store, reply with NO_REPLY."
)
DEFAULT_FLUSH_SYSTEM_PROMPT = (
    "Pre-compaction memory flush turn. The session is near auto-compaction; capture durable "
    "memories to disk. You may reply, but usually NO_REPLY is correct."
)
_NO_REPLY_HINT = "If there is nothing to store, reply with NO_REPLY."
_READ_ONLY_ACCESS = frozenset({"ro", "none"})


def _non_negative_int(value: Any, key: str) -> int:
    # NaN and the infinities first: int() of them raises ValueError or OverflowError, which names no key.
    if (isinstance(value, bool) or not isinstance(value, int | float) or value < 0
            or (isinstance(value, float) and not value.is_integer())):
        raise ConfigError(f"{key}: {value!r} is not a whole number >= 0; set it to e.g. 4000 or remove it")
    return int(value)


@attrs.frozen(kw_only=True)
class FlushSettings:
    """``agents.defaults.compaction`` as far as the memory flush needs it."""

    enabled: bool = True
    soft_threshold_tokens: int = 4000
    reserve_tokens_floor: int = 20000
    context_window: int = 200000  # used when the runtime does not know the model's window
    system_prompt: str | None = None
    prompt: str | None = None

    @classmethod
    def from_config(
        cls, compaction: Mapping[str, Any] | None, *, context_window: int | None = None
    ) -> FlushSettings:
        """Build from the camelCase ``agents.defaults.compaction`` mapping; missing keys keep defaults.

        ``context_window`` is ``agents.defaults.contextWindow`` (the window
        assumed when the runtime does not pass one to :func:`should_flush`).
        """
        base = "agents.defaults.compaction"
        # Only None is "not set": an empty list or a false is not an object either (``memoryFlush = false`` left the
        # flush on, with every default).
        compaction = {} if compaction is None else compaction
        if not isinstance(compaction, Mapping):
            raise ConfigError(f"{base}: expected an object, got {type(compaction).__name__}")
        flush = compaction.get("memoryFlush")
        flush = {} if flush is None else flush
        if not isinstance(flush, Mapping):
            off = "; to turn the flush off, set memoryFlush.enabled = false" if flush is False else ""
            raise ConfigError(f"{base}.memoryFlush: expected an object, got {type(flush).__name__}{off}")
        kwargs: dict[str, Any] = {}
        if context_window is not None:
            kwargs["context_window"] = _non_negative_int(context_window, "agents.defaults.contextWindow")
        if "reserveTokensFloor" in compaction:
            kwargs["reserve_tokens_floor"] = _non_negative_int(
                compaction["reserveTokensFloor"], f"{base}.reserveTokensFloor"
            )
        if "enabled" in flush:
            if not isinstance(flush["enabled"], bool):
                raise ConfigError(f"{base}.memoryFlush.enabled: {flush['enabled']!r} is not true or false")
            kwargs["enabled"] = flush["enabled"]
        if "softThresholdTokens" in flush:
            kwargs["soft_threshold_tokens"] = _non_negative_int(
                flush["softThresholdTokens"], f"{base}.memoryFlush.softThresholdTokens"
            )
        for src, dst in (("systemPrompt", "system_prompt"), ("prompt", "prompt")):
            value = flush.get(src)
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{base}.memoryFlush.{src}: expected a string, got {type(value).__name__}")
            if value and value.strip():
                kwargs[dst] = value
        return cls(**kwargs)


@attrs.frozen(kw_only=True)
class FlushDecision:
    """Whether to run a flush turn now, with the numbers behind it."""

    should_flush: bool
    threshold_tokens: int
    total_tokens: int | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "shouldFlush": self.should_flush,
            "thresholdTokens": self.threshold_tokens,
            "totalTokens": self.total_tokens,
            "reason": self.reason,
        }


def should_flush(
    entry: Mapping[str, Any] | None,
    settings: FlushSettings,
    *,
    context_window: int | None = None,
    workspace_writable: bool = True,
) -> FlushDecision:
    """Decide whether the session described by ``entry`` (a ``sessions.json`` entry) should flush.

    Flushes when ``totalTokens >= contextWindow - reserveTokensFloor -
    softThresholdTokens``, the count is known, fresh (``totalTokensFresh`` is
    not false) and > 0, and no flush ran yet in the current compaction cycle
    (``memoryFlushCompactionCount != compactionCount``). ``context_window`` is
    the model's window in tokens; None or 0 (the runtime does not know it)
    means the configured one, ``settings.context_window``, as
    ``flush check --context-window 0`` does. A negative one or one that is not
    a whole number raises ValueError.
    """
    entry = entry or {}
    context_window = whole_number(context_window, "context_window", minimum=0)
    window = context_window or settings.context_window
    threshold = window - settings.reserve_tokens_floor - settings.soft_threshold_tokens
    total = whole_count(entry.get("totalTokens"))

    def decide(ok: bool, reason: str) -> FlushDecision:
        return FlushDecision(should_flush=ok, threshold_tokens=threshold, total_tokens=total, reason=reason)

    if not settings.enabled:
        return decide(False, "disabled")
    if not workspace_writable:
        return decide(False, "workspace not writable")
    if threshold <= 0:
        return decide(False, "threshold not positive (context window too small for the reserve)")
    if total is None or total <= 0:
        return decide(False, "token count unknown")
    if entry.get("totalTokensFresh") is False:
        return decide(False, "token count stale")
    if total < threshold:
        return decide(False, "below threshold")
    cycle = whole_count(entry.get("compactionCount")) or 0  # unreadable counts as unset
    flushed = whole_count(entry.get("memoryFlushCompactionCount"))
    if flushed is not None and flushed == cycle:
        return decide(False, "already flushed this compaction cycle")
    return decide(True, "threshold reached")


def workspace_writable(path: str | Path, access: str | None = None) -> bool:
    """Tell whether memory can be written into the workspace at ``path``.

    ``access`` is the sandbox's ``workspaceAccess``; ``"ro"`` and ``"none"``
    mean no, whatever the file system says. Otherwise the directory must
    exist, pass ``os.access`` and accept a probe file. The probe is what
    catches read-only mounts and immutable directories, and it reports
    what this process can really do: root ignores mode bits, so a 0o555
    directory is writable for root.
    """
    if access is not None and access.strip().lower() in _READ_ONLY_ACCESS:
        return False
    root = Path(path).expanduser()
    if not root.is_dir() or not os.access(root, os.W_OK | os.X_OK):
        return False
    try:
        fd, probe = tempfile.mkstemp(prefix=".symi-write-probe-", dir=root)
    except OSError:
        return False
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return True


@attrs.frozen(kw_only=True)
class FlushPrompts:
    """The system and user prompt of one flush turn."""

    system: str
    user: str

    def to_dict(self) -> dict[str, Any]:
        return {"system": self.system, "user": self.user}


def resolve_timezone(tz: str | ZoneInfo | None) -> ZoneInfo:
    """Return the ``ZoneInfo`` for an IANA name (``None`` or blank: UTC); unknown names raise ``ConfigError``."""
    if isinstance(tz, ZoneInfo):
        return tz
    name = (tz or "UTC").strip() or "UTC"
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"time zone {name!r} is unknown; use an IANA name such as 'Europe/Berlin'"
        ) from None


def user_moment(now: datetime | None, tz: str | ZoneInfo | None) -> datetime:
    """``now`` (default: the current time; naive means UTC) in the user's zone.

    With ``tz`` unset the machine's local zone stands in for the user's: the
    flush prompt and ``memory_append`` must name the same daily file.
    """
    moment = now or datetime.now(UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if tz is None or (isinstance(tz, str) and not tz.strip()):
        return moment.astimezone()
    return moment.astimezone(resolve_timezone(tz))


def _zone_label(moment: datetime, tz: str | ZoneInfo | None) -> str:
    if isinstance(tz, ZoneInfo):
        return tz.key
    if isinstance(tz, str) and tz.strip():
        return tz.strip()
    return moment.tzname() or moment.strftime("UTC%z")


def _finish(text: str, date: str, stamp: str | None) -> str:
    text = text.replace("YYYY-MM-DD", date).rstrip()
    if "NO_REPLY" not in text:
        text += "\n" + _NO_REPLY_HINT
    if stamp and "Current time:" not in text:
        text += "\n" + stamp
    return text


def build_flush_prompts(settings: FlushSettings, *, now: datetime, tz: str | ZoneInfo | None) -> FlushPrompts:
    """Build the flush turn's prompts, dated in the user's time zone ``tz``.

    ``YYYY-MM-DD`` becomes today's date there (the machine's zone when ``tz``
    is unset, as for ``memory_append``); a ``Current time: … (<tz>)`` line is
    added to the user prompt unless it already has one; a prompt without
    ``NO_REPLY`` gets a NO_REPLY hint. A naive ``now`` is taken as UTC.
    """
    moment = user_moment(now, tz)
    date = moment.strftime("%Y-%m-%d")
    stamp = f"Current time: {moment.strftime('%A, %Y-%m-%d %H:%M')} ({_zone_label(moment, tz)})"
    return FlushPrompts(
        system=_finish(settings.system_prompt or DEFAULT_FLUSH_SYSTEM_PROMPT, date, None),
        user=_finish(settings.prompt or DEFAULT_FLUSH_PROMPT, date, stamp),
    )
