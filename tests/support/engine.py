"""Engine helpers: options without background work (``QUIET``, ``QUIET_READER``, :func:`quiet`) and
:func:`simulate_crash`."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from slate_ops.engine import Db, DbOptions, ReaderOptions

# Background work only when the test asks for it: explicit flushes make outcomes deterministic.
QUIET = DbOptions(wal_flush_interval=timedelta(hours=1), manifest_poll_interval=timedelta(hours=1))
QUIET_READER = ReaderOptions(
    manifest_poll_interval=timedelta(hours=1), checkpoint_lifetime=timedelta(hours=3)
)


def quiet(**changes: Any) -> DbOptions:
    return QUIET.model_copy(update=changes)


def simulate_crash(db: Db) -> None:
    """Stop ``db`` like a killed process: no WAL flush, no manifest update, buffered state dropped."""
    db.crash()
