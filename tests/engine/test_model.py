"""Stateful property test of the writer against a dict model.

Random puts, deletes, batches, WAL flushes, memtable flushes, clean reopens and crashes (the
process state dropped without close). Every write acknowledged as durable must survive a crash;
after a crash the database holds the model's state after some prefix of the writes that is at
least as long as the acknowledged one (writes land in order, never partially).
"""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from slate_ops import Db, WriteBatch
from slate_ops.objstore import LocalStore, MemoryStore
from slate_ops.objstore.base import ObjectStore
from tests.support.engine import quiet, simulate_crash

# mostly a few hot keys (overwrites and deletes across memtables, SSTs and runs), sometimes any key
KEYS = st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f\x00", b"\xff"]) | st.binary(min_size=1, max_size=3)
VALUES = st.binary(max_size=40)
OPTIONS = quiet(l0_sst_size_bytes=600, l0_max_ssts=10_000)  # small memtables: many freezes and L0 flushes


class WriterModel(RuleBasedStateMachine):
    def make_store(self) -> ObjectStore:
        return MemoryStore()

    def __init__(self) -> None:
        super().__init__()
        self.store = self.make_store()
        self.db = Db.open("db", self.store, OPTIONS)
        self.model: dict[bytes, bytes] = {}
        # model states since the last durable point; after a crash the db must equal one of them
        self.since_durable: list[dict[bytes, bytes]] = [{}]

    def _record(self) -> None:
        self.since_durable.append(dict(self.model))

    @rule(key=KEYS, value=VALUES)
    def put(self, key: bytes, value: bytes) -> None:
        self.db.put(key, value)
        self.model[key] = value
        self._record()

    @rule(key=KEYS)
    def delete(self, key: bytes) -> None:
        self.db.delete(key)
        self.model.pop(key, None)
        self._record()

    @rule(ops=st.lists(st.tuples(KEYS, st.none() | VALUES), min_size=1, max_size=6))
    def batch(self, ops: list[tuple[bytes, bytes | None]]) -> None:
        batch = WriteBatch()
        for key, value in ops:
            if value is None:
                batch.delete(key)
                self.model.pop(key, None)
            else:
                batch.put(key, value)
                self.model[key] = value
        self.db.write(batch)
        self._record()

    @rule(key=KEYS, value=VALUES)
    def durable_put(self, key: bytes, value: bytes) -> None:
        self.db.put(key, value, await_durable=True)
        self.model[key] = value
        self.since_durable = [dict(self.model)]

    @rule()
    def flush(self) -> None:
        self.db.flush()
        self.since_durable = [dict(self.model)]

    @rule()
    def flush_memtable(self) -> None:
        self.db.flush_memtable()
        self.since_durable = [dict(self.model)]

    @rule()
    def reopen(self) -> None:
        self.db.close()
        self.db = Db.open("db", self.store, OPTIONS)
        self.since_durable = [dict(self.model)]

    @rule()
    def crash(self) -> None:
        simulate_crash(self.db)
        self.db = Db.open("db", self.store, OPTIONS)
        recovered = dict(self.db.scan())
        assert recovered in self.since_durable, (
            "recovered state is not a prefix at least as long as the durable one"
        )
        self.model = recovered
        self.since_durable = [dict(self.model)]

    @rule(data=st.data())
    def get_existing(self, data: st.DataObject) -> None:
        # After a crash the model is whichever prefix the writer had flushed (timing-dependent), so
        # neither a precondition nor the draw may depend on it: hypothesis refuses a rule choice or a
        # strategy whose shape differs on replay (FlakyStrategyDefinition, seen under load in CI).
        index = data.draw(st.integers(min_value=0, max_value=1 << 16))
        keys = sorted(self.model)
        if keys:
            key = keys[index % len(keys)]
            assert self.db.get(key) == self.model[key]

    @invariant()
    def scan_matches_model(self) -> None:
        assert dict(self.db.scan()) == self.model
        assert [k for k, _ in self.db.scan()] == sorted(self.model)

    def teardown(self) -> None:
        simulate_crash(self.db)


class LocalWriterModel(WriterModel):
    """The same machine on the local directory store (real files, link/rename commits)."""

    def make_store(self) -> ObjectStore:
        return LocalStore(tempfile.mkdtemp(prefix="slate-model-"))

    def teardown(self) -> None:
        super().teardown()
        shutil.rmtree(self.store.root, ignore_errors=True)  # type: ignore[attr-defined]


WriterModel.TestCase.settings = settings(max_examples=40, stateful_step_count=40, deadline=None)
LocalWriterModel.TestCase.settings = settings(max_examples=15, stateful_step_count=30, deadline=None)
TestWriterModel = WriterModel.TestCase
TestLocalWriterModel = LocalWriterModel.TestCase
