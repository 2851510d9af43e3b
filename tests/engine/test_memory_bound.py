"""The writer's memory is bounded by its options (issue 15, item 4).

* a memtable's ``size_bytes`` tracks the memory it really holds (tracemalloc for Python objects,
  pyarrow's allocated bytes for the packed runs), before and after sealing and freezing;
* the packed memtable behaves like the old dict memtable (a reference model below) for gets, scans
  and ``to_table``, with overwrites, tombstones, seals, merges and freezes in any order;
* a scan of the mutable memtable is a snapshot;
* writes wait once mutable + frozen memtables exceed ``max_unflushed_bytes``;
* a writer stalled on a full L0 says so at once, in one warning, not one per write.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
import tracemalloc
from datetime import timedelta

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slate_ops import Db
from slate_ops.engine.batch import KIND_TOMBSTONE, KIND_VALUE
from slate_ops.engine.memtable import Memtable
from slate_ops.errors import BackpressureTimeoutError, DbClosedError
from slate_ops.objstore import MemoryStore
from slate_ops.sst import SCHEMA
from tests.support.engine import quiet

Entry = tuple[bytes, int, int, bytes]


# --- accounting ---------------------------------------------------------------------------------


def _held_bytes(build: object) -> tuple[Memtable, int]:
    """Build a memtable with ``build()`` and return it with the memory it holds afterwards: Python
    allocations (tracemalloc) plus Arrow's, both measured against the state before."""
    _filled(10, 10, True, 1 << 40).to_table()  # lazy imports (pyarrow loads pandas) are not measured
    gc.collect()
    tracemalloc.start()
    try:
        arrow_before = pa.total_allocated_bytes()
        python_before = tracemalloc.get_traced_memory()[0]
        memtable = build()  # type: ignore[operator]
        gc.collect()
        python = tracemalloc.get_traced_memory()[0] - python_before
        arrow = pa.total_allocated_bytes() - arrow_before
    finally:
        tracemalloc.stop()
    return memtable, python + arrow


def _filled(n: int, value_size: int, freeze: bool, hot_bytes: int, overwrite_every: int = 0) -> Memtable:
    memtable = Memtable(hot_bytes)
    pool = os.urandom(4096)
    for i in range(n):
        key = b"%016x" % ((i * 0x9E3779B97F4A7C15) & (2**64 - 1))
        if overwrite_every and i % overwrite_every == 0 and i:
            key = b"%016x" % ((i // 2 * 0x9E3779B97F4A7C15) & (2**64 - 1))  # an earlier key again
        memtable.put(key, i + 1, KIND_VALUE, pool[i % 3000 : i % 3000 + value_size])
    if freeze:
        memtable.freeze()
    while memtable.merge_runs():
        pass
    return memtable


@pytest.mark.parametrize(
    ("n", "value_size", "freeze", "hot_bytes"),
    [
        (20_000, 100, False, 1 << 40),  # all in the dict
        (20_000, 100, True, 1 << 40),  # one packed run
        (40_000, 100, False, 1 << 20),  # runs (merged) and a dict
        (20_000, 1000, True, 1 << 20),  # large values, outside pymalloc
        (20_000, 10, False, 256 * 1024),  # small values
    ],
)
def test_size_bytes_tracks_the_memory_held(n: int, value_size: int, freeze: bool, hot_bytes: int) -> None:
    memtable, held = _held_bytes(lambda: _filled(n, value_size, freeze, hot_bytes))
    assert 0.8 * held <= memtable.size_bytes <= 1.25 * held, (memtable.size_bytes, held)


def test_overwrites_are_accounted_where_they_live() -> None:
    memtable, held = _held_bytes(lambda: _filled(30_000, 100, False, 1 << 20, overwrite_every=3))
    assert 0.8 * held <= memtable.size_bytes <= 1.25 * held, (memtable.size_bytes, held)


def test_a_frozen_memtable_costs_less_than_half_of_a_dict() -> None:
    hot = _filled(20_000, 100, False, 1 << 40)
    frozen = _filled(20_000, 100, True, 1 << 40)
    payload = 20_000 * 116
    assert hot.size_bytes > 2.5 * payload  # what the dict costs: why the memtable is packed
    assert frozen.size_bytes < 1.3 * payload
    assert frozen.frozen_bytes == frozen.size_bytes


# --- equivalence with the dict memtable ----------------------------------------------------------


class DictMemtable:
    """The memtable before packing (a dict of the newest version per key): the reference."""

    def __init__(self) -> None:
        self.data: dict[bytes, tuple[int, int, bytes]] = {}

    def put(self, key: bytes, seq: int, kind: int, value: bytes) -> None:
        self.data[key] = (seq, kind, value)

    def get(self, key: bytes) -> tuple[int, int, bytes] | None:
        return self.data.get(key)

    def scan(self, start: bytes | None, end: bytes | None) -> list[Entry]:
        return [
            (k, *self.data[k])
            for k in sorted(self.data)
            if (start is None or k >= start) and (end is None or k < end)
        ]


# Variable lengths with shared prefixes, trailing zero bytes and 0xff (the run index pads with zeros),
# or all keys of one length (the index is then the keys themselves).
VARIABLE_KEYS = st.sampled_from(
    [b"a", b"a\x00", b"a\x00\x00", b"ab", b"\xff", b"\xff\x00", b"b" * 40]
) | st.binary(min_size=1, max_size=40)
FIXED_KEYS = st.binary(min_size=3, max_size=3)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.binary(max_size=30)),
        st.just(("delete", b"")),
        st.just(("merge", b"")),
        st.just(("check", b"")),
    ),
    min_size=1,
    max_size=120,
)


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(), fixed=st.booleans(), freeze=st.booleans(), hot_bytes=st.sampled_from([300, 1500, 1 << 30])
)
def test_packed_memtable_behaves_like_the_dict_memtable(
    data: st.DataObject, fixed: bool, freeze: bool, hot_bytes: int
) -> None:
    keys = FIXED_KEYS if fixed else VARIABLE_KEYS
    memtable, reference = Memtable(hot_bytes), DictMemtable()
    seq = 0
    for op, value in data.draw(OPS):
        if op in ("put", "delete"):
            seq += 1
            key = data.draw(keys)
            kind = KIND_VALUE if op == "put" else KIND_TOMBSTONE
            memtable.put(key, seq, kind, value)
            reference.put(key, seq, kind, value)
        elif op == "merge":
            memtable.merge_runs()
        else:
            _check_same(memtable, reference, data, keys)
    if freeze:
        memtable.freeze()
    _check_same(memtable, reference, data, keys)
    table = memtable.to_table()
    assert table.schema == SCHEMA
    assert list(zip(*(table.column(i).to_pylist() for i in range(4)), strict=True)) == reference.scan(
        None, None
    )
    _check_same(memtable, reference, data, keys)  # a frozen memtable keeps the merged table


