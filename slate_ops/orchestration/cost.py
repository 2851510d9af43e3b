"""What each database costs in object-store requests, as plain functions (no Dagster): the sources
of requests, their sum per day over a window (:func:`per_day_by_source`), the fleet ordered by cost
(:func:`fleet_rows`), the Markdown tables the assets show, and the polling cost of SlateDB's defaults
beside ours (:func:`slatedb_default_polling`). The Dagster side (:mod:`.requests`) reads the events
and calls these."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from slate_ops.admin.cost import DiscoveryCost, Intervals, MeasuredPasses, polling_cost
from slate_ops.objstore.metering import KINDS, ZERO, PriceTable, RequestCounts

SENSOR_POLLS = "sensor polls"
COMPACTION = "compaction"
GC = "gc"
CHECKPOINTS = "checkpoints"
TAG_POLICY = "tag policy"
CLONES = "clones"
RESCALE = "rescale"

SOURCES = (SENSOR_POLLS, COMPACTION, GC, CHECKPOINTS, TAG_POLICY, CLONES, RESCALE)
"""Where a database's requests come from, in the order the tables show them."""

SOURCE_OF_OP = {
    "compact_op": COMPACTION,
    "maintenance_compact": COMPACTION,
    "gc_op": GC,
    "maintenance_gc": GC,
    "expire_checkpoints_op": CHECKPOINTS,
    "maintenance_expire_checkpoints": CHECKPOINTS,
    "tag_policy_op": TAG_POLICY,
    "maintenance_tag_policy": TAG_POLICY,
    "clone_op": CLONES,
    "rescale_op": RESCALE,
}
"""The source of each op's requests, by its unprefixed name."""

DAY_S = 86_400.0


def source_of_op(op_name: str, prefix: str = "") -> str:
    """The source of the requests of op ``op_name`` (prefixed by ``prefix``); an op slate_ops does
    not know: its own name."""
    base = op_name.removeprefix(prefix)
    return SOURCE_OF_OP.get(base, base)


@dataclass(frozen=True)
class CostEvent:
    """One recorded piece of request counting: a step's requests, or a window of sensor polls
    (``runs``: how many steps or polls it covers)."""

    source: str
    counts: RequestCounts
    timestamp: float
    runs: int = 1


@dataclass(frozen=True)
class DatabaseCost:
    """A database's requests by source over a window (:attr:`totals`), per day, and what they cost."""

    database: str
    totals: Mapping[str, RequestCounts]
    window_days: float
    events: int
    runs: Mapping[str, int] = field(default_factory=dict)

    @property
    def per_day(self) -> dict[str, RequestCounts]:
        """Each source's requests per day (rounded)."""
        return {source: counts.scaled(1 / self.window_days) for source, counts in self.totals.items()}

    @property
    def total(self) -> RequestCounts:
        """Every source's requests in the window."""
        return sum(self.totals.values(), ZERO)

    def cost_per_day(self, prices: PriceTable, source: str | None = None) -> float:
        """Dollars per day of every source, or of ``source``."""
        counts = self.total if source is None else self.totals.get(source, ZERO)
        return prices.cost(counts) / self.window_days

    def polling_cost_per_day(self, prices: PriceTable) -> float:
        """Our polling, in dollars per day: the sensors' polls and GC (which lists the directories)."""
        return self.cost_per_day(prices, SENSOR_POLLS) + self.cost_per_day(prices, GC)

    def per_run(self, source: str) -> RequestCounts | None:
        """The average requests of one step or poll of ``source`` in the window (None: none ran)."""
        runs = self.runs.get(source, 0)
        if not runs:
            return None
        return self.totals.get(source, ZERO).scaled(1 / runs)


def per_day_by_source(
    database: str, events: Iterable[CostEvent], *, now: float, window_s: float
) -> DatabaseCost:
    """The requests of ``database`` by source, from its ``events`` within ``window_s`` before
    ``now`` (older and future ones ignored), over the window in days."""
    since = now - window_s
    sums: dict[str, RequestCounts] = {}
    runs: dict[str, int] = {}
    count = 0
    for event in events:
        if not since <= event.timestamp <= now:
            continue
        count += 1
        sums[event.source] = sums.get(event.source, ZERO) + event.counts
        runs[event.source] = runs.get(event.source, 0) + event.runs
    ordered = sorted(sums, key=lambda s: (SOURCES.index(s) if s in SOURCES else len(SOURCES), s))
    return DatabaseCost(database, {s: sums[s] for s in ordered}, window_s / DAY_S, count, runs)


def fleet_rows(costs: Iterable[DatabaseCost], prices: PriceTable) -> list[DatabaseCost]:
    """The databases, most expensive per day first (then by name)."""
    return sorted(costs, key=lambda c: (-c.cost_per_day(prices), c.database))


