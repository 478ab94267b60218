"""Registers the builtin post-processors: temporal decay (100), supersession (450), month cue (460) and MMR (600)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from symi_memory import hookimpl
from symi_memory.specs import PostProcessorSpec


def _decay(hybrid: Any) -> Any:
    from .decay import TemporalDecay

    return TemporalDecay.from_config(hybrid)


def _mmr(hybrid: Any) -> Any:
    from .mmr import Mmr

    return Mmr.from_config(hybrid)


def _month_cue(hybrid: Any) -> Any:
    from .monthcue import MonthCue

    return MonthCue.from_config(hybrid)


def _supersession(hybrid: Any) -> Any:
    from .supersede import Supersession

    return Supersession.from_config(hybrid)


def _enabled(key: str, default: bool = False) -> Callable[[Any], bool]:
    """Whether the ``key`` section of ``query.hybrid`` leaves its processor on, as its ``from_config`` reads it (for
    ``status``, without importing the processor's module)."""
    def running(hybrid: Any) -> bool:
        return bool((hybrid.get(key) or {}).get("enabled", default))

    return running


def _month_cue_running(hybrid: Any) -> bool:
    cfg = hybrid.get("monthCue") or {}
    return bool(cfg.get("enabled", True)) and float(cfg.get("boost", 0.4)) > 0


@hookimpl
def symi_memory_register_postprocessors(register: Callable[[Any], None]) -> None:
    register(PostProcessorSpec(name="temporal-decay", factory=_decay, order=100, running=_enabled("temporalDecay"),
                               description="Exponential score decay by the age of dated notes."))
    register(PostProcessorSpec(name="supersession", factory=_supersession, order=450,
                               running=_enabled("supersession"),
                               description="Demote hits that newer memories restate or change (supersededBy)."))
    # After supersession: the cue is a preference for a date, not relevance, and must not decide which newer
    # hit is relevant enough to supersede an older one (score_ratio).
    register(PostProcessorSpec(name="month-cue", factory=_month_cue, order=460, running=_month_cue_running,
                               description="A query naming a month favours the dated notes of that month."))
    register(PostProcessorSpec(name="mmr", factory=_mmr, order=600, running=_enabled("mmr"),
                               description="Maximal Marginal Relevance re-ranking for diversity."))
