"""Property test: several clients with their own caches, racing commits and GC, against a model.

Invariants: no committed increment is lost or applied twice; every commit gets a fresh id above
all earlier ones; a client reads only committed versions and never one older than it has seen.

GC runs under its real timing assumption: it deletes only versions older than its ``min_age``,
which is longer than the clients' cache TTL, so the manual runtime jumps past the TTL first.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from slate_ops.objstore import MemoryStore
from slate_ops.runtime import ManualRuntime
from slate_ops.txn import SequencedStore
from tests.support.txn import counter_store, increment

CLIENTS = 3


class SequencedModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.memory = MemoryStore()
        self.clock = ManualRuntime(0.0)
        self.clients: list[SequencedStore[int]] = [
            counter_store(self.memory, clock=self.clock) for _ in range(CLIENTS)
        ]
        self.committed_ids: list[int] = []
        self.increments = 0
        self.seen = [0] * CLIENTS

    @rule(client=st.integers(0, CLIENTS - 1))
    def commit(self, client: int) -> None:
        committed = self.clients[client].update(increment)
        assert committed is not None
        self.increments += 1
        assert not self.committed_ids or committed.id > self.committed_ids[-1]
        self.committed_ids.append(committed.id)
        assert committed.value == self.increments  # applied on the true latest: nothing lost
        self.seen[client] = committed.id

    @rule(client=st.integers(0, CLIENTS - 1))
    def read(self, client: int) -> None:
        latest = self.clients[client].read_latest()
        if latest is None:
            assert not self.committed_ids
            return
        assert latest.id >= self.seen[client]
        assert latest.id in self.committed_ids
        assert latest.value == self.committed_ids.index(latest.id) + 1
        self.seen[client] = latest.id

    @rule(keep=st.integers(1, 4))
    def gc(self, keep: int) -> None:
        """Advance the boundary, then delete everything at or behind it but the newest ``keep``."""
        if len(self.committed_ids) <= keep:
            return
        boundary = self.committed_ids[-keep - 1]
        self.clock.advance(61)  # min_age > cache TTL: every cache is stale by the time GC deletes
        self.clients[0].advance_boundary(boundary)
        for meta in list(self.memory.list("db/manifest/")):
            object_id = self.clients[0].parse_id(meta.key)
            if object_id is not None and object_id <= boundary:
                self.memory.delete(meta.key)

    @invariant()
    def latest_holds_every_increment(self) -> None:
        if self.committed_ids:
            latest = counter_store(self.memory).read_latest()
            assert latest is not None and latest.id == self.committed_ids[-1]
            assert latest.value == self.increments


SequencedModel.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestSequencedModel = SequencedModel.TestCase
