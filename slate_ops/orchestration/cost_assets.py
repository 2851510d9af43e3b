"""The cost views: what each database's requests cost per day, read back from the Dagster instance's
event log, on the database asset (:func:`database_cost_metadata`) and for the whole fleet
(``slate_ops_fleet_cost``: :func:`build_fleet_cost_asset`).

Every metered step and every window of sensor polls is an ``AssetObservation`` of its database's
asset with ``cost_source`` in its metadata (:mod:`~slate_ops.orchestration.request_meter`); the views
fetch the database's observations of the last ``cost_window_days`` (newest first, pages of
:data:`PAGE`, at most :data:`MAX_EVENTS`) and sum them with the plain functions of
:mod:`~slate_ops.orchestration.cost`. Past :data:`MAX_EVENTS` observations (a database whose manifest
changes very often has many state observations too) the window is shortened to the span read, so
the averages per day stay right."""

# No `from __future__ import annotations` here: Dagster reads the resource annotations of the
# decorated asset at runtime.

from collections.abc import Mapping
from dataclasses import dataclass

import dagster as dg

from slate_ops.admin.cost import DiscoveryCost, discovery_cost
from slate_ops.errors import InvalidArgumentError
from slate_ops.objstore.metering import PriceTable, RequestCounts
from slate_ops.orchestration.config import SlateOpsConfig
from slate_ops.orchestration.cost import (
    DAY_S,
    CostEvent,
    DatabaseCost,
    by_source_markdown,
    database_markdown,
    discovery_markdown,
    fleet_markdown,
    fleet_rows,
    per_day_by_source,
    prices_markdown,
    slatedb_default_polling,
)
from slate_ops.orchestration.discovery import fleet_with_listing
from slate_ops.orchestration.naming import DEFAULT, Naming
from slate_ops.orchestration.request_meter import COST_SOURCE, REQUESTS, RUNS
from slate_ops.runtime import SYSTEM_RUNTIME

FLEET_COST_ASSET = "slate_ops_fleet_cost"
"""The unprefixed name of the fleet's cost asset (a prefixed fleet's: ``<prefix>slate_ops_fleet_cost``)."""

# The window ends at the instance's wall clock (SYSTEM_RUNTIME), which stamped the observations, not
# the resource's clock (a test's manual clock).

PAGE = 1000
"""Observations fetched per event-log query."""
MAX_EVENTS = 20_000
"""Observations read per database and view at most (then the window is the span read)."""


@dataclass(frozen=True)
class CostWindow:
    """The cost observations of one database since :attr:`since` (epoch seconds)."""

    events: list[CostEvent]
    since: float


def cost_events(
    instance: dg.DagsterInstance,
    key: dg.AssetKey,
    *,
    since: float,
    max_events: int = MAX_EVENTS,
    page: int = PAGE,
) -> CostWindow:
    """The cost observations of asset ``key`` after ``since``, newest first; observations without
    ``cost_source`` (the database's state) are skipped. More than ``max_events`` observations: the
    window starts at the oldest one read."""
    events: list[CostEvent] = []
    cursor: str | None = None
    read = 0
    oldest = since
    while True:
        result = instance.fetch_observations(
            dg.AssetRecordsFilter(asset_key=key, after_timestamp=since), limit=page, cursor=cursor
        )
        for record in result.records:
            read += 1
            oldest = record.timestamp
            observation = record.asset_observation
            event = _cost_event(observation.metadata, record.timestamp) if observation else None
            if event is not None:
                events.append(event)
        if not result.has_more:
            return CostWindow(events, since)
        if read >= max_events:
            return CostWindow(events, oldest)
        cursor = result.cursor


def _cost_event(metadata: Mapping[str, dg.MetadataValue], timestamp: float) -> CostEvent | None:
    source, requests, runs = metadata.get(COST_SOURCE), metadata.get(REQUESTS), metadata.get(RUNS)
    if source is None or requests is None or not isinstance(requests.value, dict):
        return None
    try:
        counts = RequestCounts.from_dict(requests.value)
    except InvalidArgumentError:
        return None  # not written by slate_ops: left out
    count = runs.value if runs is not None and isinstance(runs.value, int) else 1
    return CostEvent(str(source.value), counts, timestamp, count)


def database_cost(
    instance: dg.DagsterInstance, key: dg.AssetKey, database: str, config: SlateOpsConfig, now: float
) -> DatabaseCost:
    """``database``'s requests by source over the config's window before ``now``."""
    window_s = config.cost_window_days * DAY_S
    window = cost_events(instance, key, since=now - window_s)
    return per_day_by_source(database, window.events, now=now, window_s=max(now - window.since, 1.0))


