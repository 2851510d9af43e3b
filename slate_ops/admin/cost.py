"""What keeping a database maintained costs in object-store requests per day (issue 23): each
source's requests per pass times its passes per day, in dollars at a
:class:`~slate_ops.objstore.metering.PriceTable` (:func:`polling_cost`), beside the same database
kept by SlateDB's defaults. Per-pass counts of our sources are MEASURED on the database
(:func:`measure`, through a :class:`~slate_ops.objstore.metering.MeteredStore`); SlateDB's, which its
binding makes with its own client, were measured at the HTTP endpoint (benchmarks/bench_gc.py
``--idle-seconds`` re-measures them through benchmarks/latency_proxy.py) and are recorded here.

Ours (slate_ops' defaults, which the Dagster definitions use):

* ``sensor_polls`` -- each manifest sensor (:data:`MANIFEST_SENSORS` of them: compaction and
  checkpoints) observes every database every :data:`SENSOR_POLL_INTERVAL_S`; one observe is
  :func:`slate_ops.admin.handle.poll.state_since` with the known manifest and ``probe`` (one GET of
  the next manifest when unchanged);
* ``sensor_lists`` -- of those polls, one per sensor every :data:`SENSOR_LIST_INTERVAL_S` is a LIST
  instead (the same call without ``probe``: one LIST when unchanged);
* ``gc`` -- one GC pass every :data:`GC_INTERVAL_S`, as its dry run costs (the plan reads what
  the run reads; a run's deletions come on top, free on S3 Standard);
* ``writer_polls`` -- each writer probes for a newer manifest every second
  (:data:`WRITER_POLL`, measured);

SlateDB 0.17's defaults (docs/design/slatedb-engine.md, "Other measured facts"):

* ``gc`` -- every :data:`SLATEDB_GC_INTERVAL_S` (600 s since slatedb#1993; 60 s before, the ~1,440
  LISTs a day of slatedb#1754) one ``run_gc_once``: :data:`SLATEDB_GC_PASS` (measured on a
  database whose directories each fit one LIST page) plus one LIST per further 1,000 keys of each
  directory it lists (``manifest/``, ``wal/``, ``compacted/``, ``compactions/``), counted on this
  database's objects;
* ``compactor_polls`` -- its compactor (what our compaction sensor replaces) re-reads the manifest,
  the ``.compactions`` state and their GC boundaries every :data:`SLATEDB_COMPACTOR_POLL_INTERVAL_S`
  (:data:`SLATEDB_COMPACTOR_POLL`, measured);
* ``writer_polls`` -- each writer probes for a newer manifest and reads its GC boundary every
  second (:data:`SLATEDB_WRITER_POLL`, measured).

Compaction is not polling: it runs when the sensor sees enough L0 (its report's ``requests``).

Discovery is the fleet's, not a database's (:func:`discovery_cost`): a Dagster fleet with
``discover`` LISTs every object under its prefix (one request per 1,000 keys) once per
``discover.interval_minutes`` in each sensor that keeps the listing in its cursor
(:data:`DISCOVERING_SENSORS`), and on the schedules' ticks (:data:`DISCOVERING_SCHEDULE_TICKS`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Final

import yaml

from slate_ops.admin import fleet
from slate_ops.admin.handle import open as open_handle
from slate_ops.admin.handle import poll
from slate_ops.engines.detect import Engine
from slate_ops.errors import InvalidArgumentError
from slate_ops.gc import MIN_AGE_FLOOR
from slate_ops.layout import (
    COMPACTED_DIR,
    COMPACTIONS_DIR,
    MANIFEST_DIR,
    WAL_DIR,
    normalize_db_path,
)
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.metering import (
    S3_STANDARD,
    ZERO,
    MeteredStore,
    PriceTable,
    RequestCounts,
    list_requests,
)
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime

__all__ = [
    "DISCOVERING_SCHEDULE_TICKS",
    "DISCOVERING_SENSORS",
    "DISCOVER_INTERVAL_S",
    "GC_INTERVAL_S",
    "MANIFEST_SENSORS",
    "SENSOR_LIST_INTERVAL_S",
    "SENSOR_POLL_INTERVAL_S",
    "SENSOR_PROBE_MAX_AGE_S",
    "SLATEDB_COMPACTOR_POLL",
    "SLATEDB_COMPACTOR_POLL_INTERVAL_S",
    "SLATEDB_GC_DIRECTORIES",
    "SLATEDB_GC_INTERVAL_S",
    "SLATEDB_GC_PASS",
    "SLATEDB_WRITER_POLL",
    "WRITER_POLL",
    "WRITER_POLL_INTERVAL_S",
    "DatabaseCost",
    "DiscoveryCost",
    "Intervals",
    "MeasuredPasses",
    "SourceCost",
    "discovery_cost",
    "fleet_cost",
    "fleet_discovery_cost",
    "load_prices",
    "measure",
    "polling_cost",
]

DAY_S: Final = 86_400
MONTH_DAYS: Final = 30

SENSOR_POLL_INTERVAL_S: Final = 30
"""Our manifest sensors' ``minimum_interval_seconds`` (the Dagster definitions use this)."""
SENSOR_LIST_INTERVAL_S: Final = 3600
"""How often each manifest sensor polls an unchanged database with a LIST instead of a GET probe
(:meth:`slate_ops.orchestration.polls.SensorCursor.may_probe`): a database whose manifests were
deleted by hand is found missing within it."""
SENSOR_PROBE_MAX_AGE_S: Final = MIN_AGE_FLOOR.total_seconds() / 2
"""How recently (60 s) a poll must have confirmed a manifest the latest for the next poll to probe
from it (so sensors polling this seldom or less often always LIST). A probe miss cannot tell
``M + 1`` never written from ``M + 1`` deleted; GC deletes only manifests older than its
``min_age`` (at least :data:`~slate_ops.gc.MIN_AGE_FLOOR`, 120 s), and ``M + 1`` was written after
``M`` was last confirmed the latest, so within this age a miss proves ``M`` still the latest (and
confirms it again). Half the floor leaves room for a tick's duration and clock skew; it is the TTL
of the sequenced stores' own probe (docs/design/coordination.md)."""
MANIFEST_SENSORS: Final = 2
"""Manifest sensors observing every database: the compaction sensor and the checkpoint sensor."""
GC_INTERVAL_S: Final = 6 * 3600
"""Our GC schedule's default (``gc.interval_hours: 6``, the Dagster config's default)."""

