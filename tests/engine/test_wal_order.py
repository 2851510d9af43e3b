"""WAL SSTs appear in id order: WAL ``N`` is created only once WAL ``N - 1`` exists.

Openers fence above every WAL id they list and replay everything listed below the fence, so a WAL
``N + 1`` visible while ``N`` is still in flight would let an opener replay a write after a gap — why
one WAL PUT is in flight at a time (docs/design/engine.md, "One WAL PUT in flight"). Checked on every
WAL PUT under concurrent durable writers, with the PUTs slowed down so a second one would overlap.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta

from slate_ops import Db
from slate_ops.errors import ObjectNotFoundError
from slate_ops.layout import parse_wal_key, wal_key
from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import GetResult, ObjectMeta, ObjectStore, PutMode, PutResult
from tests.support.engine import quiet

WRITERS = 8
PUTS_EACH = 12
PUT_DELAY_S = 0.01


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


def test_concurrent_durable_writers_create_wal_ssts_one_at_a_time_in_id_order() -> None:
    memory = MemoryStore()
    store = WalOrderCheckingStore(memory, "db")
    db = Db.open("db", store, quiet(wal_flush_interval=timedelta(milliseconds=5)))
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(PUTS_EACH):
                db.put(b"w%d-%03d" % (n, i), b"v", await_durable=True)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    db.close()
    assert errors == []
    assert store.wal_puts > 2, "the writers never wrote the WAL"
    assert store.overlapping == [], f"WAL PUTs overlapped: {store.overlapping[:5]}"
    assert store.after_gap == [], f"WAL SSTs created while the one before did not exist: {store.after_gap}"
    with Db.open("db", memory, quiet()) as reopened:
        for n in range(WRITERS):
            assert [reopened.get(b"w%d-%03d" % (n, i)) for i in range(PUTS_EACH)] == [b"v"] * PUTS_EACH
