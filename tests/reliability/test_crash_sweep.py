"""Crash-point sweep (issue 8): crash the workload of :mod:`tests.reliability.workload` at every
object-store call, finish it, and check that nothing acknowledged was lost, no manifest references
a missing object, every database's external SSTs are pinned by final checkpoints of its own
(``admin.check_references``), GC leaves nothing unreferenced, and every interrupted operation
completes — also across the workload's soft destroy of the source, hard destroy of a shard and GC
past the grace period.

The default run tries every ``ceil(N / 60)``-th of the N crash points with one crash, and a few
with a second crash in the resumed run (about a minute). The full sweeps, every point with one
crash and every point with two, are marked ``slow``::

    .venv/bin/pytest -m slow tests/reliability/test_crash_sweep.py -s

``SLATE_OPS_CRASH_POINTS=17,204`` makes ``test_crash_sweep`` try exactly those points (to replay a
failure; a failed point's store directory is kept and named in the failure).
"""

from __future__ import annotations

import logging
import os
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from slate_ops.admin import clone, rescale
from slate_ops.engine import db as writer_module
from slate_ops.engine.wal_chain import is_data
from slate_ops.engine.wal_store import WalStore
from slate_ops.gc import collector as gc_collector
from slate_ops.gc import snapshot as gc_snapshot
from slate_ops.manifest.model import Manifest
from slate_ops.objstore.base import ObjectMeta
from slate_ops.runtime import Runtime
from tests.reliability import workload
from tests.reliability.workload import (
    CallCount,
    SweepReport,
    count_crash_points,
    make_template,
    second_crash,
    sweep,
    sweep_point,
)

DEFAULT_POINTS = 60
"""Crash points the default run tries with one crash: every ``ceil(N / 60)``-th (plus the last)."""
DEFAULT_DOUBLE_POINTS = 12
"""Crash points the default run tries with a second crash in the resumed run."""


def _scratch(fallback: Path) -> Iterator[Path]:
    """A directory for the stores, on tmpfs when there is one: the LocalStore fsyncs every object and
    its directory, which on a busy disk costs most of a run. A simulated crash is a process crash,
    not a power cut, so where the page cache lives changes nothing the checks look at."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        with tempfile.TemporaryDirectory(dir=shm, prefix="slate-ops-sweep-") as directory:
            yield Path(directory)
    else:
        yield fallback


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Iterator[Path]:
    yield from _scratch(tmp_path)


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, CallCount]]:
    """A template, a directory for runs, and the workload's call count (which also checks it)."""
    for directory in _scratch(tmp_path_factory.mktemp("sweep")):
        template = directory / "template"
        make_template(template)
        yield template, directory, count_crash_points(template, directory)


@pytest.fixture(autouse=True)
def quiet_logs() -> Iterator[None]:
    """A crash makes background flushes and GC tasks log what failed, by design: thousands of lines."""
    logging.disable(logging.CRITICAL)
    yield
    logging.disable(logging.NOTSET)


def report(result: SweepReport) -> str:
    line = result.summary()
    print(f"\n{line}\n{result.details()}")
    return line


def first_point_of(step: str, count: CallCount) -> int:
    """The first crash point that lands in ``step``."""
    before = 0
    for name, points in count.per_step.items():
        if name == step:
            return before
        before += points
    raise AssertionError(step)


def test_the_workload_is_deterministic_and_passes_every_check(
    counted: tuple[Path, Path, CallCount],
) -> None:
    template, directory, count = counted
    assert count_crash_points(template, directory) == count
    assert count.crash_points > 300
    assert sum(count.per_step.values()) == count.crash_points
    assert list(count.per_step) == [step.__name__ for step in workload.STEPS]
    assert all(points > 0 for points in count.per_step.values())


def test_crash_sweep(sweep_dir: Path) -> None:
    chosen = os.environ.get("SLATE_OPS_CRASH_POINTS")
    points = [int(p) for p in chosen.split(",")] if chosen else None
    result = sweep(sweep_dir, max_points=DEFAULT_POINTS, points=points)
    report(result)
    assert not result.failures, result.details()
    assert result.lost == 0
    if points is None:
        assert len(result.tried) >= DEFAULT_POINTS // 2
        # Every step of the workload was interrupted at least once.
        assert {r.crashed_in[0] for r in result.tried} == {s.__name__ for s in workload.STEPS}