SLATEDB_GC_INTERVAL_S: Final = 600
"""SlateDB's GC interval per directory (``DEFAULT_INTERVAL``, slatedb#1993)."""
SLATEDB_GC_DIRECTORIES: Final = (MANIFEST_DIR, WAL_DIR, COMPACTED_DIR, COMPACTIONS_DIR)
"""The directories SlateDB's collector lists on every pass."""
SLATEDB_COMPACTOR_POLL_INTERVAL_S: Final = 5
"""SlateDB's ``compactor_options.poll_interval`` default."""
WRITER_POLL_INTERVAL_S: Final = 1
"""A writer's ``manifest_poll_interval`` (ours and SlateDB's default)."""

# Measured on moto through benchmarks/latency_proxy.py (benchmarks/bench_gc.py --idle-seconds),
# slatedb 0.17.0 with default settings, an idle database of 100 keys:
WRITER_POLL: Final = RequestCounts(get=1)
"""Our idle writer, per second: one GET probing for the next manifest (1.0 GET/s measured)."""
SLATEDB_WRITER_POLL: Final = RequestCounts(get=2)
"""SlateDB's idle writer, per second: the next manifest's probe and ``gc/manifest.boundary``."""
SLATEDB_COMPACTOR_POLL: Final = RequestCounts(get=5)
"""SlateDB's embedded compactor, per poll: the manifest and its boundary, the ``.compactions`` state
and its boundary (with its writer: 3.0-3.2 GET/s measured idle, 2 + 5/5 modelled)."""
SLATEDB_GC_PASS: Final = RequestCounts(list=7, get=23)
"""One ``run_gc_once`` with default options on that database (7 LIST, 23 GET measured)."""

