"""Interleavings of the fencing protocol, explored through the real code (issue 19).

The default run explores the two writers and the writer across a destroy with a preemption bound of 2
(the explorer switches away from an actor that could go on at most twice; switches at an actor's end
or block, and between the threads of one actor, are free) and the compactor takeover with a bound of
1 — :data:`~tests.reliability.interleavings.run.CI_RUNS`, a few seconds.
``-m slow`` runs :data:`~tests.reliability.interleavings.run.FULL_RUNS` (every scenario exhaustively,
no bound; about 6 minutes) and records the counts in
tests/reliability/results/interleavings.json (format: ``tests/reliability/interleavings/run.py``).
Not in CI's second step (``-m "cluster or e2e"``): at about 6 minutes it is twice that step's budget
of about 3. Also here: the harness is deterministic (same schedules, same counts; a replay with an
actor stalled longer than any timeout reaches the same parked calls), and the proof can fail (a writer
without its epoch check is caught).

Replay by hand: ``python -m tests.reliability.interleavings.run --scenario two_writers --bound none``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from slate_ops.engine.wal_buffer import WalBuffer
from slate_ops.gc import destroyed
from slate_ops.manifest.model import Manifest
from slate_ops.manifest.store import WRITER_EPOCH
from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.txn.fencing import FenceableStore
from tests.reliability.interleavings import run as runner
from tests.reliability.interleavings.explorer import (
    Call,
    Context,
    Explorer,
    Outcome,
    Report,
    Unsettled,
    dependent,
)
from tests.reliability.interleavings.scenarios import TwoWriters, WriterAcrossDestroy


@pytest.fixture(autouse=True)
def _quiet_logs() -> Iterator[None]:
    """Every fenced actor logs its fence; thousands of executions would flood the output."""
    logging.disable(logging.CRITICAL)
    yield
    logging.disable(logging.NOTSET)


def _explore(run: runner.Run) -> Report:
    report = runner.explore(run)
    print(report.summary())
    for violation in report.violations:
        print(violation.render())
    return report


def _assert_holds(report: Report) -> None:
    assert report.complete, report.summary()
    assert report.interleavings > 0
    first = report.violations[0].render() if report.violations else ""
    assert report.violating == 0, f"{report.summary()}\n{dict(report.problem_kinds)}\n{first}"


@pytest.mark.parametrize("run", runner.CI_RUNS, ids=lambda r: f"{r.scenario}-bound{r.preemption_bound}")
def test_invariants_hold_in_every_interleaving(run: runner.Run) -> None:
    _assert_holds(_explore(run))


@pytest.mark.slow
@pytest.mark.timeout(1800)  # about 6 minutes alone, more on a loaded machine
def test_full_exploration_recorded() -> None:
    """Every scenario at its full configuration; the counts go to the result file."""
    data = runner.run_json(runner.FULL_RUNS, "pytest -m slow tests/reliability/interleavings")
    runner.record("full", data)
    for scenario in data["scenarios"]:
        assert scenario["complete"], scenario["name"]
        assert scenario["violating"] == 0, f"{scenario['name']}: {scenario['first_violation']}"


def test_same_schedules_every_run() -> None:
    """Determinism: two explorations of the same scenario visit the same number of interleavings and
    sleep-set blocked prefixes with the same outcomes (a replay that reached another set of parked
    calls would have raised Nondeterminism)."""
    first = Explorer(TwoWriters(), preemption_bound=0, classify=TwoWriters().classify).explore()
    second = Explorer(TwoWriters(), preemption_bound=0, classify=TwoWriters().classify).explore()
    assert first.interleavings > 1
    assert (first.interleavings, first.sleep_blocked, first.outcomes) == (
        second.interleavings,
        second.sleep_blocked,
        second.outcomes,
    )


def test_a_writer_without_its_epoch_check_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The proof can fail: writers whose manifest commits and confirmations skip the epoch check
    (a planted bug) let the fenced writer acknowledge after the newer one opened, and the explorer
    reports it with its schedule."""
    original = FenceableStore.check

    def unchecked(self: FenceableStore[Manifest], value: Manifest) -> None:
        if self.field is not WRITER_EPOCH:
            original(self, value)

    monkeypatch.setattr(FenceableStore, "check", unchecked)
    report = Explorer(TwoWriters(), preemption_bound=1, stop_on_violation=True).explore()
    assert report.violating == 1
    rendered = report.violations[0].render()
    assert "fenced writer acknowledged" in rendered or "not fenced" in rendered, rendered
    assert "schedule:" in rendered


def test_independence_is_conservative() -> None:
    """Only calls of different actors that both read, or touch disjoint keys, commute."""
    list_wal = Call("A", "main", "list", "db/wal/")
    put_wal = Call("B", "main", "put", "db/wal/00000000000000000004.sst")
    get_manifest = Call("B", "main", "get", "db/manifest/00000000000000000004.manifest")
    put_manifest = Call("A", "main", "put", "db/manifest/00000000000000000004.manifest")
    assert dependent(list_wal, put_wal)
    assert dependent(get_manifest, put_manifest)
    assert not dependent(list_wal, get_manifest)
    assert not dependent(put_wal, put_manifest)
    assert dependent(list_wal, Call("A", "flusher", "get", "db/gc/manifest.boundary"))  # same actor


