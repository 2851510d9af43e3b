"""Writes never wait for object-store I/O (docs/design/engine.md, "The writer's parts").

The lock that ``put``/``write`` take is never held across a call to the store: a write goes through
while a manifest commit or a WAL PUT is blocked in another thread, and, checked on every single store
call the writer makes, a write from another thread completes while that call is in progress.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from slate_ops import Db, WriteBatch
from slate_ops.engine import CheckpointScope
from slate_ops.objstore import FaultInjectingStore, MemoryStore
from slate_ops.objstore.base import GetResult, ObjectMeta, ObjectStore, PutMode, PutResult
from tests.support.engine import QUIET

TIMEOUT_S = 10.0


def completes(call: Callable[[], object], timeout: float = TIMEOUT_S) -> bool:
    """Run ``call`` in another thread; whether it returned (without raising) within ``timeout``."""
    done = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as error:
            errors.append(error)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    finished = done.wait(timeout)
    if errors:
        raise errors[0]
    return finished


class WriteProbingStore:
    """Before each call it forwards, a write from another thread must complete (once ``db`` is set).

    A call made while its thread holds the write lock fails the probe: the probing write would wait
    for that lock, which is released only after the call returns.
    """

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.db: Db | None = None
        self.probed: list[str] = []
        self.blocked: list[str] = []

    @property
    def url(self) -> str:
        return self.inner.url

    def probe(self, op: str, key: str) -> None:
        db = self.db
        if db is None:
            return
        n = len(self.probed)
        self.probed.append(f"{op} {key}")
        if not completes(lambda: db.put(b"probe-%06d" % n, b"v"), timeout=5.0):
            self.blocked.append(f"{op} {key}")

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        self.probe("get", key)
        return self.inner.get(key, byte_range)

    def head(self, key: str) -> ObjectMeta:
        self.probe("head", key)
        return self.inner.head(key)

    def put(self, key: str, data: bytes, mode: PutMode | None = None, put_id: str | None = None) -> PutResult:
        self.probe("put", key)
        return self.inner.put(key, data, mode or PutMode.overwrite(), put_id)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        self.probe("list", prefix)
        return self.inner.list(prefix, start_after)

    def delete(self, key: str) -> None:
        self.probe("delete", key)
        self.inner.delete(key)


def test_no_store_call_of_the_writer_holds_the_write_lock() -> None:
    store = WriteProbingStore(MemoryStore())
    db = Db.open(
        "db",
        store,
        QUIET.model_copy(update={"l0_sst_size_bytes": 2000, "l0_max_ssts": 1000}),
        background=False,
    )
    store.db = db
    for i in range(40):  # memtables freeze on their own: L0 flushes, each a manifest commit
        db.put(b"k%04d" % i, b"x" * 100)
    db.write(WriteBatch().put(b"b", b"1").delete(b"k0000"), await_durable=True)  # a flush round
    db.flush()
    db.step()
    db.flush_memtable()
    db.create_checkpoint(CheckpointScope.ALL)
    db.poll_manifest()
    db.close()
    kinds = {call.split(" ")[0] for call in store.probed}
    assert {"put", "get", "list"} <= kinds, store.probed  # WAL and SST PUTs, manifest reads and commits
    assert any(".manifest" in call for call in store.probed if call.startswith("put"))
    assert store.blocked == [], f"writes waited for these store calls: {store.blocked}"
    with Db.open("db", store.inner, QUIET) as reopened:
        assert reopened.get(b"k0039") == b"x" * 100 and reopened.get(b"k0000") is None


@pytest.mark.parametrize(
    ("blocked", "key_contains"),
    [("manifest commit", ".manifest"), ("WAL PUT", "/wal/"), ("L0 SST PUT", "/compacted/")],
)
def test_a_write_goes_through_while_the_flusher_is_blocked_in_the_store(
    blocked: str, key_contains: str
) -> None:
    memory = MemoryStore()
    store = FaultInjectingStore(memory)
    db = Db.open("db", store, QUIET, background=False)
    db.put(b"before", b"1")
    gate = store.gate("put", key_contains=key_contains)
    flushing = threading.Thread(target=db.flush_memtable, daemon=True)  # WAL PUT, SST PUT, commit
    flushing.start()
    try:
        assert gate.wait_until_reached(TIMEOUT_S), f"no {blocked} was made"
        assert completes(lambda: db.put(b"during", b"2")), f"a put waited for the {blocked}"
        assert completes(lambda: db.write(WriteBatch().put(b"batch", b"3")))
        assert db.get(b"during") == b"2" and db.get(b"before") == b"1"
    finally:
        gate.release()
        flushing.join(TIMEOUT_S)
    assert not flushing.is_alive()
    db.close()
    with Db.open("db", memory, QUIET) as reopened:
        assert [reopened.get(k) for k in (b"before", b"during", b"batch")] == [b"1", b"2", b"3"]