DISCOVER_INTERVAL_S: Final = 300
"""How long a sensor reuses its discovery listing (``discover.interval_minutes: 5``, the default)."""
DISCOVERING_SENSORS: Final = {
    "manifest": SENSOR_POLL_INTERVAL_S,
    "compaction": SENSOR_POLL_INTERVAL_S,
    "partitions": 60,
}
"""The sensors that discover the fleet, with their tick intervals in seconds: each LISTs once per
discovery interval (at most once per tick), keeping the listing in its cursor."""
DISCOVERING_SCHEDULE_TICKS: Final = {"compaction": 48, "checkpoint expiry": 24, "gc": 4, "maintenance": 1}
"""The schedule ticks per day that discover the fleet (a schedule has no cursor: it LISTs at each
tick at which a database with the default policies, as a discovered one has, may get a run):
compaction every 30 minutes, checkpoint expiry hourly, GC at the default ``interval_hours`` (6),
maintenance daily; the tag policy schedule never (a discovered database has no tag policy)."""


@dataclass(frozen=True)
class Intervals:
    """How often each source runs, and how many writers keep polling each database."""

    poll_s: float = SENSOR_POLL_INTERVAL_S
    gc_s: float = GC_INTERVAL_S
    writers: int = 1

    def __post_init__(self) -> None:
        for name in ("poll_s", "gc_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise InvalidArgumentError(
                    f"interval {name!r} must be a positive number of seconds, got {value!r}"
                )
        if self.writers < 0:
            raise InvalidArgumentError(f"'writers' must be 0 or more, got {self.writers!r}")


@dataclass(frozen=True)
class MeasuredPasses:
    """One database's requests per pass of each source, measured on it, and its objects per
    directory (what a full listing of each costs)."""

    path: str
    engine: str
    observe: RequestCounts
    gc_pass: RequestCounts
    objects: dict[str, int]
    observe_listed: RequestCounts = ZERO
    """An unchanged observe by LIST (``observe`` is the probe's: the sensors' usual poll)."""

    def slatedb_gc_pass(self) -> RequestCounts:
        """One pass of SlateDB's collector on this database: :data:`SLATEDB_GC_PASS`, plus a LIST
        for each further 1,000 keys of a directory it lists (module docstring)."""
        extra_pages = sum(list_requests(self.objects.get(d, 0)) - 1 for d in SLATEDB_GC_DIRECTORIES)
        return SLATEDB_GC_PASS + RequestCounts(list=extra_pages)


@dataclass(frozen=True)
class SourceCost:
    """One source of requests: what one pass costs and how many passes a day."""

    source: str
    per_pass: RequestCounts
    passes_per_day: float

    @property
    def per_day(self) -> RequestCounts:
        return self.per_pass.scaled(self.passes_per_day)


@dataclass(frozen=True)
class DatabaseCost:
    """Requests per day by source of keeping one database maintained by our defaults (``ours``)
    and by SlateDB's (``slatedb_defaults``), in dollars at ``prices``."""

    path: str
    engine: str
    ours: tuple[SourceCost, ...]
    slatedb_defaults: tuple[SourceCost, ...]
    prices: PriceTable = S3_STANDARD

    def per_day(self, sources: tuple[SourceCost, ...]) -> RequestCounts:
        return sum((s.per_day for s in sources), ZERO)

    @property
    def dollars_per_day(self) -> float:
        return self.prices.cost(self.per_day(self.ours))

    @property
    def dollars_per_month(self) -> float:
        return self.dollars_per_day * MONTH_DAYS

    @property
    def slatedb_dollars_per_month(self) -> float:
        return self.prices.cost(self.per_day(self.slatedb_defaults)) * MONTH_DAYS

    def to_dict(self) -> dict[str, object]:
        """The JSON form: per source, the requests per pass and per day, and the totals."""

        def side(sources: tuple[SourceCost, ...]) -> dict[str, object]:
            per_day = self.per_day(sources)
            return {
                "sources": {
                    s.source: {
                        "passes_per_day": s.passes_per_day,
                        "per_pass": s.per_pass.to_dict(),
                        "per_day": s.per_day.to_dict(),
                        "dollars_per_day": self.prices.cost(s.per_day),
                    }
                    for s in sources
                },
                "requests_per_day": per_day.requests,
                "dollars_per_day": self.prices.cost(per_day),
                "dollars_per_month": self.prices.cost(per_day) * MONTH_DAYS,
            }

        return {
            "path": self.path,
            "engine": self.engine,
            "ours": side(self.ours),
            "slatedb_defaults": side(self.slatedb_defaults),
        }


