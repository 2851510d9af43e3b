"""Injectable wall clock, so tests can advance time instead of sleeping; and :func:`render_utc`, the one
way a point in time is shown (CLI, history, verify, Dagster metadata)."""

from __future__ import annotations

import math
import threading
import time
from datetime import UTC, datetime
from typing import Protocol

UTC_SECONDS = "%Y-%m-%dT%H:%M:%SZ"
UTC_MINUTES = "%Y-%m-%dT%H:%MZ"


def render_utc(when: float | datetime, fmt: str | None = None) -> str:
    """``when`` (Unix seconds, or a datetime; a naive one is taken to be UTC) as UTC text: ISO 8601 to
    the second (``2026-11-23T07:30:00Z``) by default, else ``strftime(fmt)``.

    Never raises on a number: a stored time outside the calendar (any u64 expiry of an older or
    hostile manifest) is shown as ``"<unix seconds> (beyond year 9999)"`` (``"(before year 1)"``
    below it; ``"nan"``/``"inf"`` as such), so listing what is stored never fails on it.
    """
    try:
        if isinstance(when, datetime):
            moment = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
        else:
            moment = datetime.fromtimestamp(when, UTC)
        if fmt is not None:
            return moment.strftime(fmt)
        return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
    except (OverflowError, ValueError, OSError):
        if isinstance(when, datetime):
            return when.isoformat(timespec="seconds")
        if not math.isfinite(when):
            return str(when)
        seconds = int(when)
        return f"{seconds} (beyond year 9999)" if seconds > 0 else f"{seconds} (before year 1)"


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the Unix epoch."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock that only moves when told to."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def set(self, now: float) -> None:
        with self._lock:
            self._now = now


SYSTEM_CLOCK = SystemClock()
