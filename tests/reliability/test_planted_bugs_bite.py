"""Deterministic proof for the bugs the CI-sized simulation and sweep caught only by chance (issue 12).

Each test pins one promise down with a fixed sequence of calls — no seeds, no thread timing on the
path that decides the verdict — so the planted bug of the same name in
``tests/reliability/mutations.py`` fails it on every run:

* ``ack-before-wal-write``: a write counts as durable only once its WAL SST exists. The sweep
  caught the planted bug at 2 of its crash points, when the flusher's timing allowed (3-4 runs in
  5), because an ``await_durable`` caller wakes on another thread.
* ``drop-segment-on-failed-write``: a WAL write that fails once and then succeeds leaves every
  acknowledged write readable after a crash. Only 1 of 5 simulation seeds caught it: the sweep
  never retries inside a process.
* ``l0-compaction-drops-tombstones``: an L0 compaction over older sorted runs keeps the tombstones
  that hide their values (1 of 5 seeds).
* ``wal-walk-ignores-gaps``, ``wal-walk-reads-window``: no opener replays a fenced writer's WAL PUTs
  that landed past its first missing one, nor inside a window fence (issue 23).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

from slate_ops import Db, DbReader, admin
from slate_ops.admin.clone import FINAL_CHECKPOINT_PREFIX
from slate_ops.admin.reachability import check_references
from slate_ops.compaction import Compactor, CompactorOptions
from slate_ops.engine.batch import KIND_VALUE
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import (
    CheckpointProtectedError,
    DbNotFoundError,
    FencedError,
    ObjectStoreError,
    SlateOpsError,
)
from slate_ops.gc import GarbageCollector, GcOptions
from slate_ops.manifest.model import Checkpoint
from slate_ops.manifest.store import WRITER_EPOCH, ManifestStore
from slate_ops.objstore import FaultInjectingStore, MemoryStore
from slate_ops.objstore.base import GetResult, ObjectMeta, ObjectStore, PutMode, PutResult
from slate_ops.runtime import ManualRuntime
from slate_ops.sst import entries_to_table
from tests.support.engine import quiet, simulate_crash

WAL = "db/wal/"
OPTIONS = quiet(l0_max_ssts=1000)


@pytest.fixture
def store() -> FaultInjectingStore:
    return FaultInjectingStore(MemoryStore())


@pytest.fixture
def db(store: FaultInjectingStore) -> Iterator[Db]:
    opened = Db.open("db", store, OPTIONS)
    yield opened
    simulate_crash(opened)


def recovered(store: FaultInjectingStore) -> dict[bytes, bytes]:
    """What a writer opened after a crash reads (it replays the WAL)."""
    with Db.open("db", store.inner, OPTIONS) as reopened:
        return dict(reopened.scan())


# --- ack-before-wal-write -----------------------------------------------------------------------


def test_a_durable_write_is_not_acknowledged_while_its_wal_write_is_in_flight(
    store: FaultInjectingStore, db: Db
) -> None:
    """Park the WAL put of a ``put(await_durable=True)`` and look while it is parked: the caller is
    still waiting and the write is not counted durable. Released, the put returns and the WAL SST
    holds the write."""
    gate = store.gate("put", key_contains=WAL)
    outcome: dict[str, object] = {}

    def durable_put() -> None:
        try:
            db.put(b"k", b"v", await_durable=True)
        except BaseException as error:
            outcome["raised"] = error
            return
        # Returned: the WAL SST must exist by now (a parked put has not reached the store).
        outcome["returned"] = sorted(m.key for m in store.inner.list(WAL))

    caller = threading.Thread(target=durable_put, name="durable-put")
    caller.start()
    try:
        assert gate.wait_until_reached(30), "the flusher never wrote the WAL SST"
        # The verdict does not depend on timing: the mutation counts the write durable before the
        # WAL put starts, so it is counted by the time the put reaches the gate.
        assert db.durable_seq < db.last_seq, (
            "the write was counted durable while its WAL SST write had not reached the store"
        )
        caller.join(1.0)  # a caller woken too early returns within this second
        assert "returned" not in outcome, (
            "put(await_durable=True) returned while its WAL SST write was still in flight; the WAL "
            f"held only {outcome.get('returned')}"
        )
    finally:
        gate.release()
        caller.join(30)
    assert not caller.is_alive() and "raised" not in outcome, outcome
    wal_ssts = outcome["returned"]
    assert isinstance(wal_ssts, list) and len(wal_ssts) == 2  # the writer's fence and the write
    simulate_crash(db)
    assert recovered(store) == {b"k": b"v"}


def test_a_durable_write_whose_wal_write_fails_does_not_return(store: FaultInjectingStore, db: Db) -> None:
    """Every WAL put fails: ``put(await_durable=True)`` must not return, and once the writer dies it
    raises instead; nothing was acknowledged, so nothing may be expected back."""
    store.fail("put", key_contains=WAL, times=None)
    outcome: dict[str, object] = {}

    def durable_put() -> None:
        try:
            db.put(b"k", b"v", await_durable=True)
            outcome["returned"] = True
        except BaseException as error:
            outcome["raised"] = error

    caller = threading.Thread(target=durable_put, name="durable-put")
    caller.start()
    caller.join(1.0)
    assert "returned" not in outcome, "put(await_durable=True) returned although its WAL write failed"
    simulate_crash(db)  # the process dies with the write still unacknowledged
    caller.join(30)
    assert not caller.is_alive()
    assert isinstance(outcome.get("raised"), SlateOpsError), outcome
    assert db.durable_seq < db.last_seq


# --- drop-segment-on-failed-write ---------------------------------------------------------------


def test_a_wal_write_that_fails_once_loses_nothing_when_retried(store: FaultInjectingStore, db: Db) -> None:
    """The first WAL write fails; the next flush retries it and acknowledges everything so far."""
    db.put(b"a", b"1")
    db.delete(b"gone")
    store.fail("put", key_contains=WAL, times=1)
    with pytest.raises(ObjectStoreError, match="injected failure"):
        db.flush()
    db.put(b"b", b"2")
    db.flush()  # acknowledges a and b: both must be in WAL SSTs now
    simulate_crash(db)
    assert recovered(store) == {b"a": b"1", b"b": b"2"}


def test_a_wal_write_that_fails_once_under_await_durable_loses_nothing(
    store: FaultInjectingStore, db: Db
) -> None:
    """The same through the flusher thread: its first attempt fails, ``flush()`` retries, and the
    durable put waiting on the failed segment returns only with the write in a WAL SST."""
    gate = store.gate("put", key_contains=WAL)
    store.fail("put", key_contains=WAL, times=1)
    outcome: dict[str, object] = {}

    def durable_put() -> None:
        try:
            db.put(b"a", b"1", await_durable=True)
            outcome["returned"] = True
        except BaseException as error:
            outcome["raised"] = error

    caller = threading.Thread(target=durable_put, name="durable-put")
    caller.start()
    assert gate.wait_until_reached(30)
    gate.release()  # the flusher's attempt fails (the injected failure), the data stays queued
    db.flush()  # the retry, on this thread
    caller.join(10)  # woken within its 50 ms poll once the retry wrote the segment
    assert outcome == {"returned": True}
    simulate_crash(db)
    assert recovered(store) == {b"a": b"1"}


# --- l0-compaction-drops-tombstones -------------------------------------------------------------

KEYS = [b"k%02d" % i for i in range(12)]


@pytest.mark.parametrize("older_runs", [1, 2])
def test_an_l0_compaction_over_older_runs_keeps_their_deleted_keys_deleted(older_runs: int) -> None:
    """Older sorted runs hold every key; L0 deletes some and overwrites others. The L0 compaction's
    output is not the oldest run, so its tombstones must stay: reads equal the model, before and
    after a full compaction (which may drop them) and after a reopen."""
    store = MemoryStore()
    model: dict[bytes, bytes] = {}
    with Db.open("db", store, OPTIONS) as db:
        compactor = Compactor("db", store, CompactorOptions(min_sources=2, max_sources=8))
        for generation in range(older_runs):
            for key in KEYS:
                model[key] = b"old%d-" % generation + key
                db.put(key, model[key])
            db.flush_memtable()
            db.put(b"pad", b"%d" % generation)  # a second L0 SST: L0 compactions need min_sources
            model[b"pad"] = b"%d" % generation
            db.flush_memtable()
            report = compactor.run_once()
            assert report is not None and report.kind == "l0"
        for key in KEYS[::3]:
            db.delete(key)
            del model[key]
        db.flush_memtable()
        for key in KEYS[1::3]:
            model[key] = b"new-" + key
            db.put(key, model[key])
        db.delete(KEYS[2])  # deleted in the newest L0 SST, over an older run and an older L0 SST
        del model[KEYS[2]]
        db.flush_memtable()
        report = compactor.run_once()
        assert report is not None and report.kind == "l0" and report.sorted_run_id == older_runs
        assert_reads(store, model)
        compactor.run_once(full=True)  # the oldest run now: the tombstones may go
        compactor.close()
        assert_reads(store, model)
    with Db.open("db", store, OPTIONS) as reopened:
        assert dict(reopened.scan()) == model


def assert_reads(store: MemoryStore, model: dict[bytes, bytes]) -> None:
    with DbReader.open("db", store) as reader:
        for key in KEYS:
            assert reader.get(key) == model.get(key), f"{key!r} reads {reader.get(key)!r}"
        assert dict(reader.scan()) == model


# --- final-checkpoint-refreshable (issue 19, item 3) ----------------------------------------------

START = 1_700_000_000.0
GC_OPTIONS = GcOptions.with_min_age(timedelta(minutes=2), db_delete_grace=timedelta(minutes=15))


def _parent_and_clone(store: MemoryStore, clock: ManualRuntime) -> tuple[dict[bytes, bytes], Checkpoint]:
    """``parent`` with data in L0, and a clone of it reading those SSTs in place; the parent's final
    checkpoint that protects them."""
    content = {b"a": b"1", b"b": b"2"}
    with Db.open("parent", store, OPTIONS, clock=clock) as db:
        for key, value in content.items():
            db.put(key, value)
        db.flush_memtable()
    admin.create_clone("clone", "parent", store, clock=clock)
    latest = ManifestStore(store, "parent").read_latest_required().value
    finals = [c for c in latest.checkpoints if (c.name or "").startswith(FINAL_CHECKPOINT_PREFIX)]
    assert len(finals) == 1, latest.checkpoints
    return content, finals[0]


def _parent_collected_a_day_later(store: MemoryStore, clock: ManualRuntime) -> None:
    """The parent overwrites everything and compacts, a day passes, its GC runs."""
    with Db.open("parent", store, OPTIONS, clock=clock) as db:
        db.put(b"a", b"new")
        db.delete(b"b")
        db.flush_memtable()
    Compactor("parent", store, CompactorOptions(min_sources=2), clock=clock).run_once(full=True)
    clock.advance(86_400)
    for _ in range(2):
        GarbageCollector("parent", store, GC_OPTIONS, clock=clock).run_once(dry_run=False)
        clock.advance(600)


@pytest.mark.parametrize("lifetime", [timedelta(seconds=1), timedelta(days=1)])
def test_a_final_checkpoint_cannot_be_given_an_expiry(lifetime: timedelta) -> None:
    """``refresh_checkpoint`` with a lifetime on the parent's final checkpoint of a clone is refused
    (naming the clone), and ``delete_checkpoint`` too; the clone still reads everything after the
    parent's data is compacted away and collected a day later."""
    store, clock = MemoryStore(), ManualRuntime(START)
    content, final = _parent_and_clone(store, clock)
    with pytest.raises(CheckpointProtectedError, match="clone"):
        admin.refresh_checkpoint("parent", store, final.id, lifetime, clock=clock)
    with pytest.raises(CheckpointProtectedError, match="clone"):
        admin.delete_checkpoint("parent", store, final.id, dry_run=False)
    kept = ManifestStore(store, "parent").read_latest_required().value.checkpoint(final.id)
    assert kept is not None and kept.expire_time_s is None
    _parent_collected_a_day_later(store, clock)
    assert check_references(store, ["parent", "clone"], now=clock.now()) == []
    with DbReader.open("clone", store, clock=clock) as reader:
        assert dict(reader.scan()) == content


