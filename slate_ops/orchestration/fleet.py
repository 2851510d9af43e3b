"""One step over every configured database, for the schedules and sensors.

:func:`each_database` is the one "for each database: try, log, skip" loop: a database that is
missing or fails to read is skipped with a warning and never hides the others, and what it found
names the skipped ones for the tick's skip reason. It runs the step on up to
:data:`FLEET_READ_THREADS` databases at once (the requests of one tick overlap their latency) and
answers in the fleet's order. On it:

- :func:`database_schedule` builds the per-database schedules: at each tick, a run of each database
  that wants one, or a skip reason;
- :func:`manifest_sensor` builds the sensors that follow each database's manifest
  (:class:`ManifestTick`: the latest manifest of every database, and the cursor,
  :class:`~slate_ops.orchestration.polls.SensorCursor`: the manifest id of each database, when it
  was last confirmed and its poll requests). A database still at its cursor's manifest costs one
  GET probe (one LIST when the cursor's confirmation is too old to probe from: at the first poll,
  after a pause, and hourly) and is not read again (:class:`Unchanged`); any other one a LIST and a
  GET (:class:`Read`; a probe GET more). Each poll is metered; once an hour per database the polls'
  requests become one cost observation of its asset. The discovered part of the fleet comes from
  the cursor's discovery listing while it is younger than ``discover.interval_minutes``
  (:mod:`~slate_ops.orchestration.discovery`), so most ticks send no discovery LIST.
"""

# No `from __future__ import annotations` here: Dagster reads the resource annotations of the
# schedules and sensors built below at runtime.

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

import dagster as dg

from slate_ops.admin import DbStatus
from slate_ops.admin.cost import SENSOR_POLL_INTERVAL_S
from slate_ops.admin.handle import poll
from slate_ops.admin.handle.state import DbState
from slate_ops.objstore import ObjectStore
from slate_ops.objstore.metering import MeteredStore, RequestCounts
from slate_ops.objstore.s3 import MAX_POOL_CONNECTIONS
from slate_ops.orchestration.config import DatabaseConfig
from slate_ops.orchestration.cost import SENSOR_POLLS
from slate_ops.orchestration.discovery import DiscoveryListing, fleet_with_listing
from slate_ops.orchestration.naming import DEFAULT, Naming
from slate_ops.orchestration.polls import SensorCursor, location_digest
from slate_ops.orchestration.request_meter import cost_observation
from slate_ops.orchestration.resources import SlateDatabasesResource
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime

T = TypeVar("T")

FLEET_READ_THREADS = MAX_POOL_CONNECTIONS
"""How many databases one schedule or sensor tick reads at once (32): as many as the shared S3
client's connection pool holds, so no read waits for a connection. A tick of ``N`` databases on a
store with latency ``d`` per request takes about ``ceil(N / 32) * requests per database * d``."""

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
    databases: Iterable[DatabaseConfig],
    log: logging.Logger,
    step: Callable[[DatabaseConfig], T],
    *,
    threads: int | None = None,
    clock: Runtime = SYSTEM_RUNTIME,
) -> EachDatabase[T]:
    """``step(db)`` for each of ``databases``, on up to ``threads`` (default
    :data:`FLEET_READ_THREADS`) of them at once (on ``clock``'s executor); one that raises is
    logged as a warning and skipped. Results, warnings and skips come in ``databases``' order."""
    fleet = list(databases)
    threads = FLEET_READ_THREADS if threads is None else threads

    def attempt(db: DatabaseConfig) -> tuple[T] | Exception:
        try:
            return (step(db),)
        except Exception as exc:  # one unreadable database must not stop the others
            return exc

    if len(fleet) > 1 and threads > 1:
        workers = min(threads, len(fleet))
        with clock.executor(workers, "slate-fleet") as pool:
            outcomes = list(pool.map(attempt, fleet))
    else:
        outcomes = [attempt(db) for db in fleet]
    results: list[tuple[DatabaseConfig, T]] = []
    skipped: list[str] = []
    for db, outcome in zip(fleet, outcomes, strict=True):
        if isinstance(outcome, Exception):  # logged here, in order, not from the worker threads
            log.warning(f"skipping database {db.name}: {type(outcome).__name__}: {outcome}")
            skipped.append(f"{db.name} ({type(outcome).__name__}: {outcome})")
        else:
            results.append((db, outcome[0]))
    return EachDatabase(results, skipped)


def store_of(slate: SlateDatabasesResource, db: DatabaseConfig) -> ObjectStore:
    """The store of ``db`` (:meth:`SlateDatabasesResource.store_for`); a seam the request-counting
    tests replace."""
    return slate.store_for(db)


def describe(slate: SlateDatabasesResource, db: DatabaseConfig) -> DbStatus:
    """The handle's ``describe`` of ``db`` (either engine): its manifest summary (raises if it is
    missing or unreadable)."""
    return slate.handle_for(db, store_of(slate, db)).describe()


