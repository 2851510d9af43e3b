"""One step over every configured database, for the schedules and sensors.

:func:`each_database` is the one "for each database: try, log, skip" loop: a database that is
missing or fails to read is skipped with a warning and never hides the others, and what it found
names the skipped ones for the tick's skip reason. On it:

- :func:`database_schedule` builds the per-database schedules: at each tick, a run of each database
  that wants one, or a skip reason;
- :func:`manifest_sensor` builds the sensors that follow each database's manifest
  (:class:`ManifestTick`: ``describe_db`` of every database, and the cursor, JSON
  ``{"<db name>": <manifest id>}``).
"""

# No `from __future__ import annotations` here: Dagster reads the resource annotations of the
# schedules and sensors built below at runtime.

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

import dagster as dg

from slate_ops.admin import DbStatus, describe_db
from slate_ops.orchestration.config import DatabaseConfig
from slate_ops.orchestration.resources import SlateDatabasesResource

T = TypeVar("T")

SensorAnswer = Callable[
    ["ManifestTick", SlateDatabasesResource, logging.Logger], dg.SensorResult | dg.SkipReason
]
"""How a manifest sensor answers a tick (:func:`manifest_sensor`)."""


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


def describe(slate: SlateDatabasesResource, db: DatabaseConfig) -> DbStatus:
    """``describe_db`` of ``db``: its manifest summary (raises if it is missing or unreadable)."""
    return describe_db(db.path, slate.open_store(db.name), clock=slate.clock())


def database_exists(slate: SlateDatabasesResource, db: DatabaseConfig) -> bool:
    """True once :func:`describe` reads ``db`` (it raises, so the database is skipped, otherwise)."""
    describe(slate, db)
    return True


def fleet_of(slate: SlateDatabasesResource, log: logging.Logger) -> list[DatabaseConfig]:
    """The fleet (configured, then discovered databases); if discovery fails, the configured ones
    with a warning (a store that cannot be listed must not stop the configured databases' runs)."""
    try:
        return slate.fleet()
    except Exception as exc:
        log.warning(f"discovery failed, using the configured databases only: {type(exc).__name__}: {exc}")
        return list(slate.config.databases)


def describe_databases(
    slate: SlateDatabasesResource, log: logging.Logger, databases: Sequence[DatabaseConfig] | None = None
) -> EachDatabase[DbStatus]:
    """:func:`describe` of ``databases`` (default: the fleet, :func:`fleet_of`) that exist and can be read."""
    return each_database(
        fleet_of(slate, log) if databases is None else databases, log, lambda db: describe(slate, db)
    )


def database_schedule(
    name: str,
    job: dg.JobDefinition,
    cron_schedule: str,
    description: str,
    *,
    wants_run: Callable[[SlateDatabasesResource, DatabaseConfig], bool],
    run_request: Callable[[DatabaseConfig, datetime], dg.RunRequest],
    nothing_to_do: str,
    due: Callable[[DatabaseConfig, datetime], bool] | None = None,
    none_due: str = "",
) -> dg.ScheduleDefinition:
    """The UTC schedule ``name`` of ``job``: at each tick (its scheduled time, else now), a
    ``run_request(db, tick)`` of each database that is ``due`` (default: every one) and
    ``wants_run`` (which may read it: :func:`each_database`); none: ``nothing_to_do``, with the
    skipped databases. ``none_due`` (formatted with ``tick``) is the skip reason when no database
    is due."""

    @dg.schedule(
        name=name, job=job, cron_schedule=cron_schedule, execution_timezone="UTC", description=description
    )
    def _schedule(
        context: dg.ScheduleEvaluationContext, slate: SlateDatabasesResource
    ) -> list[dg.RunRequest] | dg.SkipReason:
        tick = (context.scheduled_execution_time or datetime.now(UTC)).astimezone(UTC)
        databases = [db for db in fleet_of(slate, context.log) if due is None or due(db, tick)]
        if due is not None and not databases:
            return dg.SkipReason(none_due.format(tick=tick))
        found = each_database(databases, context.log, lambda db: wants_run(slate, db))
        requests = [run_request(db, tick) for db, wanted in found.results if wanted]
        return requests if requests else found.skip(nothing_to_do)

    return _schedule


class ManifestTick:
    """One tick of a sensor that follows manifests: :func:`describe` of every configured database
    (:attr:`found`) and the cursor, ``{db name: manifest id}`` of what the sensor already handled."""

    def __init__(self, context: dg.SensorEvaluationContext, slate: SlateDatabasesResource) -> None:
        fleet = fleet_of(slate, context.log)
        self.cursor = _parse_cursor(context.cursor, context.log, [db.name for db in fleet])
        self.found = describe_databases(slate, context.log, fleet)

    def seen(self, db: DatabaseConfig, status: DbStatus) -> bool:
        """Whether the sensor handled ``db`` at this manifest already."""
        return self.cursor.get(db.name) == status.manifest_id

    def mark(self, db: DatabaseConfig, status: DbStatus) -> None:
        """Record that the sensor handled ``db`` at this manifest."""
        self.cursor[db.name] = status.manifest_id

    def changed(self) -> Iterator[tuple[DatabaseConfig, DbStatus]]:
        """The databases whose manifest the sensor has not handled yet, each marked as it comes."""
        for db, status in self.found.results:
            if not self.seen(db, status):
                self.mark(db, status)
                yield db, status

    def result(
        self,
        reason: str,
        run_requests: list[dg.RunRequest],
        asset_events: Sequence[dg.AssetObservation] = (),
    ) -> dg.SensorResult | dg.SkipReason:
        """The tick's answer: the requests and events with the new cursor, or, with neither,
        :meth:`EachDatabase.skip_all_or` ``reason``."""
        if not run_requests and not asset_events:
            return self.found.skip_all_or(reason)
        return dg.SensorResult(
            run_requests=run_requests,
            asset_events=list(asset_events),
            cursor=json.dumps(self.cursor, sort_keys=True),
        )


def manifest_sensor(
    *, name: str, job_name: str, description: str
) -> Callable[[SensorAnswer], dg.SensorDefinition]:
    """Decorator: the sensor ``name`` (every 30 s) whose ticks the function answers from a
    :class:`ManifestTick`, the ``slate`` resource and the log."""

    def build(answer: SensorAnswer) -> dg.SensorDefinition:
        @dg.sensor(name=name, job_name=job_name, minimum_interval_seconds=30, description=description)
        def _sensor(
            context: dg.SensorEvaluationContext, slate: SlateDatabasesResource
        ) -> dg.SensorResult | dg.SkipReason:
            return answer(ManifestTick(context, slate), slate, context.log)

        return _sensor

    return build


def _parse_cursor(cursor: str | None, log: logging.Logger, names: Iterable[str]) -> dict[str, int]:
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