def database_cost_metadata(
    instance: dg.DagsterInstance, key: dg.AssetKey, database: str, config: SlateOpsConfig
) -> dict[str, dg.MetadataValue]:
    """The database asset's cost metadata: ``requests_per_day`` (by source, Markdown) and
    ``request_cost_usd_per_day``."""
    prices = config.prices.table()
    cost = database_cost(instance, key, database, config, SYSTEM_RUNTIME.now())
    return {
        "requests_per_day": dg.MetadataValue.md(database_markdown(cost, prices)),
        "request_cost_usd_per_day": dg.MetadataValue.float(cost.cost_per_day(prices)),
    }


def fleet_cost_metadata(costs: list[DatabaseCost], prices: PriceTable) -> dict[str, dg.MetadataValue]:
    """The fleet asset's metadata: the databases by cost per day, totals and the price table."""
    rows = fleet_rows(costs, prices)
    ours = sum(c.polling_cost_per_day(prices) for c in rows)
    slatedb = [slatedb_default_polling(c) for c in rows]
    return {
        "databases": dg.MetadataValue.md(fleet_markdown(rows, prices)),
        "by_source": dg.MetadataValue.md(by_source_markdown(rows, prices)),
        "fleet_cost_usd_per_day": dg.MetadataValue.float(float(sum(c.cost_per_day(prices) for c in rows))),
        "fleet_requests_per_day": dg.MetadataValue.int(
            sum(round(c.total.requests / c.window_days) for c in rows)
        ),
        "polling_cost_usd_per_day": dg.MetadataValue.float(float(ours)),
        "slatedb_default_polling_cost_usd_per_day": dg.MetadataValue.float(
            float(sum(prices.cost(s) for s in slatedb if s is not None))  # none measured: 0, an int
        ),
        "costliest_database": dg.MetadataValue.text(rows[0].database if rows else "-"),
        "price_table": dg.MetadataValue.md(prices_markdown(prices)),
    }


def discovery_cost_metadata(cost: DiscoveryCost) -> dict[str, dg.MetadataValue]:
    """The fleet's discovery cost (a fleet's, not a database's: modelled on its objects at its
    ``discover.interval_minutes``, :func:`~slate_ops.admin.cost.discovery_cost`)."""
    return {
        "discovery": dg.MetadataValue.md(discovery_markdown(cost)),
        "discovery_requests_per_day": dg.MetadataValue.int(cost.per_day.requests),
        "discovery_cost_usd_per_day": dg.MetadataValue.float(cost.dollars_per_day),
    }


def fleet_cost_key(naming: Naming = DEFAULT) -> dg.AssetKey:
    """The key of the fleet's cost asset: ``slate_ops_fleet_cost`` with ``naming``'s prefix (one
    component, so no database's asset key ``[..., slate_ops, <db>]`` can take it)."""
    return dg.AssetKey(naming.name(FLEET_COST_ASSET))


def build_fleet_cost_asset(naming: Naming = DEFAULT) -> dg.AssetsDefinition:
    """``slate_ops_fleet_cost`` of the fleet ``naming`` names: materializing it reads every
    database's cost observations (configured, then discovered) and records them by cost."""
    key = fleet_cost_key(naming)

    @dg.asset(
        key=key,
        group_name=naming.group,
        required_resource_keys=naming.slate_keys,
        description="The fleet's databases ordered by object-store request cost per day (by source, "
        "with SlateDB's default polling beside ours) over the config's cost_window_days, priced by its "
        "prices (docs/orchestration.md, 'What each database costs').",
    )
    def _fleet_cost(context: dg.AssetExecutionContext) -> dg.MaterializeResult[None]:
        slate = naming.slate(context)
        now = SYSTEM_RUNTIME.now()
        fleet, listing = fleet_with_listing(slate, context.log, None)
        costs = [
            database_cost(context.instance, naming.asset_key(slate, db.name), db.name, slate.config, now)
            for db in fleet
        ]
        prices = slate.config.prices.table()
        metadata = fleet_cost_metadata(costs, prices)
        metadata["window_days"] = dg.MetadataValue.float(float(slate.config.cost_window_days))
        if listing is not None and slate.config.discover is not None:
            metadata |= discovery_cost_metadata(
                discovery_cost(listing.objects, slate.config.discover.interval_minutes * 60, prices)
            )
        return dg.MaterializeResult(metadata=metadata)

    return _fleet_cost
