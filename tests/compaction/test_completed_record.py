"""The "completed" record is written in the background (issue 23, item 4).

``run_once`` returns once its manifest commit is durable; the ``.compactions`` record saying
"completed" follows on another thread. These tests hold that record's PUT (or fail it) and check,
by the order of requests, that records stay in order (a compaction's "completed" lands before the
next compaction's "running"), that ``close()`` and ``wait_recorded()`` wait for it, and that a
failure to write it is logged, tried again and raised where it is waited for.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import TypeVar

import pytest

from slate_ops.admin import compact
from slate_ops.compaction import CompactionReport, CompactionsStore, Compactor
from slate_ops.errors import ObjectStoreError
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import ObjectStore, PutMode, PutResult
from tests.reliability.hooked_store import HookedStore
from tests.support.compaction import SMALL, fill

DB = "db"
_OVERWRITE = PutMode.overwrite()
WAIT_S = 10.0
_R = TypeVar("_R")


class Records(HookedStore):
    """A store that logs, in order, each ``.compactions`` write (the id and status of the record
    it adds) and each manifest write; it can hold the writes of "completed" records until
    released, or fail the next ``fail_completed`` of them."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.log: list[tuple[str, str]] = []  # ("manifest", key) | (record id, status)
        self.hold = threading.Event()
        self.hold.set()  # set: not holding
        self.held = threading.Event()  # a "completed" write is waiting for ``hold``
        self.fail_completed = 0
        self._lock = threading.Lock()

    def _call(self, op: str, key: str, call: Callable[[], _R]) -> _R:
        return call()  # every call but put passes through

    def put(self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None) -> PutResult:
        added = _added_record(data) if key.endswith(".compactions") else None
        if added is not None and added[1] == "completed":
            if not self.hold.is_set():
                self.held.set()
                assert self.hold.wait(WAIT_S)
            with self._lock:
                failing = self.fail_completed > 0
                self.fail_completed -= int(failing)
            if failing:
                raise ObjectStoreError(f"injected failure: put {key}")
        result = self.inner.put(key, data, mode, put_id)
        with self._lock:
            if added is not None:
                self.log.append(added)
            elif key.endswith(".manifest"):
                self.log.append(("manifest", key))
        return result

    def statuses(self, compaction_id: str) -> list[str]:
        with self._lock:
            return [status for id_, status in self.log if id_ == compaction_id]


def _added_record(data: bytes) -> tuple[str, str] | None:
    """The id and status of the record a ``.compactions`` write adds (the last one, see
    ``CompactionsStore.record``); None for a claim of an empty namespace."""
    records = json.loads(data)["compactions"]
    return (records[-1]["id"], records[-1]["status"]) if records else None


def status_of(store: ObjectStore, compaction_id: str) -> str:
    return next(r.status for r in CompactionsStore(store, DB).read().compactions if r.id == compaction_id)


def test_run_once_returns_after_the_commit_and_the_completed_record_lands_before_the_next_running() -> None:
    store = Records(MemoryStore("order"))
    fill(store, flushes=2)
    compactor = Compactor(DB, store, SMALL)
    store.hold.clear()
    first = compactor.run_once()
    # run_once returned with its "completed" record still held: the commit is durable, the
    # record not yet.
    assert first is not None and store.held.wait(WAIT_S)
    assert ManifestStore(store, DB).read_latest_required().id == first.manifest_id
    assert status_of(store, str(first.id)) == "running"
    fill(store, flushes=2)  # work for a second compaction
    second: list[CompactionReport | None] = []
    runner = threading.Thread(target=lambda: second.append(compactor.run_once()))
    runner.start()
    runner.join(0.3)
    assert runner.is_alive()  # waiting for the first record before writing its own
    assert [r for r in store.log if r[0] != "manifest"][-1] == (str(first.id), "running")
    store.hold.set()
    runner.join(WAIT_S)
    compactor.close()
    assert len(second) == 1 and second[0] is not None
    second_id = str(second[0].id)
    records = [(id_, status) for id_, status in store.log if id_ != "manifest"]
    first_id = str(first.id)
    assert records == [
        (first_id, "running"),
        (first_id, "completed"),
        (second_id, "running"),
        (second_id, "completed"),
    ]
    # each "completed" record lands after its commit
    commits = [i for i, (id_, _) in enumerate(store.log) if id_ == "manifest"]
    assert store.log.index((first_id, "completed")) > commits[-2]  # the first compaction's commit
    assert store.log.index((second_id, "completed")) > commits[-1]


def test_close_waits_for_the_completed_record() -> None:
    store = Records(MemoryStore("close"))
    fill(store, flushes=2)
    compactor = Compactor(DB, store, SMALL)
    store.hold.clear()
    report = compactor.run_once()
    assert report is not None and store.held.wait(WAIT_S)
    closer = threading.Thread(target=compactor.close)
    closer.start()
    closer.join(0.3)
    assert closer.is_alive()
    store.hold.set()
    closer.join(WAIT_S)
    assert not closer.is_alive()
    assert store.statuses(str(report.id)) == ["running", "completed"]
    assert status_of(store, str(report.id)) == "completed"


def test_a_failed_completed_record_is_logged_tried_again_and_raised_where_it_is_waited_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Records(MemoryStore("fail"))
    fill(store, flushes=2)
    compactor = Compactor(DB, store, SMALL)
    store.fail_completed = 2  # the background write and wait_recorded's retry
    with caplog.at_level(logging.WARNING, logger="slate_ops.compaction.compactor"):
        report = compactor.run_once()  # the commit is durable: the report is returned
        assert report is not None
        with pytest.raises(ObjectStoreError, match="injected failure"):
            compactor.wait_recorded()
    assert ManifestStore(store, DB).read_latest_required().id == report.manifest_id
    assert any('its "completed" record could not be written' in r.message for r in caplog.records)
    assert status_of(store, str(report.id)) == "running"
    compactor.close()  # tries once more: it lands
    assert status_of(store, str(report.id)) == "completed"


def test_the_next_run_once_writes_a_failed_completed_record_before_its_own() -> None:
    store = Records(MemoryStore("heal"))
    fill(store, flushes=2)
    compactor = Compactor(DB, store, SMALL)
    store.fail_completed = 1
    first = compactor.run_once()
    fill(store, flushes=2)
    second = compactor.run_once()
    compactor.close()
    assert first is not None and second is not None
    records = [(id_, status) for id_, status in store.log if id_ != "manifest"]
    assert records == [
        (str(first.id), "running"),
        (str(first.id), "completed"),
        (str(second.id), "running"),
        (str(second.id), "completed"),
    ]


def test_admin_compact_raises_a_completed_record_it_could_not_write() -> None:
    store = Records(MemoryStore("admin"))
    fill(store, flushes=2)
    store.fail_completed = 2
    before = ManifestStore(store, DB).read_latest_required().id
    with pytest.raises(ObjectStoreError, match="injected failure"):
        compact(DB, store, options=SMALL)
    assert ManifestStore(store, DB).read_latest_required().id > before  # committed all the same
