"""The thread-leak guard of tests/support/threads.py: what it reports, what it lets finish, what it
exempts; and the compactors it reports with a "completed" record nobody waited for."""

from __future__ import annotations

import threading

import pytest

from slate_ops.compaction import Compactor
from slate_ops.objstore import MemoryStore
from slate_ops.runtime import ManualRuntime
from tests.support.compaction import SMALL, fill
from tests.support.threads import GRACE_SECONDS, PROCESS_THREADS, new_threads, record_unwaited_compactions


def started(name: str, target: object) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)  # type: ignore[arg-type]
    thread.start()
    return thread


def test_a_thread_still_running_after_the_grace_period_is_reported() -> None:
    before = set(threading.enumerate())
    release = threading.Event()
    thread = started("stuck", release.wait)
    try:
        assert new_threads(before, grace=0.1) == [thread]
    finally:
        release.set()
        thread.join()
    assert new_threads(before, grace=0.1) == []


def test_a_thread_that_ends_within_the_grace_period_is_not() -> None:
    before = set(threading.enumerate())
    release = threading.Event()
    started("winding-down", lambda: release.wait(0.2))
    assert new_threads(before, grace=5) == []


def test_process_wide_threads_are_exempt() -> None:
    before = set(threading.enumerate())
    release = threading.Event()
    thread = started(next(iter(PROCESS_THREADS)), release.wait)
    try:
        assert new_threads(before, grace=0.1) == []
    finally:
        release.set()
        thread.join()


@pytest.mark.leaves_threads("checks the marker: the thread ends by itself after the grace period")
def test_a_marked_test_may_leave_a_thread() -> None:
    started("left-on-purpose", lambda: threading.Event().wait(GRACE_SECONDS + 1))


def test_a_compactor_whose_last_completed_record_nobody_waited_for_is_reported(
    monkeypatch: pytest.MonkeyPatch, memory_store: MemoryStore
) -> None:
    unwaited = record_unwaited_compactions(monkeypatch)
    fill(memory_store, flushes=2)
    compactor = Compactor("db", memory_store, SMALL)
    assert compactor.run_once() is not None
    assert list(unwaited.values()) == [compactor]  # its "completed" record: on a thread, unwaited
    assert compactor.run_once() is None  # nothing to compact: returns before waiting
    assert list(unwaited.values()) == [compactor]
    compactor.close()
    assert unwaited == {}


def test_a_compactor_on_a_manual_runtime_is_not_reported(
    monkeypatch: pytest.MonkeyPatch, memory_store: MemoryStore
) -> None:
    unwaited = record_unwaited_compactions(monkeypatch)
    fill(memory_store, flushes=2)
    assert Compactor("db", memory_store, SMALL, clock=ManualRuntime()).run_once() is not None
    assert unwaited == {}  # its record was written inline, before run_once returned