# --- root-prefix-deletion (issue 19, item 4) ------------------------------------------------------

STRAYS = {"README": b"not a database", "backup/2026-11-01.tar": b"a backup"}


@pytest.mark.parametrize("how", ["hard", "gc"])
def test_deleting_the_root_database_deletes_only_its_own_objects(how: str) -> None:
    """The root database (path ``""``) is soft-destroyed, then hard-destroyed or collected by GC past
    its grace period: objects of no database and a nested database are untouched, and the root's own
    directories hold nothing but its tombstone."""
    store, clock = MemoryStore(), ManualRuntime(START)
    for key, data in STRAYS.items():
        store.put(key, data)
    with Db.open("", store, OPTIONS, clock=clock) as root:
        root.put(b"r", b"root")
        root.flush_memtable()
        root.put(b"w", b"wal only")
    with Db.open("nested/db", store, OPTIONS, clock=clock) as nested:
        nested.put(b"n", b"nested")
        nested.flush_memtable()
        nested.put(b"m", b"in its wal")
    admin.destroy("", store, soft=True, dry_run=False, clock=clock)
    if how == "hard":
        admin.destroy("", store, soft=False, dry_run=False, clock=clock)
    else:
        clock.advance(86_400 * 2)
        GarbageCollector("", store, GC_OPTIONS, clock=clock).run_once(dry_run=False)
    for key, data in STRAYS.items():
        assert store.get(key).data == data, f"{key} belongs to no database but was changed or deleted"
    with DbReader.open("nested/db", store, clock=clock) as reader:
        assert dict(reader.scan()) == {b"n": b"nested", b"m": b"in its wal"}
    assert check_references(store, ["nested/db"], now=clock.now()) == []
    assert ManifestStore(store, "").read_latest() is None  # the root is deleted: a tombstone at most
    left = [m.key for m in store.list("") if not m.key.startswith(("nested/", *STRAYS))]
    assert all(k.startswith(("manifest/", "gc/", "wal/", "compactions/")) for k in left), left


