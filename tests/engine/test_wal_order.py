"""The order of WAL PUTs and acknowledgements (docs/design/engine.md, "Several WAL PUTs in flight").

Up to ``wal_puts_in_flight`` WAL PUTs overlap (one with 1: WAL ``N`` created only once ``N - 1``
exists, today's order), never one at an id ``>=`` the first unacknowledged WAL SST's
``+ WAL_FENCE_WINDOW``, and a write is acknowledged only once its WAL SST and every earlier one have
landed and a confirmation that started after them ended. Gated tests park one WAL PUT while the next
lands: nothing is acknowledged past the parked one; a newer opener, a window fence at the writer's id
and a store error on the parked PUT each resolve as the protocol says.
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
from pydantic import ValidationError

from slate_ops import Db, DbOptions
from slate_ops.engine.wal_fence import WAL_FENCE_WINDOW, WINDOW_FENCE, WalObjectKind, wal_object_kind
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import DbDeletedError, FencedError, ObjectNotFoundError, ObjectStoreError
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
            # The opener's fence, then the writer's first WAL SST (which rule 3 may start up to
            # WAL_FENCE_WINDOW ids after that fence): from the next one on, each follows the one before.
            follows = self.wal_puts > 2
            if self.in_flight:
                self.overlapping.append((wal_id, set(self.in_flight)))
            self.in_flight.add(wal_id)
        try:
            if follows and not self._exists(wal_id - 1):
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


def test_one_wal_put_in_flight_creates_wal_ssts_one_at_a_time_in_id_order() -> None:
    """``wal_puts_in_flight=1`` keeps today's order under concurrent durable writers."""
    memory = MemoryStore()
    store = WalOrderCheckingStore(memory, "db")
    db = Db.open("db", store, quiet(wal_flush_interval=timedelta(milliseconds=5), wal_puts_in_flight=1))
    _durable_writers(db)
    assert store.wal_puts > 2, "the writers never wrote the WAL"
    assert store.overlapping == [], f"WAL PUTs overlapped: {store.overlapping[:5]}"
    assert store.after_gap == [], f"WAL SSTs created while the one before did not exist: {store.after_gap}"
    with Db.open("db", memory, quiet()) as reopened:
        for n in range(WRITERS):
            assert [reopened.get(b"w%d-%03d" % (n, i)) for i in range(PUTS_EACH)] == [b"v"] * PUTS_EACH


@pytest.mark.parametrize("in_flight", [2, 4])
def test_several_wal_puts_overlap_up_to_the_option(in_flight: int) -> None:
    memory = MemoryStore()
    store = WalOrderCheckingStore(memory, "db")
    db = Db.open(
        "db", store, quiet(wal_flush_interval=timedelta(milliseconds=5), wal_puts_in_flight=in_flight)
    )
    _durable_writers(db)
    most = max((len(others) + 1 for _, others in store.overlapping), default=1)
    assert most > 1, "no two WAL PUTs ever overlapped: nothing was pipelined"
    assert most <= in_flight, f"{most} WAL PUTs in flight at once, more than wal_puts_in_flight={in_flight}"
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


