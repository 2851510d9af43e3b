"""The thread-leak guard, applied to every test: a thread a test started must have ended when the
test ends (after a short grace period), or the test errors with the threads' names.

Not counted: threads started while a session-, package- or module-scoped fixture was set up
(they live as long as that fixture, e.g. moto's server), the threads serving a connection to such
a fixture's server (a client's kept-alive connection ends when the client does), and the
process-wide threads of :data:`PROCESS_THREADS` and :data:`PROCESS_THREAD_MODULES`. A test that
legitimately leaves threads behind carries ``@pytest.mark.leaves_threads("reason")``. Whatever
the outcome, the writers and readers a test opened and did not close are stopped afterwards, so
one failure cannot leak into the next test.

A compactor's "completed" record is written on a short-lived thread after ``run_once`` returns
(docs/design/compaction.md, "I/O: streaming from and to"). That thread usually ends within the
grace period, so the thread check alone would miss a test that never waits for it and deletes,
copies or counts the database's objects while the record may still land. The guard therefore
also fails a test that leaves a compactor (on a runtime with threads) whose last ``run_once``
committed and that nobody ``close()``-d or ``wait_recorded()`` since; it closes them afterwards.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from slate_ops.compaction import Compactor
from slate_ops.engine import Db, DbReader
from slate_ops.runtime import SYSTEM_RUNTIME, ManualRuntime

GRACE_SECONDS = 2.0
"""How long the threads a test started get to finish after it (a pool's workers, a closed
writer's flusher winding down) before they count as leaked."""

PROCESS_THREADS: dict[str, str] = {
    "slate_ops-slatedb-loop": "slate_ops.engines.slatedb.loop.LOOP: one asyncio loop for SlateDB's "
    "binding per process, started on first use and kept for the process's lifetime by design",
}
"""Threads (by name prefix) that live as long as the process, each with the reason."""

PROCESS_THREAD_MODULES: dict[str, str] = {
    "pyspark": "the SparkSession's accumulator server: one per SparkContext, which tests reuse "
    "(SparkSession.getActiveSession) rather than start again, at ~5-15 s each",
    "py4j": "the JVM gateway's threads of the SparkSession, kept for the process's lifetime",
}
"""Threads (by the module of the object whose method they run, or of their own class) that live as
long as the process, each with the reason."""

_fixture_threads: set[threading.Thread] = set()
"""Threads started while a fixture of a scope wider than a test was set up."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "leaves_threads(reason): the test leaves threads running on purpose (the guard in "
        "tests/support/threads.py does not check it); say why",
    )


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Any:
    if fixturedef.scope == "function":
        return (yield)
    before = set(threading.enumerate())
    try:
        return (yield)
    finally:
        _fixture_threads.update(set(threading.enumerate()) - before)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_call_failed] = report.failed
    return report


_call_failed = pytest.StashKey[bool]()


def _target_owner(thread: threading.Thread) -> object:
    """The object whose method the thread runs (a server, for ``serve_forever`` and for the
    ``process_request_thread`` serving one connection), or None. ``_target`` is the standard
    library's private attribute: the only record of what a thread runs."""
    return getattr(getattr(thread, "_target", None), "__self__", None)


def _is_exempt(thread: threading.Thread) -> bool:
    if thread in _fixture_threads or thread.name.startswith(tuple(PROCESS_THREADS)):
        return True
    owner = _target_owner(thread)
    if type(owner or thread).__module__.split(".")[0] in PROCESS_THREAD_MODULES:
        return True
    return owner is not None and any(_target_owner(t) is owner for t in _fixture_threads if t.is_alive())


def new_threads(before: set[threading.Thread], grace: float = GRACE_SECONDS) -> list[threading.Thread]:
    """Threads alive now that were not in ``before`` (and are not exempt), after waiting up to
    ``grace`` seconds for each to end."""
    started = [t for t in threading.enumerate() if t not in before and not _is_exempt(t)]
    for thread in started:
        thread.join(grace)
    return [t for t in started if t.is_alive()]


@pytest.fixture(autouse=True)
def thread_leak_guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    before = set(threading.enumerate())
    opened = _record_engine_instances(monkeypatch)
    unwaited = record_unwaited_compactions(monkeypatch)
    yield
    checked = request.node.get_closest_marker("leaves_threads") is None
    passed = not request.node.stash.get(_call_failed, True)
    leaked = new_threads(before) if checked and passed else []
    recording = list(unwaited.values()) if checked and passed else []
    _stop(opened)
    for compactor in list(unwaited.values()):
        compactor.close()
    if leaked:
        names = ", ".join(sorted(t.name for t in leaked))
        pytest.fail(
            f"the test left {len(leaked)} thread(s) running after {GRACE_SECONDS} s: {names} (close what "
            "the test opened, or mark it leaves_threads with the reason)",
            pytrace=False,
        )
    if recording:
        paths = ", ".join(sorted(c.path for c in recording))
        pytest.fail(
            f'the test left {len(recording)} compactor(s) of {paths} writing their last "completed" record '
            "in the background: close() each compactor (contextlib.closing, or "
            "tests.support.compaction.compact_once) before the test ends or touches its directory",
            pytrace=False,
        )


def _record_engine_instances(monkeypatch: pytest.MonkeyPatch) -> list[Db | DbReader]:
    opened: list[Db | DbReader] = []
    for cls in (Db, DbReader):
        original = cls.__init__

        def recording(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> None:
            _original(self, *args, **kwargs)  # a failed open starts no thread
            opened.append(self)

        monkeypatch.setattr(cls, "__init__", recording)
    return opened


def record_unwaited_compactions(monkeypatch: pytest.MonkeyPatch) -> dict[int, Compactor]:
    """The compactors (by ``id``) whose last ``run_once`` committed, with its "completed" record
    written on a thread, and whose ``wait_recorded`` (which ``close`` and the next ``run_once``
    call) has not run since. A :class:`ManualRuntime` writes that record inline: not counted."""
    unwaited: dict[int, Compactor] = {}
    threaded: weakref.WeakSet[Compactor] = weakref.WeakSet()
    init, run_once, wait_recorded = Compactor.__init__, Compactor.run_once, Compactor.wait_recorded

    def recording_init(self: Compactor, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if not isinstance(kwargs.get("clock", SYSTEM_RUNTIME), ManualRuntime):
            threaded.add(self)

    def recording_run_once(self: Compactor, *args: Any, **kwargs: Any) -> Any:
        report = run_once(self, *args, **kwargs)
        if report is not None and self in threaded:
            unwaited[id(self)] = self
        return report

    def recording_wait_recorded(self: Compactor) -> None:
        unwaited.pop(id(self), None)  # the record's thread has ended when this returns or raises
        wait_recorded(self)

    monkeypatch.setattr(Compactor, "__init__", recording_init)
    monkeypatch.setattr(Compactor, "run_once", recording_run_once)
    monkeypatch.setattr(Compactor, "wait_recorded", recording_wait_recorded)
    return unwaited


def _stop(opened: list[Db | DbReader]) -> None:
    """Stop the threads of writers and readers left open (a test that failed half-way) as a killed
    process would: ``crash()`` joins them without flushing anything."""
    for instance in opened:
        instance.crash()