def slatedb_default_polling(cost: DatabaseCost) -> RequestCounts | None:
    """What SlateDB's defaults would poll per day on this database in place of our sensors and GC:
    its collector every 600 s and its compactor's manifest polls every 5 s
    (:func:`slate_ops.admin.cost.polling_cost`'s ``slatedb_defaults``, writers left out on both
    sides: they poll outside Dagster). None: neither our polls nor our GC were measured in the
    window, so there is nothing to set beside it."""
    poll = cost.per_run(SENSOR_POLLS)
    gc_pass = cost.per_run(GC)
    if poll is None and gc_pass is None:
        return None
    measured = MeasuredPasses(cost.database, "", poll or ZERO, gc_pass or ZERO, objects={})
    model = polling_cost(measured, Intervals(writers=0))
    return model.per_day(model.slatedb_defaults)


def usd(value: float) -> str:
    """Dollars with enough digits for fractions of a cent."""
    return f"${value:.6f}" if value < 1 else f"${value:,.2f}"


def database_markdown(cost: DatabaseCost, prices: PriceTable) -> str:
    """One row per source: requests per day by kind, bytes, $/day; then the total."""
    title = f"Requests per day over the last {cost.window_days:g} day(s), {cost.events} recorded event(s):"
    if not cost.totals:
        return f"No request counts recorded in the last {cost.window_days:g} day(s)."
    lines = [
        title,
        "",
        "| source | " + " | ".join(KINDS) + " | bytes read | bytes written | $/day |",
        "| --- | " + " | ".join("---:" for _ in KINDS) + " | ---: | ---: | ---: |",
    ]
    rows = [*cost.per_day.items(), ("**total**", cost.total.scaled(1 / cost.window_days))]
    for source, counts in rows:
        dollars = cost.cost_per_day(prices, None if source == "**total**" else source)
        cells = [str(v) for v in counts.by_kind().values()]
        cells += [str(counts.bytes_read), str(counts.bytes_written), usd(dollars)]
        lines.append(f"| {source} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fleet_markdown(costs: list[DatabaseCost], prices: PriceTable) -> str:
    """The databases in ``costs``' order: $/day, requests/day, our polling's $/day and SlateDB's
    defaults' on the same database (:func:`slatedb_default_polling`)."""
    if not costs:
        return "No database."
    lines = [
        "| database | $/day | requests/day | polling $/day | SlateDB defaults' polling $/day |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for cost in costs:
        slatedb = slatedb_default_polling(cost)
        theirs = "-" if slatedb is None else usd(prices.cost(slatedb))
        requests = round(cost.total.requests / cost.window_days)
        lines.append(
            f"| {cost.database} | {usd(cost.cost_per_day(prices))} | {requests} | "
            f"{usd(cost.polling_cost_per_day(prices))} | {theirs} |"
        )
    return "\n".join(lines)


def by_source_markdown(costs: list[DatabaseCost], prices: PriceTable) -> str:
    """$/day of each database (rows, in ``costs``' order) by source (columns: those with requests)."""
    present = {source for cost in costs for source in cost.totals}
    sources = [s for s in SOURCES if s in present] + sorted(present - set(SOURCES))
    if not sources:
        return "No request counts recorded."
    lines = [
        "| database | " + " | ".join(sources) + " |",
        "| --- | " + " | ".join("---:" for _ in sources) + " |",
    ]
    for cost in costs:
        cells = [usd(cost.cost_per_day(prices, s)) if s in cost.totals else "-" for s in sources]
        lines.append(f"| {cost.database} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def discovery_markdown(cost: DiscoveryCost) -> str:
    """The fleet's discovery: its listings per day at its interval, what one costs, the total."""
    return "\n".join(
        [
            "| objects under the prefix | LIST pages per listing | interval (min) | listings/day "
            "| requests/day | $/day | $/month |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            f"| {cost.objects} | {cost.per_pass.list} | {cost.interval_s / 60:g} | {cost.passes_per_day:g} "
            f"| {cost.per_day.requests} | {usd(cost.dollars_per_day)} | {usd(cost.dollars_per_month)} |",
        ]
    )


def prices_markdown(prices: PriceTable) -> str:
    """The price table: dollars per 1,000 requests of each kind and per GB, and its source."""
    lines = ["| price | USD |", "| --- | ---: |"]
    lines += [f"| {kind} per 1,000 | {getattr(prices, f'{kind}_per_1000')} |" for kind in KINDS]
    lines += [f"| read per GB | {prices.read_per_gb} |", f"| written per GB | {prices.written_per_gb} |"]
    return "\n".join([*lines, "", f"Source: {prices.source}"])