def database_exists(slate: SlateDatabasesResource, db: DatabaseConfig) -> bool:
    """True once :func:`describe` reads ``db`` (it raises, so the database is skipped, otherwise)."""
    describe(slate, db)
    return True


def fleet_of(
    slate: SlateDatabasesResource, log: logging.Logger, *, discover: bool = True
) -> list[DatabaseConfig]:
    """The fleet (configured, then discovered databases: one discovery LIST); if discovery fails,
    the configured ones with a warning (a store that cannot be listed must not stop the configured
    databases' runs). Without ``discover``: the configured ones, no request."""
    if not discover:
        return list(slate.config.databases)
    return fleet_with_listing(slate, log, None)[0]


def discovered_may_run(
    slate: SlateDatabasesResource,
    tick: datetime,
    due: Callable[[DatabaseConfig, datetime], bool] | None,
    may_run: Callable[[DatabaseConfig], bool] | None,
) -> bool:
    """Whether a discovered database (it has the default policies) may get a run at ``tick``: it is
    ``due`` and ``may_run`` says it may want one (each None: yes). If not, the schedule's tick needs
    no discovery LIST."""
    discover = slate.config.discover
    if discover is None:
        return False
    default = DatabaseConfig(name="discovered", store_url=discover.store_url, path="discovered")
    return (due is None or due(default, tick)) and (may_run is None or may_run(default))


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
    may_want_run: Callable[[DatabaseConfig], bool] | None = None,
    naming: Naming = DEFAULT,
) -> dg.ScheduleDefinition:
    """The UTC schedule ``name`` of ``job``: at each tick (its scheduled time, else now), a
    ``run_request(db, tick)`` of each database that is ``due`` (default: every one) and
    ``wants_run`` (which may read it: :func:`each_database`); none: ``nothing_to_do``, with the
    skipped databases. ``none_due`` (formatted with ``tick``) is the skip reason when no database
    is due. ``may_want_run``: False for a database that cannot want a run whatever its state (read
    nothing for it); a tick at which a discovered one (the default policies) is not due or cannot
    want a run does not list the ``discover`` prefix. ``naming``: the resource key of the ``slate``
    resource it reads."""

    @dg.schedule(
        name=name,
        job=job,
        cron_schedule=cron_schedule,
        execution_timezone="UTC",
        description=description,
        required_resource_keys=naming.slate_keys,
    )
    def _schedule(
        context: dg.ScheduleEvaluationContext, **_resources: object
    ) -> list[dg.RunRequest] | dg.SkipReason:
        slate = naming.slate(context)
        tick = (context.scheduled_execution_time or datetime.now(UTC)).astimezone(UTC)
        discover = discovered_may_run(slate, tick, due, may_want_run)
        databases = [
            db for db in fleet_of(slate, context.log, discover=discover) if due is None or due(db, tick)
        ]
        if due is not None and not databases:
            return dg.SkipReason(none_due.format(tick=tick))
        found = each_database(databases, context.log, lambda db: wants_run(slate, db))
        requests = [run_request(db, tick) for db, wanted in found.results if wanted]
        return requests if requests else found.skip(nothing_to_do)

    return _schedule


@dataclass(frozen=True)
class Read:
    """A database whose latest manifest a tick read: its state (summary, shape, checkpoint and tag
    names; the handle's ``state_since``)."""

    state: DbState

    @property
    def status(self) -> DbStatus:
        return self.state.status

    @property
    def manifest_id(self) -> int:
        return self.state.manifest_id


@dataclass(frozen=True)
class Unchanged:
    """A database still at the manifest its sensor's cursor names (one GET probe or one LIST proved
    it; not read)."""

    manifest_id: int


Observed = Read | Unchanged
"""What a :class:`ManifestTick` found of one database."""


def observe(
    slate: SlateDatabasesResource,
    db: DatabaseConfig,
    known_id: int | None,
    store: ObjectStore | None = None,
    *,
    probe: bool = False,
) -> Observed:
    """``db``'s state, or :class:`Unchanged` when its latest manifest is still ``known_id``
    (:func:`slate_ops.admin.handle.poll.state_since`, either engine: one LIST when unchanged, one
    GET with ``probe``, which :meth:`SensorCursor.may_probe` decides), read through ``store``
    (default :func:`store_of`); raises if it is missing or unreadable."""
    store = store if store is not None else store_of(slate, db)
    state = poll.state_since(db.path, store, db.engine_override(), known_id, probe=probe, clock=slate.clock())
    if state is None:
        assert known_id is not None
        return Unchanged(known_id)
    return Read(state)


