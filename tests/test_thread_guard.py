"""The thread-leak guard of tests/support/threads.py: what it reports, what it lets finish, what it
exempts."""

from __future__ import annotations

import threading

import pytest

from tests.support.threads import GRACE_SECONDS, PROCESS_THREADS, new_threads


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
