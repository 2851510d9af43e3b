"""Options models and the human duration format of the admin CLI (``"7days 30min 10s"``)."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, PlainSerializer

from slate_ops.errors import InvalidDurationError

MAX_DURATION_YEARS = 100
MAX_DURATION = timedelta(days=365.25 * MAX_DURATION_YEARS)
"""The longest duration anything accepts (a lifetime, a minimum age, an interval): 100 years.

One bound for every duration, enforced by :func:`parse_duration`, by the :data:`Duration` field type
and by :func:`check_duration` (for the Python APIs taking a ``timedelta``): past it, expiry times
stop being representable dates, and no retention policy needs more."""

# Unit spellings follow the humantime crate used by SlateDB's CLI. Months and years are the
# average Gregorian lengths, as there.
_UNIT_SECONDS: dict[str, float] = {}
for _names, _seconds in (
    (("ms", "msec", "millis", "milliseconds"), 0.001),
    (("s", "sec", "secs", "second", "seconds"), 1),
    (("m", "min", "mins", "minute", "minutes"), 60),
    (("h", "hr", "hrs", "hour", "hours"), 3600),
    (("d", "day", "days"), 86400),
    (("w", "week", "weeks"), 7 * 86400),
    (("M", "month", "months"), 30.44 * 86400),
    (("y", "year", "years"), 365.25 * 86400),
):
    for _name in _names:
        _UNIT_SECONDS[_name] = _seconds

_TOKEN = re.compile(r"\s*(\d+)\s*([A-Za-z]+)\s*")


def _too_long(what: str) -> InvalidDurationError:
    return InvalidDurationError(
        f"duration {what} is longer than the maximum of {MAX_DURATION_YEARS} years "
        f"({int(MAX_DURATION.total_seconds())}s); use a shorter one, or none (never expires) where "
        "that is allowed"
    )


def check_duration(value: timedelta, what: str = "duration") -> timedelta:
    """``value`` if it is positive and at most :data:`MAX_DURATION`, else :class:`InvalidDurationError`
    naming ``what`` (e.g. ``"lifetime"``) and the bound."""
    if not isinstance(value, timedelta):
        raise InvalidDurationError(f"{what} must be a timedelta, got {type(value).__name__}")
    if value <= timedelta(0):
        raise InvalidDurationError(f"{what} {value} must be longer than zero")
    if value > MAX_DURATION:
        raise _too_long(f"{what} {value.days} days")
    return value


def parse_duration(text: str) -> timedelta:
    """Parse ``"7days 30min 10s"``; every number needs a unit and the total must be positive and at
    most :data:`MAX_DURATION` (100 years)."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidDurationError(f"empty duration {text!r}; write it like '7days 30min 10s'")
    limit = MAX_DURATION.total_seconds()
    total = 0.0
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise InvalidDurationError(
                f"cannot parse duration {text!r} at {text[pos:]!r}; write it like '7days 30min 10s'"
            )
        number, unit = match.groups()
        seconds = _UNIT_SECONDS.get(unit) or _UNIT_SECONDS.get(unit.lower())
        if seconds is None:
            raise InvalidDurationError(
                f"unknown unit {unit!r} in duration {text!r}; use ms, s, min, h, days, weeks, months, years"
            )
        # Compared before multiplying: a number of any length stays an int, never an OverflowError.
        count = int(number)
        if count > limit / seconds or total + count * seconds > limit:
            raise _too_long(repr(text))
        total += count * seconds
        pos = match.end()
    if total <= 0:
        raise InvalidDurationError(f"duration {text!r} must be longer than zero")
    return timedelta(seconds=total)


def format_duration(value: timedelta) -> str:
    """The inverse of :func:`parse_duration` for whole-second multiples of days, h, min, s."""
    seconds = int(value.total_seconds())
    millis = round((value.total_seconds() - seconds) * 1000)
    parts = []
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    if millis:
        parts.append(f"{millis}ms")
    return " ".join(parts) or "0s"


def _coerce_duration(value: Any) -> Any:
    if isinstance(value, str):
        return parse_duration(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not value <= MAX_DURATION.total_seconds():  # also NaN; before timedelta() can overflow
            raise _too_long(f"{value!r}s")
        return timedelta(seconds=value)
    return value


Duration = Annotated[
    timedelta,
    BeforeValidator(_coerce_duration),
    AfterValidator(check_duration),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
]
"""A positive timedelta of at most :data:`MAX_DURATION` that also accepts ``"7days 30min 10s"`` or a
number of seconds."""


class CheckpointOptions(BaseModel):
    """Options of a new checkpoint (docs/design/engine.md, "Creating a checkpoint").

    ``lifetime`` None means the checkpoint never expires; ``source`` takes the new checkpoint from an
    existing one instead of from the current manifest; ``name`` labels it for listing.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    lifetime: Duration | None = None
    source: uuid.UUID | None = None
    name: str | None = None


class CheckpointCreateResult(BaseModel):
    """The id of the created checkpoint and the manifest version it references."""

    model_config = ConfigDict(frozen=True)

    id: uuid.UUID
    manifest_id: int
