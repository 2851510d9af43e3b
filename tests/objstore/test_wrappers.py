"""CountingStore and FaultInjectingStore behave as tests relying on them expect."""

from __future__ import annotations

import threading
import time

import pytest

from slate_ops.errors import (
    InvalidArgumentError,
    ObjectNotFoundError,
    ObjectStoreError,
    PutOutcomeUnknownError,
    SlateOpsError,
)
from slate_ops.objstore import CountingStore, FaultInjectingStore, MemoryStore, ObjectStore, PutMode
from slate_ops.objstore.wrappers import SimulatedCrash


def test_wrappers_are_stores() -> None:
    assert isinstance(CountingStore(MemoryStore()), ObjectStore)
    assert isinstance(FaultInjectingStore(MemoryStore()), ObjectStore)
    assert CountingStore(MemoryStore("n")).url == "memory://n"


def test_counting_per_kind() -> None:
    store = CountingStore(MemoryStore())
    store.put("a", b"1")
    store.put("b", b"2")
    store.get("a")
    store.get("a", (0, 1))
    store.head("b")
    assert [m.key for m in store.list()] == ["a", "b"]
    store.delete("a")
    with pytest.raises(ObjectNotFoundError):
        store.get("a")  # failed calls are still requests
    assert store.counts == {"get": 3, "head": 1, "put": 2, "list": 1, "delete": 1}
    assert store.total == 8
    counts = store.counts
    counts["get"] = 100  # a copy
    assert store.counts["get"] == 3
    store.reset()
    assert store.total == 0


def test_counting_is_thread_safe() -> None:
    store = CountingStore(MemoryStore())
    store.put("k", b"v")
    store.reset()

    def work() -> None:
        for _ in range(500):
            store.head("k")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.counts["head"] == 4000


def test_fail_raises_before_the_call() -> None:
    inner = MemoryStore()
    store = FaultInjectingStore(inner)
    store.fail("put", key_contains="bad", times=2)
    store.put("good", b"x")
    for _ in range(2):
        with pytest.raises(ObjectStoreError, match="injected"):
            store.put("a/bad/key", b"x")
    store.put("a/bad/key", b"x")  # the rule is used up
    assert [m.key for m in inner.list()] == ["a/bad/key", "good"]
    assert store.calls == [("put", "good"), ("put", "a/bad/key"), ("put", "a/bad/key"), ("put", "a/bad/key")]


def test_fail_with_custom_error() -> None:
    store = FaultInjectingStore(MemoryStore())
    store.fail("get", error=ObjectNotFoundError)
    with pytest.raises(ObjectNotFoundError) as excinfo:
        store.get("k")
    assert excinfo.value.key == "k"
    boom = RuntimeError("boom")
    store.fail("head", error=boom)
    with pytest.raises(RuntimeError) as raised:
        store.head("k")
    assert raised.value is boom


def test_fail_after_applies_then_raises() -> None:
    inner = MemoryStore()
    store = FaultInjectingStore(inner)
    store.fail_after("put")
    with pytest.raises(PutOutcomeUnknownError) as excinfo:
        store.put("k", b"v", PutMode.create(), put_id="p1")
    assert excinfo.value.put_id == "p1"
    assert excinfo.value.key == "k"
    assert inner.head("k").put_id == "p1"
    store.fail_after("delete")
    with pytest.raises(ObjectStoreError):
        store.delete("k")
    with pytest.raises(ObjectNotFoundError):
        inner.head("k")


def test_fail_after_generates_put_id_it_reports() -> None:
    inner = MemoryStore()
    store = FaultInjectingStore(inner)
    store.fail_after("put")
    with pytest.raises(PutOutcomeUnknownError) as excinfo:
        store.put("k", b"v")
    assert excinfo.value.put_id == inner.head("k").put_id


def _failure_pattern(seed: int) -> list[bool]:
    store = FaultInjectingStore(MemoryStore(), seed=seed)
    store.fail("head", times=None, probability=0.3, error=ObjectNotFoundError)
    store.fail("put", times=None, probability=0.5)
    pattern = []
    for i in range(60):
        try:
            if i % 2:
                store.put("k", b"v")
            else:
                store.head("k")
            pattern.append(False)
        except ObjectStoreError:
            pattern.append(True)
    return pattern


def test_fault_injection_is_deterministic() -> None:
    first = _failure_pattern(seed=7)
    assert first == _failure_pattern(seed=7)
    assert 0 < sum(first) < len(first)
    assert any(_failure_pattern(seed) != first for seed in range(8, 12))


def test_latency() -> None:
    store = FaultInjectingStore(MemoryStore())
    store.latency("put", 0.05)
    started = time.monotonic()
    store.put("k", b"v")
    assert time.monotonic() - started >= 0.05
    started = time.monotonic()
    store.get("k")
    assert time.monotonic() - started < 0.05


def test_gate_stalls_a_call_until_released() -> None:
    inner = MemoryStore()
    store = FaultInjectingStore(inner)
    gate = store.gate("put", key_contains="slow")
    store.put("fast", b"1")  # other keys pass
    thread = threading.Thread(target=store.put, args=("slow/k", b"2"))
    thread.start()
    assert gate.wait_until_reached(timeout=5)
    time.sleep(0.05)
    assert thread.is_alive()
    with pytest.raises(ObjectNotFoundError):
        inner.head("slow/k")  # parked before reaching the store
    gate.release()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert inner.get("slow/k").data == b"2"


def test_gate_not_reached_times_out() -> None:
    store = FaultInjectingStore(MemoryStore())
    gate = store.gate("delete")
    store.put("k", b"v")
    assert not gate.wait_until_reached(timeout=0.01)


def test_crash_after() -> None:
    inner = MemoryStore()
    store = FaultInjectingStore(inner)
    store.crash_after(2)
    store.put("a", b"1")
    store.put("b", b"2")
    with pytest.raises(SimulatedCrash):
        store.put("c", b"3")
    with pytest.raises(SimulatedCrash):
        store.get("a")
    assert not issubclass(SimulatedCrash, SlateOpsError)
    assert [m.key for m in inner.list()] == ["a", "b"]


def test_crash_after_counts_only_successful_calls() -> None:
    store = FaultInjectingStore(MemoryStore())
    store.fail("put")
    store.crash_after(1)
    with pytest.raises(ObjectStoreError):
        store.put("a", b"1")  # failed: not counted
    store.put("a", b"1")
    with pytest.raises(SimulatedCrash):
        store.head("a")


def test_unknown_op_refused() -> None:
    store = FaultInjectingStore(MemoryStore())
    with pytest.raises(InvalidArgumentError):
        store.fail("copy")
    with pytest.raises(InvalidArgumentError):
        store.fail("get", probability=1.5)