class ManifestTick:
    """One tick of a sensor that follows manifests: the latest manifest of every database in the
    fleet (:attr:`found`, read :data:`FLEET_READ_THREADS` at a time) and the cursor: :attr:`cursor`,
    ``{db name: manifest id}`` of what the sensor already handled, when each was confirmed the
    latest, and each database's poll requests
    (:class:`~slate_ops.orchestration.polls.SensorCursor`). A database still at its cursor's manifest
    is :class:`Unchanged` (one GET probe, or one LIST when the cursor may not probe); the others are
    :class:`Read`.

    Every poll is metered (a failed one too) and added to its database's window in the cursor; the
    windows an hour old become :attr:`poll_observations` (one cost observation of the database's
    asset each, ``naming``'s key), which :meth:`result` sends with the tick's events."""

    def __init__(
        self, context: dg.SensorEvaluationContext, slate: SlateDatabasesResource, naming: Naming = DEFAULT
    ) -> None:
        cached = DiscoveryListing.in_cursor(context.cursor)
        fleet, listing = fleet_with_listing(slate, context.log, cached)
        self._given = context.cursor
        self._state = SensorCursor.parse(context.cursor, context.log, [db.name for db in fleet])
        self._state.discovered = listing
        self.cursor = self._state.manifests
        self._known = dict(self.cursor)
        started = slate.clock().now()
        where = {db.name: location_digest(db.store_url, db.path) for db in fleet}
        probing = {
            db.name
            for db in fleet
            if self._state.may_probe(db.name, self._known.get(db.name), started, where[db.name])
        }
        polled: dict[str, RequestCounts] = {}
        lock = threading.Lock()

        def metered_observe(db: DatabaseConfig) -> Observed:
            store = MeteredStore(store_of(slate, db))
            try:
                return observe(slate, db, self._known.get(db.name), store, probe=db.name in probing)
            finally:
                with lock:
                    polled[db.name] = store.counts

        self.found: EachDatabase[Observed] = each_database(fleet, context.log, metered_observe)
        for db, observed in self.found.results:  # confirmed as of `started`: its requests came later
            listed = isinstance(observed, Read) or db.name not in probing
            self._state.confirm(db.name, observed.manifest_id, started, where[db.name], listed=listed)
        now = slate.clock().now()
        for db in fleet:
            if db.name in polled:
                self._state.add_poll(db.name, polled[db.name], now)
        prices = slate.config.prices.table()
        self.poll_observations = [
            cost_observation(
                naming.asset_key(slate, name), SENSOR_POLLS, window.counts, prices, runs=window.polls
            )
            for name, window in self._state.close_windows(now)
        ]

    def seen(self, db: DatabaseConfig, observed: Observed) -> bool:
        """Whether the sensor handled ``db`` at this manifest already (always, when :class:`Unchanged`)."""
        return self.cursor.get(db.name) == observed.manifest_id

    def mark(self, db: DatabaseConfig, observed: Observed) -> None:
        """Record that the sensor handled ``db`` at this manifest."""
        self.cursor[db.name] = observed.manifest_id

    def changed(self) -> Iterator[tuple[DatabaseConfig, Read]]:
        """The databases whose manifest the sensor has not handled yet, each marked as it comes."""
        for db, observed in self.found.results:
            if isinstance(observed, Read) and not self.seen(db, observed):
                self.mark(db, observed)
                yield db, observed

    def result(
        self,
        reason: str,
        run_requests: list[dg.RunRequest],
        asset_events: Sequence[dg.AssetObservation] = (),
    ) -> dg.SensorResult | dg.SkipReason:
        """The tick's answer: the requests and events (the poll observations due among them) with
        the new cursor, or, with neither, :meth:`EachDatabase.skip_all_or` ``reason`` — with the new
        cursor if the tick moved it (a manifest handled, e.g. of a discovered database, which has no
        asset to observe; or polls counted), so that the next tick neither reads that database again
        nor loses the polls' requests."""
        events = [*asset_events, *self.poll_observations]
        cursor = self._state.dumps()
        if not run_requests and not events:
            skip = self.found.skip_all_or(reason)
            if cursor == self._given:
                return skip
            return dg.SensorResult(skip_reason=skip, cursor=cursor)
        return dg.SensorResult(run_requests=run_requests, asset_events=events, cursor=cursor)


def manifest_sensor(
    *, name: str, job_name: str, description: str, naming: Naming = DEFAULT
) -> Callable[[SensorAnswer], dg.SensorDefinition]:
    """Decorator: the sensor ``name`` (every 30 s) whose ticks the function answers from a
    :class:`ManifestTick`, the ``slate`` resource (its key: ``naming``'s) and the log."""

    def build(answer: SensorAnswer) -> dg.SensorDefinition:
        @dg.sensor(
            name=name,
            job_name=job_name,
            minimum_interval_seconds=SENSOR_POLL_INTERVAL_S,
            description=description,
            required_resource_keys=naming.slate_keys,
        )
        def _sensor(
            context: dg.SensorEvaluationContext, **_resources: object
        ) -> dg.SensorResult | dg.SkipReason:
            slate = naming.slate(context)
            return answer(ManifestTick(context, slate, naming), slate, context.log)

        return _sensor

    return build
