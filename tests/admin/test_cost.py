"""The polling cost model: per-pass counts measured on the database (one sensor observe by probe and
one by LIST = what the fleet's polls really send, one GC dry run), times passes per day, in
dollars; beside SlateDB's defaults computed from its documented GC and compactor behaviour."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slate_ops import Db, admin
from slate_ops.admin.cost import (
    GC_INTERVAL_S,
    MANIFEST_SENSORS,
    SENSOR_LIST_INTERVAL_S,
    SENSOR_POLL_INTERVAL_S,
    SENSOR_PROBE_MAX_AGE_S,
    SLATEDB_COMPACTOR_POLL,
    SLATEDB_COMPACTOR_POLL_INTERVAL_S,
    SLATEDB_GC_INTERVAL_S,
    SLATEDB_GC_PASS,
    SLATEDB_WRITER_POLL,
    WRITER_POLL,
    Intervals,
    MeasuredPasses,
    fleet_cost,
    load_prices,
    measure,
    polling_cost,
)
from slate_ops.admin.fleet import latest_manifest_since
from slate_ops.admin.handle import SlateOpsHandle, poll
from slate_ops.errors import InvalidArgumentError
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore, S3Store
from slate_ops.objstore.metering import S3_STANDARD, ZERO, MeteredStore, PriceTable, RequestCounts
from tests.support.engine import quiet

DAY = 86_400


def _write(store: Any, path: str, rounds: int) -> None:
    with Db.open(path, store, quiet(l0_max_ssts=1000)) as db:
        for r in range(rounds):
            for i in range(20):
                db.put(b"k%03d" % i, b"v%d" % r)
            db.flush_memtable()


def test_measured_passes_are_what_the_real_functions_cost(memory_store: MemoryStore) -> None:
    _write(memory_store, "db", 3)
    measured = measure("db", memory_store)
    # One observe of an unchanged database, as the fleet sensors poll it: what a meter sees.
    meter = MeteredStore(memory_store)
    state = poll.state_since("db", meter, None, None)
    assert state is not None
    meter.reset()
    assert poll.state_since("db", meter, None, state.manifest_id, probe=True) is None
    assert measured.observe == meter.counts == RequestCounts(get=1)  # the probe of the next manifest
    meter.reset()
    assert poll.state_since("db", meter, None, state.manifest_id) is None
    assert measured.observe_listed == meter.counts == RequestCounts(list=1)  # the hourly LIST
    assert measured.gc_pass == SlateOpsHandle("db", memory_store).gc_plan().requests
    assert measured.gc_pass.list >= 1 and measured.gc_pass.put == measured.gc_pass.delete == 0
    assert measured.objects["manifest"] >= 1 and measured.objects["compacted"] == 3


def test_a_probe_is_one_get_and_a_change_adds_one_list(memory_store: MemoryStore) -> None:
    """The sensors' probe (latest_manifest_since with ``probe``): unchanged, one GET of the next
    manifest; one manifest newer, that GET and a LIST showing it the newest (not read again); more,
    a GET of the newest too."""
    _write(memory_store, "db", 1)
    meter = MeteredStore(memory_store)
    known = ManifestStore(memory_store, "db").list()[-1].id
    assert latest_manifest_since("db", meter, known, probe=True) is None
    assert meter.counts == RequestCounts(get=1, bytes_read=0)
    admin.create_checkpoint("db", memory_store)
    meter.reset()
    one = latest_manifest_since("db", meter, known, probe=True)
    assert one is not None and one.id == known + 1 and len(one.value.checkpoints) == 1
    assert (meter.counts.get, meter.counts.list) == (1, 1)
    admin.create_checkpoint("db", memory_store)
    admin.create_checkpoint("db", memory_store)
    meter.reset()
    newest = latest_manifest_since("db", meter, one.id, probe=True)
    assert newest is not None and newest.id == one.id + 2 and len(newest.value.checkpoints) == 3
    assert (meter.counts.get, meter.counts.list) == (2, 1)


def test_requests_per_day_by_source_and_dollars() -> None:
    gc_pass = RequestCounts(list=5, get=2, bytes_read=900)
    measured = MeasuredPasses(
        "db",
        "slate_ops",
        observe=RequestCounts(get=1),
        gc_pass=gc_pass,
        objects={"manifest": 3, "wal": 10, "compacted": 2500, "other": 5000},
        observe_listed=RequestCounts(list=1),
    )
    cost = polling_cost(measured, Intervals(writers=0))
    ours = {s.source: s for s in cost.ours}
    sensor_polls = MANIFEST_SENSORS * DAY // SENSOR_POLL_INTERVAL_S
    sensor_lists = MANIFEST_SENSORS * DAY // SENSOR_LIST_INTERVAL_S
    assert (sensor_polls, sensor_lists) == (5760, 48)
    assert ours["sensor_polls"].per_day == RequestCounts(get=sensor_polls - sensor_lists)
    assert ours["sensor_lists"].per_day == RequestCounts(list=sensor_lists)
    assert ours["gc"].per_day == gc_pass.scaled(DAY / GC_INTERVAL_S)
    assert ours["writer_polls"].per_day == ZERO
    theirs = {s.source: s for s in cost.slatedb_defaults}
    # compacted/ holds 2,500 keys: 2 LIST pages more than the measured pass; "other" is not listed
    assert theirs["gc"].per_pass == SLATEDB_GC_PASS + RequestCounts(list=2)
    assert theirs["gc"].passes_per_day == DAY / SLATEDB_GC_INTERVAL_S == 144
    assert theirs["compactor_polls"].per_day == SLATEDB_COMPACTOR_POLL.scaled(
        DAY / SLATEDB_COMPACTOR_POLL_INTERVAL_S
    )
    per_day = ours["sensor_polls"].per_day + ours["sensor_lists"].per_day + ours["gc"].per_day
    assert cost.per_day(cost.ours) == per_day
    polls = 5712 * 0.0004 / 1000 + 48 * 0.005 / 1000  # was 5,760 LISTs: 5760 * 0.005 / 1000
    assert cost.dollars_per_day == pytest.approx(polls + 4 * (5 * 0.005 + 2 * 0.0004) / 1000)
    assert cost.dollars_per_month == pytest.approx(30 * cost.dollars_per_day)
    slower = polling_cost(measured, Intervals(poll_s=60, gc_s=3600, writers=2))
    by_source = {s.source: s.per_day for s in slower.ours}
    # Polls 60 s apart are too far apart to probe from (SENSOR_PROBE_MAX_AGE_S): every one LISTs.
    assert SENSOR_PROBE_MAX_AGE_S == 60
    assert by_source["sensor_lists"].list == 2880 and by_source["sensor_polls"] == ZERO
    assert by_source["gc"] == gc_pass.scaled(24)
    assert by_source["writer_polls"] == WRITER_POLL.scaled(2 * DAY)
    theirs_slower = {s.source: s.per_day for s in slower.slatedb_defaults}
    assert theirs_slower["writer_polls"] == SLATEDB_WRITER_POLL.scaled(2 * DAY)
    doubled = polling_cost(
        measured, Intervals(writers=0), PriceTable(list_per_1000=0.01, get_per_1000=0.0008)
    )
    assert doubled.dollars_per_day == pytest.approx(2 * cost.dollars_per_day)


@pytest.mark.parametrize("bad", [{"poll_s": 0}, {"gc_s": -1}, {"gc_s": float("inf")}, {"writers": -1}])
def test_bad_intervals_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        Intervals(**bad)


def test_fleet_cost_lists_databases_most_expensive_first(memory_store: MemoryStore) -> None:
    _write(memory_store, "team/busy", 4)
    admin.create_db("team/idle", memory_store)
    admin.create_db("other", memory_store)
    # GC every second and bytes read dear: the GC pass (busy's manifest is larger) decides the order.
    costs = fleet_cost(memory_store, "team", Intervals(gc_s=1), PriceTable(read_per_gb=1e6))
    assert [c.path for c in costs] == ["team/busy", "team/idle"]
    assert costs[0].dollars_per_month > costs[1].dollars_per_month


@pytest.mark.s3
def test_on_s3_an_observe_is_the_one_request_boto3_sends(make_s3_store: Callable[..., S3Store]) -> None:
    store = make_s3_store(fresh=True)
    _write(store, "db", 2)
    measured = measure("db", store)
    state = poll.state_since("db", store, None, None)
    assert state is not None
    sent: Counter[str] = Counter()
    store.client.meta.events.register("before-send.s3", lambda request, **_: sent.update([request.method]))
    assert poll.state_since("db", store, None, state.manifest_id, probe=True) is None
    # The probe: a GET of the next manifest (404); boto3 sends a LIST as a GET of the bucket too.
    assert sent == Counter({"GET": measured.observe.get}) and measured.observe == RequestCounts(get=1)
    sent.clear()
    assert poll.state_since("db", store, None, state.manifest_id) is None
    assert sent == Counter({"GET": 1}) and measured.observe_listed == RequestCounts(list=1)
    (cost,) = fleet_cost(store)
    assert cost.path == "db" and cost.ours[0].per_pass == measured.observe


def test_prices_from_yaml_and_json(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("list_per_1000: 0.0054\nget_per_1000: 0.00043\n")
    (tmp_path / "p.json").write_text('{"put_per_1000": 0.006}')
    yaml_prices = load_prices(tmp_path / "p.yaml")
    assert yaml_prices.list_per_1000 == 0.0054 and yaml_prices.put_per_1000 == S3_STANDARD.put_per_1000
    assert load_prices(tmp_path / "p.json").put_per_1000 == 0.006


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("list_per_1000: -1\n", "list_per_1000"),
        ("lst_per_1000: 1\n", "lst_per_1000"),
        ("get_per_1000: cheap\n", "get_per_1000"),
        ("- 1\n", "mapping"),
        ("a: [\n", "cannot read"),
    ],
)
def test_bad_prices_name_the_file_and_field(tmp_path: Path, text: str, names: str) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    with pytest.raises(InvalidArgumentError, match=rf"prices\.yaml.*{names}"):
        load_prices(path)
    with pytest.raises(InvalidArgumentError, match=r"missing\.yaml"):
        load_prices(tmp_path / "missing.yaml")


def test_a_slatedb_database_is_measured_through_our_store(tmp_path: Path) -> None:
    pytest.importorskip("slatedb.uniffi")
    from slate_ops.objstore import LocalStore
    from tests.support.writers import DB, write_slatedb

    store = LocalStore(tmp_path / "store")
    write_slatedb(store)
    (cost,) = fleet_cost(store)
    assert (cost.path, cost.engine) == (DB, "slatedb")
    ours = {s.source: s.per_pass for s in cost.ours}
    assert ours["sensor_polls"] == RequestCounts(get=1) and ours["sensor_lists"] == RequestCounts(list=1)
    assert ours["gc"].list >= 4 and ours["gc"].put == ours["gc"].delete == 0  # the plan's listings
