from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from slate_ops.errors import FencedError
from slate_ops.objstore import MemoryStore
from slate_ops.txn import EpochField, FenceableStore, SequencedStore


@dataclass(frozen=True)
class State:
    writer_epoch: int = 0
    compactor_epoch: int = 0
    rows: tuple[str, ...] = ()


class StateCodec:
    def encode(self, value: State) -> bytes:
        return repr((value.writer_epoch, value.compactor_epoch, value.rows)).encode()

    def decode(self, data: bytes, path: str) -> State:
        w, c, rows = eval(data.decode())  # test-only codec of trusted data
        return State(w, c, tuple(rows))


WRITER: EpochField[State] = EpochField(
    "writer", lambda s: s.writer_epoch, lambda s, e: replace(s, writer_epoch=e)
)
COMPACTOR: EpochField[State] = EpochField(
    "compactor", lambda s: s.compactor_epoch, lambda s, e: replace(s, compactor_epoch=e)
)


def sequence(memory: MemoryStore) -> SequencedStore[State]:
    return SequencedStore(memory, "db", "manifest", "manifest", StateCodec())


def add(row: str):  # type: ignore[no-untyped-def]
    return lambda current: replace(current.value, rows=(*current.value.rows, row))


@pytest.fixture
def memory_with_sequence() -> MemoryStore:
    store = MemoryStore()
    sequence(store).create(1, State())
    return store


def test_claim_bumps_epoch_once(memory_with_sequence: MemoryStore) -> None:
    first, committed = FenceableStore.claim(sequence(memory_with_sequence), WRITER)
    assert first.epoch == 1 and committed.value.writer_epoch == 1 and committed.id == 2
    second, _ = FenceableStore.claim(sequence(memory_with_sequence), WRITER)
    assert second.epoch == 2


def test_fenced_instance_gets_an_error_and_commits_nothing(memory_with_sequence: MemoryStore) -> None:
    old, _ = FenceableStore.claim(sequence(memory_with_sequence), WRITER)
    old.update(add("a"))
    new, _ = FenceableStore.claim(sequence(memory_with_sequence), WRITER)
    before = [f.id for f in sequence(memory_with_sequence).list()]
    with pytest.raises(FencedError) as raised:
        old.update(add("lost?"))
    assert (raised.value.own_epoch, raised.value.stored_epoch, raised.value.role) == (1, 2, "writer")
    assert [f.id for f in sequence(memory_with_sequence).list()] == before
    new.update(add("b"))
    latest = sequence(memory_with_sequence).read_latest()
    assert latest is not None and latest.value.rows == ("a", "b")


def test_refresh_detects_fencing(memory_with_sequence: MemoryStore) -> None:
    old, _ = FenceableStore.claim(sequence(memory_with_sequence), WRITER)
    FenceableStore.claim(sequence(memory_with_sequence), WRITER)
    with pytest.raises(FencedError, match="newer writer"):
        old.refresh()


def test_writer_and_compactor_epochs_are_independent(memory_with_sequence: MemoryStore) -> None:
    writer, _ = FenceableStore.claim(sequence(memory_with_sequence), WRITER)
    compactor, _ = FenceableStore.claim(sequence(memory_with_sequence), COMPACTOR)
    writer.update(add("w"))  # the compactor's bump does not fence the writer
    compactor.update(add("c"))
    FenceableStore.claim(sequence(memory_with_sequence), COMPACTOR)
    writer.update(add("w2"))
    with pytest.raises(FencedError, match="compactor"):
        compactor.update(add("c2"))


def test_claim_with_change_commits_both_together(memory_with_sequence: MemoryStore) -> None:
    fenced, committed = FenceableStore.claim(
        sequence(memory_with_sequence), WRITER, lambda c, e: add(f"epoch-{e}")(c)
    )
    assert committed.value.rows == ("epoch-1",) and committed.value.writer_epoch == fenced.epoch == 1
