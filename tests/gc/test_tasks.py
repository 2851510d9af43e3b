"""The one GC task interface (docs/design/gc.md, "One task interface"): every task plans without
writing, the dry run is the plans, and a real run's execution deletes exactly what was planned."""

from __future__ import annotations

from datetime import timedelta

import slate_ops.gc.collector as collector_module
from slate_ops import Db
from slate_ops.admin import create_clone
from slate_ops.compaction import Compactor, CompactorOptions
from slate_ops.gc import ALL_RESOURCES, GarbageCollector, GcOptions
from slate_ops.gc.snapshot import read_snapshot
from slate_ops.gc.task import NAMESPACES, GcPlan, GcTask
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.wrappers import CountingStore
from slate_ops.runtime import ManualRuntime
from tests.support.engine import quiet
from tests.support.gc import keys, latest, write_rounds


def garbage_of_every_kind(store: MemoryStore, clock: ManualRuntime) -> None:
    """A clone with something for every task: old manifests, ``.compactions`` files, WAL SSTs and
    compacted SSTs, an expired compaction checkpoint, and a parent it no longer reads."""
    write_rounds(store, clock, 3, path="parent")
    create_clone("clone", "parent", store, clock=clock)
    write_rounds(store, clock, 3, path="clone")
    options = CompactorOptions(compaction_checkpoint_lifetime=timedelta(seconds=1))
    for full in (False, True):  # two compactions: two .compactions files, the second rewrites everything
        with Db.open("clone", store, quiet(), clock=clock) as db:
            db.put(b"more", b"x")
            db.flush_memtable()
        compactor = Compactor("clone", store, options, clock=clock)
        try:
            assert compactor.run_once(full=full) is not None
        finally:
            compactor.close()
    assert latest(store, "clone")[1].external_dbs[0].sst_ids == ()
    clock.advance(10_000)


def planned(collector: GarbageCollector, store: ObjectStore) -> list[tuple[GcTask, GcPlan]]:
    run = collector_module._Run(collector, dry_run=False)
    snapshot = read_snapshot(ManifestStore(store, collector.path), run.now, history_cutoffs=run.history())
    assert snapshot is not None
    plans = []
    for task in run.tasks(snapshot):
        plan = task.plan()
        assert plan is not None
        plans.append((task, plan))
    return plans


def test_every_task_plans_without_writing_and_executes_exactly_its_plan(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    garbage_of_every_kind(clocked_memory_store, clock)
    counting = CountingStore(clocked_memory_store)
    plans = planned(GarbageCollector("clone", counting, GcOptions(), clock=clock))
    assert {task.resource for task, _ in plans} == ALL_RESOURCES - {"database"}
    assert counting.counts.get("put", 0) == counting.counts.get("delete", 0) == 0  # planning wrote nothing
    for _, plan in plans:  # something to do for every task, each deletion with its reason
        assert plan.deletions or plan.checkpoints or plan.detach, plan.resource
        assert all(d.reason for d in plan.deletions)
        assert not plan.deletions or plan.resource in NAMESPACES

    # the dry run is the plans: the same objects, checkpoints and clones, and still no write
    dry = GarbageCollector("clone", counting, GcOptions(), clock=clock).run_once(dry_run=True)
    assert counting.counts.get("put", 0) == counting.counts.get("delete", 0) == 0
    assert dry.deleted_keys() == set().union(*(plan.keys for _, plan in plans))
    by_resource = {plan.resource: plan for _, plan in plans}
    assert {c.id for c in dry.checkpoints_expired} == {c.id for c in by_resource["checkpoints"].checkpoints}
    assert dry.clones_detached == tuple(e.path for e in by_resource["clones"].detach)

    # execute each plan (reference-changing tasks first, as a run does): exactly the plan is deleted
    for task, plan in sorted(plans, key=lambda p: not p[0].changes_references):
        before = keys(clocked_memory_store, "")
        counting.reset()
        outcome = task.execute(plan)
        assert not outcome.errors
        assert before - keys(clocked_memory_store, "") == plan.keys, task.resource
        assert counting.counts.get("delete", 0) == len(plan.deletions)
        if outcome.report is not None:
            assert {d.key for d in outcome.report.deleted} == plan.keys
        assert {c.id for c in outcome.expired} == {c.id for c in plan.checkpoints}
        assert outcome.detached == tuple(e.path for e in plan.detach)