@dataclass(frozen=True)
class DiscoveryCost:
    """What discovering a fleet of ``objects`` objects costs per day: one listing is ``per_pass``
    (a LIST per 1,000 keys), made ``passes_per_day`` times (:func:`discovery_cost`)."""

    objects: int
    interval_s: float
    per_pass: RequestCounts
    passes_per_day: float
    prices: PriceTable = S3_STANDARD

    @property
    def per_day(self) -> RequestCounts:
        return self.per_pass.scaled(self.passes_per_day)

    @property
    def dollars_per_day(self) -> float:
        return self.prices.cost(self.per_day)

    @property
    def dollars_per_month(self) -> float:
        return self.dollars_per_day * MONTH_DAYS

    def to_dict(self) -> dict[str, object]:
        return {
            "objects": self.objects,
            "interval_s": self.interval_s,
            "passes_per_day": self.passes_per_day,
            "per_pass": self.per_pass.to_dict(),
            "per_day": self.per_day.to_dict(),
            "requests_per_day": self.per_day.requests,
            "dollars_per_day": self.dollars_per_day,
            "dollars_per_month": self.dollars_per_month,
        }


def discovery_cost(
    objects: int, interval_s: float = DISCOVER_INTERVAL_S, prices: PriceTable = S3_STANDARD
) -> DiscoveryCost:
    """Discovery's requests per day for a prefix holding ``objects`` objects at ``interval_s``
    (module docstring): each of :data:`DISCOVERING_SENSORS` lists once per ``interval_s`` (at most
    once per tick; 0: every tick), plus :data:`DISCOVERING_SCHEDULE_TICKS`."""
    if not math.isfinite(interval_s) or interval_s < 0:
        raise InvalidArgumentError(f"discovery interval must be 0 or more seconds, got {interval_s!r}")
    if objects < 0:
        raise InvalidArgumentError(f"objects must be 0 or more, got {objects!r}")
    pages = list_requests(objects)
    passes = sum(DAY_S / max(interval_s, tick_s) for tick_s in DISCOVERING_SENSORS.values())
    passes += sum(DISCOVERING_SCHEDULE_TICKS.values())
    return DiscoveryCost(objects, interval_s, RequestCounts(list=pages), passes, prices)


def fleet_discovery_cost(
    store: ObjectStore,
    prefix: str = "",
    interval_s: float = DISCOVER_INTERVAL_S,
    prices: PriceTable = S3_STANDARD,
) -> DiscoveryCost:
    """:func:`discovery_cost` of a Dagster fleet discovering ``prefix`` in ``store``, counted on its
    objects now (one discovery LIST)."""
    return discovery_cost(fleet.discover(store, prefix).objects, interval_s, prices)


def measure(
    path: str, store: ObjectStore, engine: Engine | str | None = None, *, clock: Runtime = SYSTEM_RUNTIME
) -> MeasuredPasses:
    """Run one pass of each source on the database at ``path`` through a meter: one unchanged
    observe by probe and one by LIST (what the sensors' polls cost; the first, which reads the
    state, is not counted), one GC dry run, one listing of the database's directories. Reads only."""
    db = normalize_db_path(path)
    handle = open_handle(db, store, engine, clock=clock)
    meter = MeteredStore(store)
    state = poll.state_since(db, meter, handle.engine, None, clock=clock)
    assert state is not None
    meter.reset()
    poll.state_since(db, meter, handle.engine, state.manifest_id, probe=True, clock=clock)
    observe = meter.counts
    meter.reset()
    poll.state_since(db, meter, handle.engine, state.manifest_id, clock=clock)
    observe_listed = meter.counts
    gc_pass = handle.gc_plan().requests
    objects: dict[str, int] = {}
    for meta in store.list(f"{db}/"):
        directory = meta.key[len(db) + 1 :].split("/", 1)[0]
        objects[directory] = objects.get(directory, 0) + 1
    return MeasuredPasses(db, handle.engine.value, observe, gc_pass, objects, observe_listed)


