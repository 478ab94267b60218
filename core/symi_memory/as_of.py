"""What an "as of" value (``--as-of``, the tool's ``asOf``) means: the exclusive cutoff in epoch seconds.

Standard library only and cheap to import: the CLI's server path checks ``--as-of`` with it before it
loads anything else. :func:`symi_memory.manager.parse_as_of` is this module's :func:`parse_as_of`.
"""

from __future__ import annotations

import contextlib
import math
import re
from datetime import UTC, date, datetime, timedelta, timezone

__all__ = ["parse_as_of"]

_ISO_WEEK = re.compile(r"([0-9]{4})-?[Ww]([0-9]{2})")
_ISO_ORDINAL = re.compile(r"([0-9]{4})-?([0-9]{3})")
# A zone after a date alone: "2026-03-04Z", "20260304+0000", "2026-W10-3-05:00" (refused: not UTC).
_ZONE = re.compile(r"(?P<day>.+?)(?:(?P<utc>[Zz])|(?P<sign>[+-])(?P<hh>[0-9]{2})(?::?(?P<mm>[0-9]{2}))?)")
_FORMS = "a date like 2026-04-01 or an ISO datetime like 2026-04-01T18:00+02:00"


def parse_as_of(value: str | float | date | datetime | None) -> float | None:
    """The exclusive cutoff (epoch seconds) of an "as of" value; None for None or "".

    A date means the end of that day in UTC, the days dated notes are filed under. Any ISO 8601 date form
    counts (``20260304``, ``2026-W10-3``, ``2026-063``; a week ``2026-W10`` lasts to its Sunday), also with
    the zone ``Z`` (``2026-03-04Z`` is ``2026-03-04``); another zone on a date alone is refused, since the
    day would not be the one the notes name: a datetime says where to cut (``2026-03-05T00:00+02:00``).
    A datetime (``T`` or a space before the time; no zone: UTC) cuts at that instant, and so do epoch
    seconds.

    Raises ValueError for anything else, naming the accepted forms.
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"asOf must be {_FORMS}, got {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"asOf must be {_FORMS} or epoch seconds, got {value!r}")
        return float(value)
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, date):
        return _day_end(value, UTC, value)
    if isinstance(value, str):
        text = value.strip()
        if not any(sep in text for sep in "Tt "):
            # A date alone, perhaps with a zone. Not handed to datetime.fromisoformat: it takes any one
            # character between date and time, so "2026-03-04+02:00" would be 02:00 UTC on that day.
            day = _iso_date(text)
            if day is not None:
                return _day_end(day, UTC, value)
            m = _ZONE.fullmatch(text)
            # "2026-W10-03" is more likely a mistyped day of that week than the week at UTC-3
            week = m is not None and m["sign"] == "-" and not m["mm"] and _ISO_WEEK.fullmatch(m["day"]) is not None
            if m is not None and not week and (day := _iso_date(m["day"])) is not None:
                return _day_end(day, _zone(m, day, value), value)
        else:
            with contextlib.suppress(ValueError):
                stamp = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "Zz" else text)
                return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    raise ValueError(f"asOf must be {_FORMS}, got {value!r}")


def _day_end(day: date, zone: timezone, value: object) -> float:
    if day == date.max:  # the cutoff is the next day's start, which no datetime holds
        raise ValueError(f"asOf must be a date before 9999-12-31, got {value!r}")
    return (datetime(day.year, day.month, day.day, tzinfo=zone) + timedelta(days=1)).timestamp()


def _zone(m: re.Match[str], day: date, value: object) -> timezone:
    """UTC, the one zone a date alone may name: its day is the day dated notes are filed under (UTC)."""
    hours, minutes = (0, 0) if m["utc"] else (int(m["hh"]), int(m["mm"] or 0))
    if hours == minutes == 0:
        return UTC
    if hours > 23 or minutes > 59:
        raise ValueError(f"asOf must be {_FORMS}, got {value!r} (a zone runs from -23:59 to +23:59)")
    zone = f"{m['sign']}{hours:02d}:{minutes:02d}"
    after = (day + timedelta(days=1)).isoformat() if day < date.max else "..."
    raise ValueError(f"asOf must be a date alone (that whole day in UTC; its zone can only be Z) or a datetime, got "
                     f"{value!r}; to cut where {day.isoformat()} ends in {zone}, give that instant: {after}T00:00{zone}")


def _iso_date(text: str) -> date | None:
    """The day an ISO 8601 date names (a week without a day: its Sunday), or None."""
    if (m := _ISO_WEEK.fullmatch(text)) is not None:
        # date.fromisoformat reads a week without a day as its Monday
        with contextlib.suppress(ValueError):
            return date.fromisocalendar(int(m.group(1)), int(m.group(2)), 7)
        return None
    if (m := _ISO_ORDINAL.fullmatch(text)) is not None:  # which date.fromisoformat does not read at all
        year, n = int(m.group(1)), int(m.group(2))
        if year >= 1 and 1 <= n <= (date(year, 12, 31) - date(year, 1, 1)).days + 1:
            return date(year, 1, 1) + timedelta(days=n - 1)
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None
