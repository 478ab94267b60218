"""The checks every entry point runs on the arguments it is handed: the agent tools, the manager's methods,
the HTTP API and the session store. A bad value raises one ValueError that names the argument and what it
takes (the tools turn it into their error shape), never a TypeError from deep inside a search.

Standard library only.
"""

from __future__ import annotations

import numbers
from typing import Any

__all__ = ["MAX_RESULTS_CAP", "max_results", "min_score", "nonblank", "unicode_text", "whole_number"]

#: The most results a search returns (``query.maxResults`` is clamped to it, and a larger ask means it).
MAX_RESULTS_CAP = 200


def whole_number(value: Any, name: str, *, minimum: int | None = None) -> int | None:
    """``value`` as an int (None stays None). JSON's ``5.0`` counts, and so do numpy's integers and floats;
    ``"5"``, ``True``, ``2.5``, NaN, infinities, lists and the like raise ValueError, and so does a number
    below ``minimum``."""
    if value is None:
        return None
    # NaN and the infinities are no integers
    if not _number(value) or (not isinstance(value, numbers.Integral) and not float(value).is_integer()):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    number = int(value)
    if minimum is not None and number < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}")
    return number


def _number(value: Any) -> bool:
    """A real number, numpy's included (``numbers.Real``), and not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def max_results(value: Any, name: str = "maxResults") -> int | None:
    """A result count: a whole number of at least 1 (None stays None); above :data:`MAX_RESULTS_CAP` it is that."""
    number = whole_number(value, name, minimum=1)
    return None if number is None else min(number, MAX_RESULTS_CAP)


def min_score(value: Any, name: str = "minScore") -> float | None:
    """A score floor: a number (None stays None), clamped to 0..1 as the config's ``minScore`` is; NaN and
    anything not a number raise ValueError."""
    if value is None:
        return None
    if not _number(value) or value != value:  # NaN
        raise ValueError(f"{name} must be a number from 0 to 1, got {value!r}")
    # Compared before float(): an int too large for a float (JSON's 1 and 400 zeros) is 1, not an OverflowError.
    return 1.0 if value >= 1 else 0.0 if value <= 0 else float(value)


def nonblank(value: Any, name: str) -> str:
    """``value`` when it is a string with something besides whitespace in it; else ValueError."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return value


def unicode_text(value: str, name: str) -> str:
    """``value`` when it is valid Unicode; a lone surrogate (JSON's ``"\\udc80"``, which no tokenizer or UTF-8
    store takes) raises ValueError naming where it is."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{name} must be valid Unicode: a lone surrogate at character {exc.start}; "
                         "send UTF-8 text") from None
    return value