# --- fencing under races and deletion (issue 19, items 1-2, and the held-out L0-flush commit) ------


OVERWRITE = PutMode.overwrite()


class Interpose:
    """A store through which one process talks; ``arm`` makes another process act (``action``, on
    the plain store) right before this one's first request matching ``op`` and ``key_contains`` —
    a race decided by the test, not by timing."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self._armed: tuple[str, str, Callable[[], None]] | None = None
        self.fired = False

    @property
    def url(self) -> str:
        return self.inner.url

    def arm(self, op: str, key_contains: str, action: Callable[[], None]) -> None:
        self._armed, self.fired = (op, key_contains, action), False

    def _before(self, op: str, key: str) -> None:
        armed = self._armed
        if armed is not None and armed[0] == op and armed[1] in key:
            self._armed = None
            armed[2]()
            self.fired = True

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        self._before("get", key)
        return self.inner.get(key, byte_range)

    def head(self, key: str) -> ObjectMeta:
        self._before("head", key)
        return self.inner.head(key)

    def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE, put_id: str | None = None) -> PutResult:
        self._before("put", key)
        return self.inner.put(key, data, mode, put_id)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        self._before("list", prefix)
        return self.inner.list(prefix, start_after)

    def delete(self, key: str) -> None:
        self._before("delete", key)
        self.inner.delete(key)


def test_a_writer_claimed_under_before_its_wal_fence_lands_does_not_open() -> None:
    """Writer A claims its epoch; right before A creates its WAL fence, another process claims a higher
    epoch (and fences nothing yet). A's fence lands where A wanted it: only the post-fence epoch check
    finds the newer epoch, and A must refuse to open; the next writer acknowledges and is read."""
    store = MemoryStore()
    admin.create_db("db", store)
    interposed = Interpose(store)
    interposed.arm("put", WAL, lambda: ManifestStore(store, "db").claim(WRITER_EPOCH))
    with pytest.raises(FencedError):
        Db.open("db", interposed, OPTIONS)
    assert interposed.fired
    with Db.open("db", store, OPTIONS) as b:
        b.put(b"k", b"from B", await_durable=True)
    with DbReader.open("db", store) as reader:
        assert reader.get(b"k") == b"from B"


def test_a_writer_fenced_before_its_wal_fence_lands_does_not_open() -> None:
    """Writer A claims its epoch; right before A creates its WAL fence, writer B opens (a higher
    epoch, its window fence at the id A wanted). A's create fails there; A must find B's epoch (its
    HEAD finds B's fence, and it confirms before jumping it) and refuse to open without fencing B's
    first WAL id; B acknowledges and its write is read."""
    store = MemoryStore()
    admin.create_db("db", store)
    interposed = Interpose(store)
    newer: list[Db] = []
    interposed.arm("put", WAL, lambda: newer.append(Db.open("db", store, OPTIONS)))
    with pytest.raises(FencedError):
        Db.open("db", interposed, OPTIONS)
    assert interposed.fired and len(newer) == 1
    with newer[0] as b:
        b.put(b"k", b"from B", await_durable=True)
    with DbReader.open("db", store) as reader:
        assert reader.get(b"k") == b"from B"


def test_a_writer_whose_database_was_removed_by_hand_acknowledges_nothing() -> None:
    """Every object of the database is deleted under a writer by a tool that knows nothing of
    slate_ops (no tombstone, no fence). The version the writer cached has vanished and nothing newer
    exists: that is a deleted database, never "still the latest". Its durable put is refused, its
    close commits nothing, and the path stays empty."""
    store = MemoryStore()
    db = Db.open("db", store, OPTIONS)
    try:
        db.put(b"a", b"1")
        db.flush_memtable()
        for meta in list(store.list("db/")):
            store.delete(meta.key)
        with pytest.raises(FencedError):
            db.put(b"b", b"2", await_durable=True)
        with pytest.raises(FencedError):
            db.close()
    finally:
        simulate_crash(db)
    assert [m.key for m in store.list("db/manifest/")] == []
    with pytest.raises(DbNotFoundError):
        DbReader.open("db", store)


def test_a_writer_fenced_between_its_l0_upload_and_its_commit_commits_nothing() -> None:
    """Writer A's L0 flush: its WAL write was acknowledged; right before it uploads the L0 SST,
    writer B opens, overwrites the key durably and flushes to L0. A's manifest commit must check
    its epoch (FencedError), so readers keep seeing B's value, not the one B overwrote."""
    store = MemoryStore()
    interposed = Interpose(store)
    a = Db.open("db", interposed, OPTIONS)
    try:
        a.put(b"k", b"old")
        a.flush()  # acknowledged: in a WAL SST, the epoch confirmed

        def newer() -> None:
            with Db.open("db", store, OPTIONS) as b:
                b.put(b"k", b"new", await_durable=True)
                b.flush_memtable()

        interposed.arm("put", "db/compacted/", newer)
        with pytest.raises(FencedError):
            a.flush_memtable()
        assert interposed.fired
    finally:
        simulate_crash(a)
    with DbReader.open("db", store) as reader:
        assert reader.get(b"k") == b"new"
    latest = ManifestStore(store, "db").read_latest_required().value
    assert len(latest.l0) == 1, "the fenced writer's L0 SST was committed"


# --- wal-walk-ignores-gaps, wal-walk-reads-window (issue 23: several WAL PUTs in flight) ------------


def test_no_opener_replays_a_fenced_writers_wal_puts_past_its_first_missing_one() -> None:
    """A pipelined writer's WAL ``N`` never lands while ``N + 1`` (overwriting an acknowledged key) does;
    after the new writer fenced ``N``, the old writer's ``N + 2`` lands inside the fence's window. No
    opener may read either: the walk ends at the first missing id, and a window fence skips the ids
    it covers. The new writer's own write, at the end of the window, survives its crash."""
    store = MemoryStore()
    old = Db.open("db", store, OPTIONS)
    old.put(b"k", b"acknowledged", await_durable=True)
    gap = old.next_wal_id
    simulate_crash(old)
    wal = WalStore(store, "db")

    def orphan(wal_id: int) -> None:
        assert wal.write(wal_id, entries_to_table([(b"k", 10_000 + wal_id, KIND_VALUE, b"orphan")]))

    orphan(gap + 1)
    new = Db.open("db", store, OPTIONS)
    try:
        assert new.get(b"k") == b"acknowledged"
        orphan(gap + 2)  # lands after the fence, inside its window
        new.put(b"n", b"new", await_durable=True)
    finally:
        simulate_crash(new)
    with Db.open("db", store, OPTIONS) as again:
        assert (again.get(b"k"), again.get(b"n")) == (b"acknowledged", b"new")
    with DbReader.open("db", store) as reader:
        assert (reader.get(b"k"), reader.get(b"n")) == (b"acknowledged", b"new")