def _check_same(
    memtable: Memtable, reference: DictMemtable, data: st.DataObject, keys: st.SearchStrategy[bytes]
) -> None:
    for key in [*reference.data, *data.draw(st.lists(keys, max_size=5))]:
        assert memtable.get(key) == reference.get(key), key
    assert list(memtable.scan()) == reference.scan(None, None)
    start, end = sorted(data.draw(st.lists(keys | st.none(), min_size=2, max_size=2)), key=lambda k: k or b"")
    assert list(memtable.scan(start, end)) == reference.scan(start, end)


def test_a_scan_is_a_snapshot_across_seals_and_merges() -> None:
    memtable = Memtable(hot_bytes=2000)
    for i in range(100):
        memtable.put(b"k%04d" % i, i + 1, KIND_VALUE, b"old")
    scan = memtable.scan(b"k0010", b"k0090")
    first = next(scan)
    for i in range(100):  # overwrites everything, sealing and merging runs meanwhile
        memtable.put(b"k%04d" % i, 1000 + i, KIND_VALUE, b"new")
        memtable.merge_runs()
    rest = list(scan)
    assert [first, *rest] == [(b"k%04d" % i, i + 1, KIND_VALUE, b"old") for i in range(10, 90)]
    assert all(value == b"new" for _, _, _, value in memtable.scan())


# --- the writer ----------------------------------------------------------------------------------

DB_LOGGER = "slate_ops.engine.flusher"  # the stall warning


def _stalls(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == DB_LOGGER and "stall:" in r.getMessage()]


def test_writes_wait_once_mutable_and_frozen_memtables_exceed_max_unflushed_bytes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    limit = 200_000
    options = quiet(
        l0_sst_size_bytes=50_000,
        l0_max_ssts=1,
        max_unflushed_bytes=limit,
        backpressure_timeout=timedelta(seconds=1),
        wal_flush_interval=timedelta(milliseconds=10),
    )
    caplog.set_level(logging.WARNING, logger=DB_LOGGER)
    db = Db.open("db", MemoryStore(), options)
    try:
        with pytest.raises(BackpressureTimeoutError, match="max_unflushed_bytes=200000"):
            for i in range(100_000):
                db.put(b"key%08d" % i, b"v" * 100)
                held = db.unflushed_bytes
                # a write waits once the limit is exceeded: at most one memtable's growth beyond it
                assert held <= limit + options.l0_sst_size_bytes
        assert db.frozen_memtables  # frozen memtables wait for L0, which holds l0_max_ssts SSTs
        assert len(_stalls(caplog)) == 1  # said once, although every further write waited
    finally:
        db.close()


def test_a_flush_stalled_on_a_full_l0_warns_at_once_naming_the_way_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    options = quiet(l0_max_ssts=2, backpressure_timeout=timedelta(minutes=5))
    caplog.set_level(logging.WARNING, logger=DB_LOGGER)
    db = Db.open("db", MemoryStore(), options)
    for i in range(2):
        db.put(b"k%d" % i, b"v")
        db.flush_memtable()
    assert not _stalls(caplog)  # L0 at the limit, but nothing waits yet
    db.put(b"k2", b"v")
    failures: list[BaseException] = []

    def flush() -> None:
        try:
            db.flush_memtable()  # waits for L0 room that no compactor makes
        except BaseException as error:
            failures.append(error)

    started = time.monotonic()
    waiting = threading.Thread(target=flush)
    waiting.start()
    while not _stalls(caplog) and time.monotonic() - started < 10:
        time.sleep(0.01)
    assert time.monotonic() - started < 5  # at once, not after backpressure_timeout (5 min)
    db.close()
    waiting.join(10)
    assert len(failures) == 1 and isinstance(failures[0], DbClosedError)

    (record,) = _stalls(caplog)
    message = record.getMessage()
    assert record.levelno == logging.WARNING
    assert "memory:///db" in message or "db" in message
    assert "L0 holds 2 SSTs (l0_max_ssts=2)" in message
    assert "slate-ops compact" in message and "compactor=" in message and "Dagster" in message
