"""Readers and scans see consistent states while the writer keeps writing and flushing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta

from slate_ops import Db, DbReader, ReaderOptions, WriteBatch
from slate_ops.objstore.base import ObjectStore
from tests.support.engine import QUIET_READER, quiet

KEYS = (b"x", b"y", b"z")


def batch(i: int) -> WriteBatch:
    b = WriteBatch()
    for key in KEYS:
        b.put(key, b"%06d" % i)
    return b


def slowly(scan: Iterator[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    """Consume a scan with pauses, so the writer commits batches in the middle of it."""
    rows = {}
    for key, value in scan:
        rows[key] = value
        time.sleep(0.002)
    return rows


def snapshot_value(rows: dict[bytes, bytes]) -> int:
    values = {rows.get(k) for k in KEYS}
    assert len(values) == 1, f"a scan saw part of a batch: {rows}"
    (value,) = values
    return -1 if value is None else int(value)


def test_scans_see_whole_batches_and_never_go_back(engine_store: ObjectStore) -> None:
    options = quiet(l0_sst_size_bytes=2048, l0_max_ssts=10_000, wal_flush_interval=timedelta(milliseconds=5))
    db = Db.open("db", engine_store, options)
    db.write(batch(0))
    db.flush()
    checkpoint = db.create_checkpoint()
    stop = threading.Event()
    written = [0]

    def writer() -> None:
        i = 1
        while not stop.is_set():
            db.write(batch(i))
            written[0] = i
            if i % 25 == 0:
                db.flush_memtable()
            i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    reader = DbReader.open("db", engine_store, options=QUIET_READER)
    fixed = DbReader.open("db", engine_store, checkpoint.id, ReaderOptions())
    try:
        last_writer_view = last_reader_view = -1
        rounds = 0
        deadline = time.monotonic() + 60
        while (written[0] < 120 or rounds < 30) and time.monotonic() < deadline:
            rounds += 1
            seen = snapshot_value(slowly(db.scan()))
            assert seen >= last_writer_view
            last_writer_view = seen
            reader.poll()
            seen = snapshot_value(slowly(reader.scan()))
            assert seen >= last_reader_view
            last_reader_view = seen
            assert snapshot_value(dict(fixed.scan())) == 0
    finally:
        stop.set()
        thread.join()
    assert written[0] >= 120 and last_writer_view > 25 and last_reader_view > 25
    reader.poll()
    db.flush()
    reader.poll()
    assert snapshot_value(dict(reader.scan())) == written[0]
    reader.close()
    fixed.close()
    db.close()
