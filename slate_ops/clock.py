""":func:`render_utc`, the one way a point in time is shown (CLI, history, verify, Dagster metadata).

The clock itself is the runtime: :mod:`slate_ops.runtime` (every ``clock=`` argument takes a
:class:`~slate_ops.runtime.Runtime`)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

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
