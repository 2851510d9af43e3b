"""Every maintenance step meters its own object-store requests.

:func:`metered_step` runs a step with a :class:`StepMeter` active (a context variable of the step's
thread); while it is, :meth:`SlateDatabasesResource.store_for
<slate_ops.orchestration.resources.SlateDatabasesResource.store_for>` — where every op gets its
stores — wraps each store it opens in a :class:`~slate_ops.objstore.metering.MeteredStore` of that
meter (:func:`metered`), so the step's requests are counted once, however many stores and handles it
opens, and nothing outside a step is. The step then records its counts twice: in its output metadata
(:func:`request_metadata`: ``requests`` by kind and bytes, ``request_cost_usd``) and as an
``AssetObservation`` of its database (:func:`cost_observation`) that the cost views read back from
the event log (:mod:`~slate_ops.orchestration.cost_assets`). A step that fails records its
observation too, as a runless event (S3 bills failed work; Dagster drops a failed step's events)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

import dagster as dg

from slate_ops.objstore import ObjectStore
from slate_ops.objstore.metering import ZERO, MeteredStore, PriceTable, RequestCounts

T = TypeVar("T")

COST_SOURCE = "cost_source"
"""Metadata key of a cost observation: the source of its requests (:data:`~.cost.SOURCES`)."""
REQUESTS = "requests"
"""Metadata key of the counts by kind and bytes (JSON of :meth:`RequestCounts.to_dict`)."""
REQUEST_COST = "request_cost_usd"
"""Metadata key of the counts' cost in dollars (a float, so the UI plots it)."""
RUNS = "cost_runs"
"""Metadata key of how many steps or polls a cost observation covers."""


class StepMeter:
    """The meters of one step's stores; :attr:`counts` is their sum. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stores: list[MeteredStore] = []

    def wrap(self, store: ObjectStore) -> MeteredStore:
        """``store`` metered by this step (a store it already meters is returned as it is)."""
        with self._lock:
            for known in self._stores:
                if known is store:
                    return known
            metered_store = MeteredStore(store)
            self._stores.append(metered_store)
            return metered_store

    @property
    def counts(self) -> RequestCounts:
        with self._lock:
            stores = list(self._stores)
        return sum((s.counts for s in stores), ZERO)


_ACTIVE: ContextVar[StepMeter | None] = ContextVar("slate_ops_step_meter", default=None)


@contextmanager
def step_meter() -> Iterator[StepMeter]:
    """A meter active for the block: :func:`metered` stores in it count into it."""
    meter = StepMeter()
    token = _ACTIVE.set(meter)
    try:
        yield meter
    finally:
        _ACTIVE.reset(token)


def metered(store: ObjectStore) -> ObjectStore:
    """``store``, metered by the active step's meter if there is one (else as it is)."""
    meter = _ACTIVE.get()
    return store if meter is None else meter.wrap(store)


def request_metadata(counts: RequestCounts, prices: PriceTable) -> dict[str, dg.MetadataValue]:
    """``requests`` (JSON: counts by kind, bytes read and written) and ``request_cost_usd``."""
    return {
        REQUESTS: dg.MetadataValue.json(counts.to_dict()),
        REQUEST_COST: dg.MetadataValue.float(prices.cost(counts)),
    }


def cost_observation(
    key: dg.AssetKey, source: str, counts: RequestCounts, prices: PriceTable, *, runs: int = 1
) -> dg.AssetObservation:
    """An observation of the database asset ``key`` recording ``counts`` of ``source`` (``runs``
    steps or polls), which the cost views sum."""
    metadata = {
        COST_SOURCE: dg.MetadataValue.text(source),
        RUNS: dg.MetadataValue.int(runs),
        **request_metadata(counts, prices),
    }
    return dg.AssetObservation(asset_key=key, metadata=metadata)


def metered_step(
    context: dg.OpExecutionContext,
    key: dg.AssetKey,
    source: str,
    prices: PriceTable,
    run: Callable[[], T],
) -> tuple[T, dict[str, dg.MetadataValue]]:
    """``run()`` with a step meter active: its result and its :func:`request_metadata`. The counts
    are also recorded as a :func:`cost_observation` of ``key``, whether or not ``run`` raises."""
    with step_meter() as meter:
        try:
            result = run()
        except BaseException:
            # Dagster drops the events a failed step logged: record this one outside the run.
            context.instance.report_runless_asset_event(cost_observation(key, source, meter.counts, prices))
            raise
    context.log_event(cost_observation(key, source, meter.counts, prices))
    return result, request_metadata(meter.counts, prices)