def polling_cost(
    measured: MeasuredPasses, intervals: Intervals = Intervals(), prices: PriceTable = S3_STANDARD
) -> DatabaseCost:
    """Requests and dollars per day of ``measured``'s database at ``intervals`` (module docstring)."""
    writer_seconds = intervals.writers * DAY_S / WRITER_POLL_INTERVAL_S
    polls = MANIFEST_SENSORS * DAY_S / intervals.poll_s
    lists = MANIFEST_SENSORS * DAY_S / SENSOR_LIST_INTERVAL_S
    if intervals.poll_s >= SENSOR_PROBE_MAX_AGE_S:
        lists = polls  # every confirmation is too old to probe from
    ours = (
        SourceCost("sensor_polls", measured.observe, polls - lists),
        SourceCost("sensor_lists", measured.observe_listed, lists),
        SourceCost("gc", measured.gc_pass, DAY_S / intervals.gc_s),
        SourceCost("writer_polls", WRITER_POLL, writer_seconds),
    )
    slatedb = (
        SourceCost("gc", measured.slatedb_gc_pass(), DAY_S / SLATEDB_GC_INTERVAL_S),
        SourceCost("compactor_polls", SLATEDB_COMPACTOR_POLL, DAY_S / SLATEDB_COMPACTOR_POLL_INTERVAL_S),
        SourceCost("writer_polls", SLATEDB_WRITER_POLL, writer_seconds),
    )
    return DatabaseCost(measured.path, measured.engine, ours, slatedb, prices)


def fleet_cost(
    store: ObjectStore,
    prefix: str = "",
    intervals: Intervals = Intervals(),
    prices: PriceTable = S3_STANDARD,
    *,
    clock: Runtime = SYSTEM_RUNTIME,
) -> list[DatabaseCost]:
    """:func:`polling_cost` of every live database at and under ``prefix`` (as ``list-dbs`` finds
    them, SlateDB's included), most expensive first."""
    costs = [
        polling_cost(measure(listing.path, store, _engine_of(listing), clock=clock), intervals, prices)
        for listing in fleet.list_dbs(prefix, store)
        if listing.state in (fleet.LIVE, fleet.SLATEDB)
    ]
    return sorted(costs, key=lambda c: (-c.dollars_per_month, c.path))


def _engine_of(listing: fleet.DbListing) -> Engine:
    return Engine.SLATEDB if listing.state == fleet.SLATEDB else Engine.SLATE_OPS


def load_prices(path: str | Path) -> PriceTable:
    """The :class:`PriceTable` in the YAML or JSON file ``path`` (a mapping of its fields; those
    left out keep S3 Standard's). A file that cannot be read or parsed, an unknown field or a bad
    price raises :class:`InvalidArgumentError` naming the file and the field."""
    try:
        loaded = yaml.safe_load(Path(path).read_text())  # JSON is YAML
    except (OSError, yaml.YAMLError) as e:
        raise InvalidArgumentError(f"price table {path}: cannot read it: {e}") from e
    if not isinstance(loaded, dict):
        raise InvalidArgumentError(f"price table {path}: expected a mapping of PriceTable fields")
    known = {f.name for f in fields(PriceTable)}
    unknown = sorted(str(k) for k in loaded if k not in known)
    if unknown:
        raise InvalidArgumentError(
            f"price table {path}: unknown field {unknown[0]!r}; fields: {', '.join(sorted(known))}"
        )
    try:
        return PriceTable(**{"source": str(path), **loaded})
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"price table {path}: {e}") from e
