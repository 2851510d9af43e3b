"""WAL SSTs appear in id order: WAL ``N`` is created only once WAL ``N - 1`` exists.

Openers fence above every WAL id they list and replay everything listed below the fence, so a WAL
``N + 1`` visible while ``N`` is still in flight would let an opener replay a write after a gap — why
one WAL PUT is in flight at a time (docs/design/engine.md, "One WAL PUT in flight"). Checked on every
WAL PUT under concurrent durable writers, with the PUTs slowed down so a second one would overlap.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

import pytest

from slate_ops import Db
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import DbDeletedError, FencedError, ObjectNotFoundError
from slate_ops.layout import MANIFEST_DIR, parse_wal_key, wal_key
from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import GetResult, ObjectMeta, ObjectStore, PutMode, PutResult
from tests.reliability.hooked_store import HookedStore
from tests.support.engine import quiet

_R = TypeVar("_R")

WRITERS = 8
PUTS_EACH = 12
PUT_DELAY_S = 0.01


@contextlib.contextmanager
def quiet_logs() -> Iterator[None]:
    """The fenced writer logs its fence (by design); not worth showing here."""
    logger = logging.getLogger("slate_ops")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


class WalOrderCheckingStore:
    """Slows WAL PUTs down and records every WAL PUT made while another was in flight, or made
    while the WAL id before it did not exist."""

    def __init__(self, inner: ObjectStore, db_path: str) -> None:
        self.inner = inner
        self.db_path = db_path
        self._lock = threading.Lock()
        self.in_flight: set[int] = set()
        self.overlapping: list[tuple[int, set[int]]] = []
        self.after_gap: list[int] = []
        self.wal_puts = 0

    @property
    def url(self) -> str:
        return self.inner.url

    def put(self, key: str, data: bytes, mode: PutMode | None = None, put_id: str | None = None) -> PutResult:
        wal_id = parse_wal_key(self.db_path, key)
        if wal_id is None:
            return self.inner.put(key, data, mode or PutMode.overwrite(), put_id)
        with self._lock:
            self.wal_puts += 1
            if self.in_flight:
                self.overlapping.append((wal_id, set(self.in_flight)))
            self.in_flight.add(wal_id)
        try:
            if wal_id > 1 and not self._exists(wal_id - 1):
                self.after_gap.append(wal_id)
            time.sleep(PUT_DELAY_S)
            return self.inner.put(key, data, mode or PutMode.overwrite(), put_id)
        finally:
            with self._lock:
                self.in_flight.discard(wal_id)

    def _exists(self, wal_id: int) -> bool:
        try:
            self.inner.head(wal_key(self.db_path, wal_id))
        except ObjectNotFoundError:
            return False
        return True

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        return self.inner.get(key, byte_range)

    def head(self, key: str) -> ObjectMeta:
        return self.inner.head(key)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        return self.inner.list(prefix, start_after)

    def delete(self, key: str) -> None:
        self.inner.delete(key)


def _durable_writers(db: Db, on_ack: Callable[[bytes], None] = lambda key: None) -> None:
    """:data:`WRITERS` threads each put :data:`PUTS_EACH` keys ``w<n>-<i>`` with ``await_durable``
    (``on_ack`` after each put returns); then close ``db``. Fails if any put raised."""
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(PUTS_EACH):
                key = b"w%d-%03d" % (n, i)
                db.put(key, b"v", await_durable=True)
                on_ack(key)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    db.close()
    assert errors == []


def test_concurrent_durable_writers_create_wal_ssts_one_at_a_time_in_id_order() -> None:
    memory = MemoryStore()
    store = WalOrderCheckingStore(memory, "db")
    db = Db.open("db", store, quiet(wal_flush_interval=timedelta(milliseconds=5)))
    _durable_writers(db)
    assert store.wal_puts > 2, "the writers never wrote the WAL"
    assert store.overlapping == [], f"WAL PUTs overlapped: {store.overlapping[:5]}"
    assert store.after_gap == [], f"WAL SSTs created while the one before did not exist: {store.after_gap}"
    with Db.open("db", memory, quiet()) as reopened:
        for n in range(WRITERS):
            assert [reopened.get(b"w%d-%03d" % (n, i)) for i in range(PUTS_EACH)] == [b"v"] * PUTS_EACH


# --- acknowledgement: a confirmation that started after the WAL PUT (docs/design/coordination.md, rule 3) ---

LIST_DELAY_S = 0.01


@dataclass(frozen=True)
class Event:
    """One step recorded by :class:`EventLog`, numbered in the order the steps happened."""

    index: int
    kind: str  # "put-start", "put-end" (WAL PUTs), "list-start", "list-end" (manifest LISTs), "ack"
    detail: str  # the WAL id, the LIST's prefix, or the acknowledged key
    thread: str


class EventLog(HookedStore):
    """Records, in one order, the start and end of every WAL PUT and manifest LIST (each slowed down so
    that they can overlap) and, through :meth:`acked`, each durable put that returned."""

    def __init__(self, inner: ObjectStore, db_path: str) -> None:
        super().__init__(inner)
        self.db_path = db_path
        self._lock = threading.Lock()
        self.events: list[Event] = []

    def _record(self, kind: str, detail: str) -> None:
        with self._lock:
            self.events.append(Event(len(self.events), kind, detail, threading.current_thread().name))

    def acked(self, key: bytes) -> None:
        self._record("ack", key.decode())

    def _call(self, op: str, key: str, call: Callable[[], _R]) -> _R:
        wal_id = parse_wal_key(self.db_path, key)
        if op == "put" and wal_id is not None:
            kind, detail, delay = "put", str(wal_id), PUT_DELAY_S
        elif op == "list" and key.startswith(f"{self.db_path}/{MANIFEST_DIR}/"):
            kind, detail, delay = "list", key, LIST_DELAY_S
        else:
            return call()
        self._record(f"{kind}-start", detail)
        try:
            time.sleep(delay)
            return call()
        finally:
            self._record(f"{kind}-end", detail)

    def spans(self, kind: str) -> list[tuple[int, int, str]]:
        """``(start index, end index, detail)`` of each call of ``kind`` ("put", "list"), in start order."""
        open_: dict[tuple[str, str], int] = {}
        found = []
        for event in self.events:
            if event.kind == f"{kind}-start":
                open_[(event.detail, event.thread)] = event.index
            elif event.kind == f"{kind}-end":
                found.append((open_.pop((event.detail, event.thread)), event.index, event.detail))
        return sorted(found)


def test_every_durable_write_is_acknowledged_after_a_confirmation_that_started_after_its_wal_put() -> None:
    """Eight durable writers: WAL PUTs never overlap one another; each acknowledged write's WAL PUT
    ended before some manifest confirmation started, and that confirmation ended before the put
    returned; and confirmations do overlap the next WAL PUT (the flusher does not wait for them)."""
    memory = MemoryStore()
    store = EventLog(memory, "db")
    db = Db.open("db", store, quiet(wal_flush_interval=timedelta(milliseconds=5)))
    _durable_writers(db, on_ack=store.acked)

    wal = WalStore(memory, "db")
    wal_of = {key.decode(): wal_id for wal_id in wal.list_ids() for key, _, _, _ in wal.read(wal_id)}
    puts = store.spans("put")
    put_end = {int(wal_id): end for _, end, wal_id in puts}
    lists = store.spans("list")
    assert all(a[1] < b[0] for a, b in itertools.pairwise(puts)), "two WAL PUTs overlapped"
    acks = [event for event in store.events if event.kind == "ack"]
    assert len(acks) == WRITERS * PUTS_EACH
    for ack in acks:
        written = put_end[wal_of[ack.detail]]
        confirming = [(start, end) for start, end, _ in lists if start > written and end < ack.index]
        assert confirming, (
            f"{ack.detail} (WAL {wal_of[ack.detail]}, PUT ended at step {written}) was acknowledged at step "
            f"{ack.index} without a manifest confirmation that started after its WAL PUT ended"
        )
    overlapped = [(s, e) for s, e, _ in lists if any(ps < e and s < pe for ps, pe, _ in puts)]
    assert overlapped, "no confirmation ran while the next WAL PUT was in flight: the flusher waited for it"


class Gates(HookedStore):
    """Parks, when armed, the next manifest LIST of the writer's confirmer thread and the next WAL PUT,
    each until released."""

    def __init__(self, inner: ObjectStore, db_path: str) -> None:
        super().__init__(inner)
        self.db_path = db_path
        self.confirmation = Gate()
        self.wal_put = Gate()

    def _call(self, op: str, key: str, call: Callable[[], _R]) -> _R:
        if op == "list" and threading.current_thread().name.startswith("slate-ops-confirmer"):
            self.confirmation.pass_through()
        elif op == "put" and parse_wal_key(self.db_path, key) is not None:
            self.wal_put.pass_through()
        return call()


class Gate:
    """Armed: the next caller parks (``parked`` is set) until :meth:`release`; then it is disarmed."""

    def __init__(self) -> None:
        self._armed = False
        self._lock = threading.Lock()
        self.parked = threading.Event()
        self._go = threading.Event()

    def arm(self) -> None:
        self._armed = True

    def release(self) -> None:
        self._go.set()

    def pass_through(self) -> None:
        with self._lock:
            armed, self._armed = self._armed, False
        if armed:
            self.parked.set()
            assert self._go.wait(30), "the gate was never released"


def _durable_put(db: Db, key: bytes, outcomes: dict[bytes, BaseException | None]) -> threading.Thread:
    def put() -> None:
        try:
            db.put(key, b"v", await_durable=True)
            outcomes[key] = None
        except BaseException as error:
            outcomes[key] = error

    thread = threading.Thread(target=put)
    thread.start()
    return thread


def _round_k_confirming_round_k_plus_1_in_flight(
    store: Gates, outcomes: dict[bytes, BaseException | None]
) -> tuple[Db, list[threading.Thread]]:
    """A writer whose round ``k`` (``k1``) is written and its confirmation parked, while round ``k + 1``'s
    WAL PUT (``k2``) is parked in flight."""
    db = Db.open("db", store, quiet())
    store.confirmation.arm()
    first = _durable_put(db, b"k1", outcomes)
    assert store.confirmation.parked.wait(30), "round k's confirmation never started"
    store.wal_put.arm()
    second = _durable_put(db, b"k2", outcomes)
    assert store.wal_put.parked.wait(30), "round k + 1's WAL PUT never started while round k was confirmed"
    return db, [first, second]


def test_a_confirmation_finding_a_newer_writer_fails_both_rounds_and_acknowledges_neither() -> None:
    memory = MemoryStore()
    store = Gates(memory, "db")
    outcomes: dict[bytes, BaseException | None] = {}
    with quiet_logs():
        db, threads = _round_k_confirming_round_k_plus_1_in_flight(store, outcomes)
        newer = Db.open("db", memory, quiet())  # claims epoch 2, fences the WAL at round k + 1's id
        store.confirmation.release()  # round k's confirmation sees epoch 2
        for thread in threads:
            thread.join(30)
        assert {key: type(error) for key, error in outcomes.items()} == {
            b"k1": FencedError,
            b"k2": FencedError,
        }
        assert db.durable_seq == 0, "a round was acknowledged after the confirmation found the fence"
        store.wal_put.release()  # round k + 1's PUT, still in flight, now finds the newer writer's fence
        with pytest.raises(FencedError):
            db.close()
        assert db.durable_seq == 0
    # Round k's WAL SST existed before the newer writer fenced: replayed, though never acknowledged.
    assert newer.get(b"k1") == b"v"
    assert newer.get(b"k2") is None
    newer.close()


def test_a_wal_put_in_flight_when_a_confirmation_finds_the_database_deleted_is_withdrawn() -> None:
    memory = MemoryStore()
    store = Gates(memory, "db")
    outcomes: dict[bytes, BaseException | None] = {}
    with quiet_logs():
        db, threads = _round_k_confirming_round_k_plus_1_in_flight(store, outcomes)
        for meta in list(memory.list("db/")):  # deleted by hand: no tombstone
            memory.delete(meta.key)
        store.confirmation.release()  # DbDeletedError: round k's WAL SST is withdrawn
        for thread in threads:
            thread.join(30)
        assert {key: type(error) for key, error in outcomes.items()} == {
            b"k1": DbDeletedError,
            b"k2": DbDeletedError,
        }
        store.wal_put.release()  # round k + 1's PUT lands in the deleted database...
        with pytest.raises(DbDeletedError):
            db.close()
    assert db.durable_seq == 0
    leftovers = [meta.key for meta in memory.list("db/")]
    assert leftovers == [], f"WAL SSTs left in the deleted database: {leftovers}"  # ... and is withdrawn
