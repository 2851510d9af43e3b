"""The GC actor (runs and dry runs on main and the admin actor's clones), and the check every GC run
of the simulation goes through: nothing referenced, nothing outside the database, no database that
was not destroyed is deleted, and a dry run writes nothing."""

from __future__ import annotations

from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import GcFailedError
from slate_ops.gc import GarbageCollector, GcReport
from slate_ops.manifest.model import Manifest, resolve_sst_path
from slate_ops.manifest.store import ManifestStore
from tests.reliability.sim.context import SimContext
from tests.reliability.sim.runtime import MAIN, SimStore


class GcActor:
    def __init__(self, ctx: SimContext) -> None:
        self.ctx = ctx
        self.gc: GarbageCollector | None = None
        self.store: SimStore | None = None

    def step(self, forced: str | None) -> tuple[str, str]:
        ctx = self.ctx
        if self.gc is None:
            self.store = ctx.store_for("gc")
            self.gc = GarbageCollector(MAIN, self.store, ctx.gc_options(), clock=ctx.clock)
        live_clones = [c.path for c in ctx.clones.values() if c.state == "live"]
        action = ctx.rng.choices(
            ("run", "dry_run", "clone", "crash_mid"), weights=(70, 15, 8 if live_clones else 0, 5)
        )[0]
        path = ctx.rng.choice(live_clones) if ctx.doing(action) == "clone" else MAIN
        gc = self.gc
        if path != MAIN:
            assert self.store is not None
            gc = GarbageCollector(path, self.store, ctx.gc_options(), clock=ctx.clock)
        if action == "crash_mid":
            assert self.store is not None
            self.store.faulty.crash_after(ctx.rng.randrange(0, 15))
        outcome = collect(ctx, gc, path, dry_run=action == "dry_run", store=self.store)
        if action == "crash_mid":
            self.drop()
            ctx.figures["gc_crashes"] += 1
            outcome += "; gc process died"
        return action, outcome

    def drop(self) -> None:
        self.gc = self.store = None


def collect(
    ctx: SimContext, gc: GarbageCollector, path: str, *, dry_run: bool, store: SimStore | None
) -> str:
    """One GC run, checked: nothing referenced, nothing outside ``path``, no database deleted
    that was not destroyed; a dry run changes nothing (checked on ``store``'s requests)."""
    latest = ManifestStore(ctx.inner, path).read_latest()
    destroyed = latest is not None and latest.value.destroyed_at_s is not None
    referenced = referenced_objects(ctx, path)
    faulty = store.faulty if store is not None else None
    calls_before = len(faulty.calls) if faulty is not None else 0
    report: GcReport | None = None
    try:
        report = gc.run_once(dry_run=dry_run)
        outcome = "ok"
    except Exception as error:
        if isinstance(error, GcFailedError) and isinstance(error.report, GcReport):
            report = error.report
        if not ctx.known(path):
            return f"failed: {type(error).__name__}; the clone was dropped meanwhile"
        outcome = ctx.outcome(error)
    if not ctx.known(path):
        return "ok; the clone was dropped meanwhile"
    if report is not None:
        deleted = report.deleted_keys()
        ctx.checks["gc_deletes_nothing_referenced"] += 1
        if report.destroyed and not destroyed:
            raise ctx.violation(f"GC of {path} deleted the database, which was not destroyed")
        kept = set() if report.destroyed else referenced  # a due destroyed database goes whole
        wrong = sorted(deleted & kept) + sorted(k for k in deleted if not k.startswith(path + "/"))
        if wrong:
            raise ctx.violation(
                f"GC of {path}{' (dry run)' if dry_run else ''} deleted (or planned) referenced or "
                f"foreign objects: {wrong[:5]}"
            )
        if not dry_run:
            ctx.figures["gc_deleted_objects"] += len(deleted)
            ctx.figures["gc_detached_external_dbs"] += len(report.clones_detached)
            ctx.figures["gc_deleted_destroyed_dbs"] += report.destroyed
        outcome += f" {'would delete' if dry_run else 'deleted'} {len(deleted)}"
        if report.clones_detached:
            outcome += f", detached {len(report.clones_detached)}"
        if report.destroyed:
            outcome += ", the destroyed database"
    if dry_run and faulty is not None:
        # Its own requests: other actors may run during a stall of the dry run.
        writes = [(op, key) for op, key in faulty.calls[calls_before:] if op in ("put", "delete")]
        ctx.checks["gc_dry_run_writes_nothing"] += 1
        if writes:
            raise ctx.violation(f"a GC dry run of {path} wrote to the store: {writes[:5]}")
    return outcome


def referenced_objects(ctx: SimContext, path: str) -> set[str]:
    """Every object GC of ``path`` must keep now: the SSTs (resolved as readers resolve them) and
    WAL SSTs of the latest manifest and of every live checkpoint's manifest, and what the live
    writer and reader have loaded."""
    manifests = ManifestStore(ctx.inner, path)
    latest = manifests.read_latest()
    if latest is None:
        return set()
    now = ctx.clock.now()
    wal = WalStore(ctx.inner, manifests.path)
    wal_ids = wal.list_ids()
    keys: set[str] = set()

    def add(manifest: Manifest, upto: int) -> None:
        keys.update(resolve_sst_path(manifest, manifests.path, s) for s in manifest.ssts)
        keys.update(wal.key(i) for i in wal_ids if manifest.replay_after_wal_id < i <= upto)

    add(latest.value, wal_ids[-1] if wal_ids else 0)
    for checkpoint in latest.value.checkpoints:
        if not checkpoint.is_expired(now):
            pinned = manifests.read(checkpoint.manifest_id).value
            add(pinned, pinned.wal_id_last_seen)
    if path == MAIN:
        checkpoints = {c.id for c in latest.value.checkpoints if not c.is_expired(now)}
        if ctx.db is not None and ctx.db.writer_checkpoint_id in checkpoints:
            keys |= ctx.db.sst_object_keys
        if ctx.reader is not None and ctx.reader.checkpoint_id in checkpoints:
            keys |= ctx.reader.sst_object_keys
    return keys
