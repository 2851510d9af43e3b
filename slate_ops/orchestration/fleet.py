"""One step over every configured database, for the sensors and schedules.

:func:`each_database` is the one "for each database: try, log, skip" loop: a database that is
missing or fails to read is skipped with a warning and never hides the others; what it found
names the skipped ones for the tick's skip reason. The sensors' cursors are JSON
``{"<db name>": <manifest id>}`` (:func:`parse_cursor`, :func:`dump_cursor`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import dagster as dg

from slate_ops.admin import DbStatus, describe_db
from slate_ops.orchestration.config import DatabaseConfig
from slate_ops.orchestration.resources import SlateDatabasesResource

T = TypeVar("T")


@dataclass(frozen=True)
class EachDatabase(Generic[T]):
    """What :func:`each_database` found: every database that answered, with its answer, and one
    line per database that was skipped (``name (ErrorType: message)``)."""

    results: list[tuple[DatabaseConfig, T]]
    skipped: list[str]

    def skip(self, reason: str) -> dg.SkipReason:
        """``reason``, followed by the skipped databases if any."""
        return dg.SkipReason(reason + (f"; skipped: {'; '.join(self.skipped)}" if self.skipped else ""))

    def skip_all_or(self, reason: str) -> dg.SkipReason:
        """:meth:`skip` with ``reason``, or, when no database answered, that all were skipped."""
        if not self.results:
            return dg.SkipReason(f"all {len(self.skipped)} database(s) skipped: {'; '.join(self.skipped)}")
        return self.skip(reason)

    def requests_or_skip(
        self, requests: list[dg.RunRequest], reason: str
    ) -> list[dg.RunRequest] | dg.SkipReason:
        """A schedule's answer: ``requests``, or when there are none, :meth:`skip` with ``reason``."""
        return requests if requests else self.skip(reason)


def each_database(
    databases: Iterable[DatabaseConfig], log: logging.Logger, step: Callable[[DatabaseConfig], T]
) -> EachDatabase[T]:
    """``step(db)`` for each of ``databases``; one that raises is logged as a warning and skipped."""
    results: list[tuple[DatabaseConfig, T]] = []
    skipped: list[str] = []
    for db in databases:
        try:
            results.append((db, step(db)))
        except Exception as exc:  # one unreadable database must not stop the others
            log.warning(f"skipping database {db.name}: {type(exc).__name__}: {exc}")
            skipped.append(f"{db.name} ({type(exc).__name__}: {exc})")
    return EachDatabase(results, skipped)


def describe_databases(
    slate: SlateDatabasesResource, log: logging.Logger, databases: Sequence[DatabaseConfig] | None = None
) -> EachDatabase[DbStatus]:
    """``describe_db`` of ``databases`` (default: every configured one) that exist and can be read."""
    return each_database(
        slate.config.databases if databases is None else databases,
        log,
        lambda db: describe_db(db.path, slate.open_store(db.name), clock=slate.clock()),
    )


def parse_cursor(cursor: str | None, log: logging.Logger, names: Iterable[str]) -> dict[str, int]:
    """The ``{db name: manifest id}`` cursor, restricted to ``names`` (the configured databases); an
    unreadable one counts as empty."""
    if not cursor:
        return {}
    try:
        raw = json.loads(cursor)
        if isinstance(raw, dict) and all(isinstance(v, int) for v in raw.values()):
            keep = set(names)
            return {str(k): v for k, v in raw.items() if str(k) in keep}
    except ValueError:
        pass
    log.warning(f"ignoring unreadable cursor {cursor!r}; observing every database again")
    return {}


def dump_cursor(cursor: dict[str, int]) -> str:
    """``cursor`` as the sensor stores it."""
    return json.dumps(cursor, sort_keys=True)