@pytest.mark.parametrize("in_flight", [1, 4])
def test_every_durable_write_is_acknowledged_after_a_confirmation_that_started_after_its_wal_prefix(
    in_flight: int,
) -> None:
    """Eight durable writers: the WAL PUTs of each acknowledged write's WAL SST and of every earlier one
    ended before some manifest confirmation started, and that confirmation ended before the put
    returned; confirmations do overlap a later WAL PUT (the flusher does not wait for them); with one
    PUT in flight, WAL PUTs never overlap one another."""
    memory = MemoryStore()
    store = EventLog(memory, "db")
    db = Db.open(
        "db", store, quiet(wal_flush_interval=timedelta(milliseconds=5), wal_puts_in_flight=in_flight)
    )
    _durable_writers(db, on_ack=store.acked)

    wal = WalStore(memory, "db")
    wal_of = {key.decode(): wal_id for wal_id in wal.list_ids() for key, _, _, _ in wal.read(wal_id)}
    puts = store.spans("put")
    put_end = {int(wal_id): end for _, end, wal_id in puts}
    lists = store.spans("list")
    if in_flight == 1:
        assert all(a[1] < b[0] for a, b in itertools.pairwise(puts)), "two WAL PUTs overlapped"
    acks = [event for event in store.events if event.kind == "ack"]
    assert len(acks) == WRITERS * PUTS_EACH
    for ack in acks:
        written = max(end for wal_id, end in put_end.items() if wal_id <= wal_of[ack.detail])
        confirming = [(start, end) for start, end, _ in lists if start > written and end < ack.index]
        assert confirming, (
            f"{ack.detail} (WAL {wal_of[ack.detail]}, PUTs up to it ended at step {written}) was "
            f"acknowledged at step {ack.index} without a manifest confirmation that started after its "
            "WAL prefix landed"
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

    @property
    def armed(self) -> bool:
        return self._armed

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


# --- several PUTs in flight: PUT N parked while N + 1 lands -------------------------------------------

PIPELINED = quiet(wal_puts_in_flight=2)


class ParkedPut(HookedStore):
    """Parks, when armed, the next WAL PUT until released; then runs it, or raises ``fail`` instead."""

    def __init__(self, inner: ObjectStore, db_path: str) -> None:
        super().__init__(inner)
        self.db_path = db_path
        self.gate = Gate()
        self.fail: Exception | None = None
        self.puts: list[int] = []  # WAL ids of every WAL PUT, in start order
        self._lock = threading.Lock()

    def _call(self, op: str, key: str, call: Callable[[], _R]) -> _R:
        wal_id = parse_wal_key(self.db_path, key) if op == "put" else None
        if wal_id is None:
            return call()
        with self._lock:
            self.puts.append(wal_id)
            armed = self.gate.armed
        self.gate.pass_through()
        if armed and self.fail is not None:
            raise self.fail
        return call()


def _exists(store: ObjectStore, wal_id: int) -> bool:
    try:
        store.head(wal_key("db", wal_id))
    except ObjectNotFoundError:
        return False
    return True


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def _n_parked_n_plus_1_landed(
    memory: MemoryStore,
    store: ParkedPut,
    outcomes: dict[bytes, BaseException | None],
    options: DbOptions = PIPELINED,
    through: ObjectStore | None = None,
) -> tuple[Db, int, list[threading.Thread]]:
    """A pipelined writer (on ``store``, or on ``through`` wrapping it) whose WAL PUT ``N`` (``k1``) is
    parked while ``N + 1`` (``k2``) has landed."""
    db = Db.open("db", through or store, options)
    first_id = db.next_wal_id
    store.gate.arm()
    threads = [_durable_put(db, b"k1", outcomes)]
    assert store.gate.parked.wait(30), "WAL PUT N never started"
    threads.append(_durable_put(db, b"k2", outcomes))
    _wait_for(lambda: _exists(memory, first_id + 1), "WAL N + 1 to land while N is parked")
    return db, first_id, threads


def test_nothing_past_a_parked_wal_put_is_acknowledged_until_it_lands_and_a_confirmation_follows() -> None:
    memory = MemoryStore()
    store = ParkedPut(memory, "db")
    log_ = EventLog(store, "db")
    outcomes: dict[bytes, BaseException | None] = {}
    db, first_id, threads = _n_parked_n_plus_1_landed(memory, store, outcomes, through=log_)
    time.sleep(0.3)  # time enough for a wrong writer to confirm and acknowledge N + 1
    assert db.durable_seq == 0, "a write past the parked WAL PUT was acknowledged"
    assert outcomes == {}, f"a durable put returned while WAL N was parked: {outcomes}"
    store.gate.release()
    for thread in threads:
        thread.join(30)
    assert outcomes == {b"k1": None, b"k2": None}
    n_landed = next(end for start, end, wal_id in log_.spans("put") if wal_id == str(first_id))
    lists = log_.spans("list")
    assert any(start > n_landed for start, _, _ in lists), "no confirmation started after WAL N landed"
    first_ack = min(i for i, e in enumerate(log_.events) if e.kind == "list-end" and e.index > n_landed)
    assert db.durable_seq == 2 and first_ack > n_landed
    db.close()
    with Db.open("db", memory, quiet()) as reopened:
        assert (reopened.get(b"k1"), reopened.get(b"k2")) == (b"v", b"v")


def test_a_newer_opener_while_a_wal_put_is_parked_fails_both_writes_and_acknowledges_neither() -> None:
    memory = MemoryStore()
    store = ParkedPut(memory, "db")
    outcomes: dict[bytes, BaseException | None] = {}
    with quiet_logs():
        db, first_id, threads = _n_parked_n_plus_1_landed(memory, store, outcomes)
        newer = Db.open("db", memory, quiet())  # claims epoch 2 and fences the WAL
        store.gate.release()  # WAL N: taken by the fence (rule 3), or lands and the confirmation sees epoch 2
        for thread in threads:
            thread.join(30)
        assert {key: type(error) for key, error in outcomes.items()} == {
            b"k1": FencedError,
            b"k2": FencedError,
        }
        assert db.durable_seq == 0
        with pytest.raises(FencedError):
            db.close()
    assert newer.get(b"k1") is None  # WAL N did not exist when the newer writer fenced
    if memory.head(wal_key("db", first_id)).size == len(WINDOW_FENCE):
        # Rule 3: the opener's window fence at N covers N + 1, which is never replayed.
        assert newer.get(b"k2") is None
    newer.close()


def _chain(store: ObjectStore, after: int) -> list[bytes]:
    """The keys of the WAL read as a chain from ``after + 1`` (rule 1 of "Several WAL PUTs in
    flight"): data is applied, a legacy fence stepped over, a window fence jumps ``WAL_FENCE_WINDOW``
    ids, the first missing id ends it."""
    wal = WalStore(store, "db")
    sizes = dict(wal.list_sizes(after))
    keys: list[bytes] = []
    wal_id = after + 1
    while wal_id in sizes:
        kind = wal_object_kind(sizes[wal_id])
        if kind is WalObjectKind.WINDOW_FENCE:
            wal_id += WAL_FENCE_WINDOW
            continue
        keys += [key for key, _, _, _ in wal.read(wal_id)]
        wal_id += 1
    return keys


def test_a_window_fence_at_the_writers_id_reissues_its_wal_after_the_window() -> None:
    """A lower-epoch opener's window fence lands at WAL N while N is parked and N + 1 has landed: both
    segments are written again from N + WAL_FENCE_WINDOW and acknowledged; the chain holds each write
    once (N + 1's first copy is an orphan inside the window)."""
    memory = MemoryStore()
    store = ParkedPut(memory, "db")
    outcomes: dict[bytes, BaseException | None] = {}
    with quiet_logs():
        db, first_id, threads = _n_parked_n_plus_1_landed(memory, store, outcomes)
        memory.put(wal_key("db", first_id), WINDOW_FENCE, PutMode.create())
        store.gate.release()
        for thread in threads:
            thread.join(30)
    assert outcomes == {b"k1": None, b"k2": None}
    assert db.durable_seq == 2
    assert sorted({wal_id for wal_id in store.puts if wal_id >= first_id}) == [
        first_id,
        first_id + 1,
        first_id + WAL_FENCE_WINDOW,
        first_id + WAL_FENCE_WINDOW + 1,
    ]
    db.put(b"k3", b"v", await_durable=True)
    replay_after = db.manifest.replay_after_wal_id
    db.close()
    assert sorted(_chain(memory, replay_after)) == [b"k1", b"k2", b"k3"]


def test_a_store_error_on_a_parked_wal_put_retries_it_at_the_same_ids_without_duplicates() -> None:
    memory = MemoryStore()
    store = ParkedPut(memory, "db")
    store.fail = ObjectStoreError("injected: the PUT of WAL N failed")
    outcomes: dict[bytes, BaseException | None] = {}
    with quiet_logs():
        # The flusher retries a failed WAL write at its next tick, as with one PUT in flight.
        retrying = PIPELINED.model_copy(update={"wal_flush_interval": timedelta(milliseconds=20)})
        db, first_id, threads = _n_parked_n_plus_1_landed(memory, store, outcomes, retrying)
        store.gate.release()
        for thread in threads:
            thread.join(30)
    assert outcomes == {b"k1": None, b"k2": None}
    wal = WalStore(memory, "db")
    written = {wal_id: [key for key, _, _, _ in wal.read(wal_id)] for wal_id in wal.list_ids(first_id - 1)}
    assert written == {first_id: [b"k1"], first_id + 1: [b"k2"]}, "retried at other ids, or duplicated"
    db.close()
    with Db.open("db", memory, quiet()) as reopened:
        assert (reopened.get(b"k1"), reopened.get(b"k2")) == (b"v", b"v")


def test_a_writer_never_starts_a_wal_put_beyond_its_reach() -> None:
    """Confirmations held back: the writer's WAL PUTs stop at its first unacknowledged WAL SST's id +
    WAL_FENCE_WINDOW, until it confirms in the flusher's thread (rule 2)."""
    memory = MemoryStore()
    held = threading.Event()

    class HeldConfirmations(HookedStore):
        def __init__(self) -> None:
            super().__init__(memory)
            self.db: Db | None = None
            self.starts: list[tuple[int, int]] = []  # (WAL id, durable_seq) at each WAL PUT's start

        def _call(self, op: str, key: str, call: Callable[[], _R]) -> _R:
            wal_id = parse_wal_key("db", key) if op == "put" else None
            if wal_id is not None and self.db is not None:
                self.starts.append((wal_id, self.db.durable_seq))
            if op == "list" and threading.current_thread().name.startswith("slate-ops-confirmer"):
                held.wait(30)
            return call()

    store = HeldConfirmations()
    db = Db.open(
        "db", store, quiet(wal_flush_interval=timedelta(milliseconds=2), wal_puts_in_flight=WAL_FENCE_WINDOW)
    )
    store.db = db
    for i in range(3 * WAL_FENCE_WINDOW):
        db.put(b"k%03d" % i, b"v")
        _wait_for(lambda n=i: len(store.starts) > n, "its WAL PUT")  # type: ignore[misc]
    held.set()
    db.close()
    wal = WalStore(memory, "db")
    last_seq = {wal_id: max(seq for _, seq, _, _ in wal.read(wal_id)) for wal_id, _ in store.starts}
    assert max(wal_id for wal_id, _ in store.starts) >= store.starts[0][0] + WAL_FENCE_WINDOW
    for wal_id, durable in store.starts:
        first_unacknowledged = min(w for w, seq in last_seq.items() if seq > durable)
        assert wal_id < first_unacknowledged + WAL_FENCE_WINDOW, (wal_id, durable, first_unacknowledged)


@pytest.mark.parametrize("value", [0, WAL_FENCE_WINDOW + 1])
def test_wal_puts_in_flight_is_bounded_by_the_fence_window(value: int) -> None:
    with pytest.raises(ValidationError, match="wal_puts_in_flight"):
        DbOptions(wal_puts_in_flight=value)
    assert DbOptions(wal_puts_in_flight=WAL_FENCE_WINDOW).wal_puts_in_flight == WAL_FENCE_WINDOW