class _Releaser:
    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def close(self) -> None:
        self.event.set()


class _Unlocker:
    def __init__(self, lock: threading.Lock) -> None:
        self.lock = lock

    def close(self) -> None:
        self.lock.release()


class _Synthetic:
    """Two actors over a memory store: X reads a key and then waits (forever, or not at all), or
    retries a read without end; Y writes the key. For the explorer's own verdicts."""

    name = "synthetic"
    actors: tuple[str, ...] = ("X", "Y")

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour

    def setup(self) -> tuple[ObjectStore, Any]:
        return MemoryStore(), threading.Event()

    def act(self, actor: str, ctx: Context, setup: Any) -> None:
        if actor == "Y":
            key = "db/wal/k" if self.behaviour == "independent" else "db/manifest/k"
            ctx.op("put", lambda: ctx.store.put(key, b"v"))
            return
        if self.behaviour == "lock":
            lock = threading.Lock()
            lock.acquire()
            ctx.keep(_Unlocker(lock))  # what the explorer closes when the execution ends
            ctx.op("lock", lock.acquire)  # a plain lock nobody releases: it never looks blocked
        if self.behaviour == "livelock":
            while True:
                ctx.store.list("db/manifest/")
        ctx.op("get", lambda: ctx.store.list("db/manifest/"))
        if self.behaviour == "wait":
            ctx.keep(_Releaser(setup))  # what the explorer closes when it abandons the execution
            ctx.op("wait", lambda: setup.wait())  # nobody else sets it: waits outside the store

    def check(self, outcome: Outcome) -> list[str]:
        return []


def test_an_actor_waiting_outside_the_store_is_reported_with_its_schedule() -> None:
    report = Explorer(_Synthetic("wait"), stop_on_violation=True).explore()
    assert report.violating == 1
    rendered = report.violations[0].render()
    assert "waits forever: X" in rendered and "schedule:" in rendered, rendered


def test_a_settle_that_never_ends_fails_instead_of_going_on() -> None:
    """X blocks on a plain lock, which never looks blocked: the explorer cannot know whether X will
    make another call, so it stops with Unsettled and the threads' stacks rather than go on without
    X (which would make the schedule depend on how long it waited)."""
    with pytest.raises(Unsettled, match="actor:X"):
        Explorer(_Synthetic("lock"), settle_timeout_s=0.5).explore()


def test_an_actor_retrying_without_end_is_reported() -> None:
    report = Explorer(_Synthetic("livelock"), max_calls=20, stop_on_violation=True).explore()
    assert report.violating == 1
    assert "retries without end: X" in report.violations[0].render()


def test_sleep_sets_explore_each_trace_once() -> None:
    """X lists ``db/manifest/`` while Y puts a key: under the prefix the two orders differ (two
    traces, both explored); elsewhere they commute (one trace: the other order is cut)."""
    conflicting = Explorer(_Synthetic("none")).explore()
    assert (conflicting.interleavings, conflicting.violating) == (2, 0)
    independent = Explorer(_Synthetic("independent")).explore()
    assert (independent.interleavings, independent.sleep_blocked) == (1, 1)


def _preferring(actor: str) -> Callable[[list[Call]], Call]:
    """A schedule: ``actor``'s first parked call whenever it has one, else the first parked call."""
    return lambda enabled: next((c for c in enabled if c.actor == actor), enabled[0])


def _stalled(function: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(seconds)
        return function(*args, **kwargs)

    return slow


STALL_S = 1.5
"""Longer than the explorer used to wait before it went on without a running actor (1 s): what a
garbage-collection pause on a loaded machine did to the full run (issue 23)."""


@pytest.mark.parametrize(
    ("first", "stall"),
    [
        # D's hard destroy computes its tombstone between its WAL fence and the tombstone's PUT;
        # W's first call waits parked all along.
        (
            "D",
            lambda m: m.setattr(
                destroyed,
                "release_external_checkpoints",
                _stalled(destroyed.release_external_checkpoints, STALL_S),
            ),
        ),
        # W's flusher thread acknowledges its WAL PUT (the confirmer, inline under the explorer's
        # runtime) while W's main thread waits for durability.
        ("W", lambda m: m.setattr(WalBuffer, "acknowledge", _stalled(WalBuffer.acknowledge, STALL_S))),
    ],
    ids=["destroyer-stalled", "writer-flusher-stalled"],
)
def test_a_stalled_actor_reaches_the_same_parked_calls(
    monkeypatch: pytest.MonkeyPatch, first: str, stall: Callable[[pytest.MonkeyPatch], None]
) -> None:
    """Determinism by construction: one schedule of ``writer_across_destroy`` run twice, the second
    time with one actor stalled for STALL_S between two store calls, reaches the same parked calls at
    every step — the explorer waits for a running thread however long it takes, never goes on
    without its next call."""
    explorer = Explorer(WriterAcrossDestroy())
    steady = explorer.follow(_preferring(first))
    stall(monkeypatch)
    started = time.monotonic()
    slowed = explorer.follow(_preferring(first))
    assert time.monotonic() - started >= STALL_S  # the stall happened
    assert len(steady) > 20 and steady[-1] == []  # every actor finished
    for step, (before, after) in enumerate(zip(steady, slowed, strict=True), 1):
        assert [str(c) for c in after] == [str(c) for c in before], f"step {step}"