def test_crash_sweep_with_a_crash_in_the_resumed_run(sweep_dir: Path) -> None:
    """Recovery itself interrupted: a second crash in the resumed run, then a run that finishes."""
    result = sweep(sweep_dir, max_points=DEFAULT_DOUBLE_POINTS, offset=3, double=True)
    report(result)
    assert not result.failures, result.details()
    assert result.lost == 0
    assert all(len(r.crashed_in) == 2 for r in result.tried)  # the resumed run has > 41 calls


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_crash_sweep_every_point(sweep_dir: Path) -> None:
    result = sweep(sweep_dir)
    report(result)
    assert len(result.tried) == result.count.crash_points
    assert not result.failures, result.details()
    assert result.lost == 0


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_crash_sweep_every_point_with_a_crash_in_the_resumed_run(sweep_dir: Path) -> None:
    result = sweep(sweep_dir, double=True)
    report(result)
    assert len(result.tried) == result.count.crash_points
    assert not result.failures, result.details()
    assert result.lost == 0


# --- the checks can fail: each test breaks the engine on purpose ----------------------------------


def test_a_writer_that_does_not_replay_its_wal_is_caught(
    counted: tuple[Path, Path, CallCount], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes acknowledged only in the WAL are lost once the next writer flushes past them: the
    reader after a crash later in that step misses them."""
    template, directory, count = counted

    class NoReplay(WalStore):  # the writer's WAL reads nothing back (readers still tail the WAL)
        def read_many(
            self, segments: Iterable[tuple[int, int]], parallelism: int | None = None
        ) -> Iterator[Any]:
            return iter(())

    monkeypatch.setattr(writer_module, "WalStore", NoReplay)
    result = sweep_point(template, directory, first_point_of("write_main_b", count) + 20)
    assert result.lost > 0 and result.error is not None and "acknowledged write(s) lost" in result.error


def test_an_acknowledgement_without_a_wal_sst_is_caught_as_a_lost_write(
    counted: tuple[Path, Path, CallCount], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A WAL write that never happened taken for success: the flush acknowledges writes that the
    crash then loses. (A crash taken for success no longer bites: the acknowledgement waits for an
    epoch confirmation after the WAL write, and the crashed process makes no further request.)"""
    template, directory, count = counted
    original = WalStore.create

    def dropped_taken_for_success(self: WalStore, wal_id: int, data: bytes, *rest: str | None) -> bool:
        return True if is_data(len(data)) else original(self, wal_id, data, *rest)  # fences are still created

    monkeypatch.setattr(WalStore, "create", dropped_taken_for_success)
    first = first_point_of("write_main_a", count)
    results = [
        sweep_point(template, directory, n) for n in range(first, first + count.per_step["write_main_a"])
    ]
    assert any(r.lost > 0 and "acknowledged write(s) lost" in (r.error or "") for r in results), results


def test_gc_that_ignores_checkpoints_is_caught(
    counted: tuple[Path, Path, CallCount], monkeypatch: pytest.MonkeyPatch
) -> None:
    """GC deleting what only a checkpoint (the workload's, a tag, a clone's) still references."""
    template, directory, _ = counted
    monkeypatch.setattr(gc_snapshot.Snapshot, "checkpointed", lambda self: list[Manifest]())
    monkeypatch.setattr(gc_snapshot, "pinned_since", lambda manifests, cutoff: set[int]())
    result = sweep_point(template, directory, 0)
    assert result.error is not None and "is missing" in result.error


def test_gc_that_keeps_garbage_is_caught(
    counted: tuple[Path, Path, CallCount], monkeypatch: pytest.MonkeyPatch
) -> None:
    """GC that never deletes a compacted SST: its dry run agrees, the reference check does not."""
    template, directory, _ = counted
    monkeypatch.setattr(gc_collector, "plan_compacted", lambda *args: list[ObjectMeta]())
    result = sweep_point(template, directory, 0)
    assert result.error is not None and "unreferenced SSTs survive GC" in result.error


def test_shards_sharing_a_final_checkpoint_are_caught(
    counted: tuple[Path, Path, CallCount], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 12, defect 1 planted again: both shards of a split get one final checkpoint on the
    source. The hard destroy of one shard releases it, and the source's GC then deletes SSTs the
    other shard reads; the reference check says so before any read fails."""
    template, directory, _ = counted
    original = clone.clone_manifest

    def one_final_id_per_split(
        at_source: Manifest, parent: str, source_id: uuid.UUID, *, clock: Runtime
    ) -> Manifest:
        shared = uuid.uuid5(source_id, "shared")
        return original(at_source, parent, source_id, clock=clock, new_final_id=lambda: shared)

    monkeypatch.setattr(rescale, "clone_manifest", one_final_id_per_split)
    result = sweep_point(template, directory, 0)
    assert result.error is not None and "broken references" in result.error
    assert "db/high: missing_sst" in result.error and "db/high: unpinned_external" in result.error


def test_second_crashes_are_spread_over_the_resumed_run() -> None:
    assert {second_crash(n) for n in range(200)} == set(range(1, 42))
