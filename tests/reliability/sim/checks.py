"""The full invariant sweep on main (every ``check_every`` steps and at the end), and the final
check that GC left nothing unreferenced behind."""

from __future__ import annotations

from slate_ops import DbOptions, admin
from slate_ops.admin.verify import Severity
from slate_ops.engine.wal_chain import is_data, walk_chain
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import CheckpointExpiredError, CheckpointNotFoundError, ObjectNotFoundError
from slate_ops.manifest.store import ManifestStore
from tests.reliability.sim.actors.gc import referenced_objects
from tests.reliability.sim.context import SimContext
from tests.reliability.sim.invariants import check_reachable
from tests.reliability.sim.runtime import MAIN, WRITER_OPTIONS, TraceEntry, diff


def full_check(ctx: SimContext) -> None:
    """A fresh reader sees every acknowledged write; verify_db and the WAL of main and the clones;
    every live checkpoint, tag and clone reads its pinned content; references and the family."""
    model = ctx.model
    observed = ctx.oracle_read(MAIN)
    lo = max(model.durable, ctx.reader_floor, ctx.oracle_floor)
    ctx.checks["fresh_reader_sees_acknowledged_writes"] += 1
    prefix = model.first_match(observed, lo, model.issued)
    if prefix is None:
        raise ctx.violation(
            f"a fresh reader sees the history at no prefix in [{lo}, {model.issued}] (acknowledged "
            f"{model.durable}, by await_durable {model.durable_writes}); vs the acknowledged state: "
            f"{diff(observed, model.state(model.durable))}"
        )
    ctx.oracle_floor = prefix
    verify(ctx, MAIN)
    now = ctx.clock.now()
    for pinned in list(ctx.pinned.values()):
        if not pinned.live(now):
            del ctx.pinned[pinned.checkpoint_id]
            continue
        try:
            content = ctx.oracle_read(MAIN, pinned.checkpoint_id)
        except (CheckpointNotFoundError, CheckpointExpiredError, ObjectNotFoundError) as error:
            raise ctx.violation(
                f"the live {pinned.kind} {pinned.name or pinned.checkpoint_id} cannot be read: "
                f"{type(error).__name__}: {error}"
            ) from error
        ctx.checks["pinned_content_unchanged"] += 1
        if content != pinned.content:
            raise ctx.violation(
                f"the {pinned.kind} {pinned.name or pinned.checkpoint_id} reads differently than when "
                f"created: {diff(content, pinned.content)}"
            )
    for clone in ctx.clones.values():
        if clone.state != "live":
            continue
        verify(ctx, clone.path)
        content = ctx.oracle_read(clone.path)
        ctx.checks["clone_content_unchanged"] += 1
        if content != clone.content:
            raise ctx.violation(f"{clone.path} reads differently: {diff(content, clone.content)}")
    check_reachable(ctx)
    if ctx.family is not None:
        ctx.family.check_all()
    ctx.trace.append(TraceEntry(ctx.step, "check", "invariants", f"ok prefix {prefix}/{model.issued}"))


def verify(ctx: SimContext, path: str) -> None:
    results = admin.verify_db(path, ctx.inner, l0_max_ssts=1_000_000, clock=ctx.clock, max_workers=1)
    ctx.checks["verify_db"] += 1
    errors = [p for r in results if not r.passed and r.severity is Severity.ERROR for p in r.problems]
    if errors:
        raise ctx.violation(f"verify_db({path}) reports: {errors[:4]}")
    check_wal(ctx, path)


def check_wal(ctx: SimContext, path: str) -> None:
    """Every WAL SST a reader of the latest manifest or of a live checkpoint replays exists."""
    manifests = ManifestStore(ctx.inner, path)
    latest = manifests.read_latest_required().value
    wal = WalStore(ctx.inner, manifests.path)
    listing = wal.list_sizes()
    ids = {wal_id for wal_id, _ in listing}
    upto = max(ids, default=0)
    writer = ctx.db if path == MAIN else None
    if writer is not None and not writer.is_closed:
        # A live writer's WAL N + 1 may have landed while N failed and is retried: the chain need only
        # reach the WAL it has landed in order (docs/design/engine.md, "The writer's WAL pipeline").
        upto = min(upto, writer.next_wal_id - 1)
    needed = [(f"latest manifest of {path}", latest, upto)]
    for checkpoint in latest.checkpoints:
        if not checkpoint.is_expired(ctx.clock.now()):
            pinned = manifests.read(checkpoint.manifest_id).value
            needed.append((f"checkpoint {checkpoint.name or checkpoint.id}", pinned, pinned.wal_id_last_seen))
    ctx.checks["wal_needed_exists"] += 1
    for what, manifest, upto in needed:
        # The WAL chain (docs/design/engine.md, "Several WAL PUTs in flight") must reach past ``upto``:
        # it ends at its first missing id, so a missing WAL SST ends it early.
        end = walk_chain(listing, manifest.replay_after_wal_id, upto).end
        # Past the end of the latest manifest's chain, a writer that crashed (or failed) with PUTs in
        # flight may have left the ones it started together with the missing one: nothing of theirs was
        # acknowledged, and the next opener fences the gap (its window covers them).
        in_flight = max(WRITER_OPTIONS.wal_puts_in_flight, DbOptions().wal_puts_in_flight)
        if end <= upto and not (manifest is latest and upto < end + in_flight):
            raise ctx.violation(f"{what} needs WAL SST {end} (the chain up to {upto}), which is missing")


def check_nothing_left_behind(ctx: SimContext) -> None:
    """After the final GC, no unreferenced SST or WAL SST of main older than min_age remains."""
    cutoff = ctx.clock.now() - ctx.config.min_age_s
    referenced = referenced_objects(ctx, MAIN)
    wal = WalStore(ctx.inner, MAIN)
    left = [
        m.key
        for m in ctx.inner.list(MAIN + "/")
        if (m.key.startswith(MAIN + "/compacted/") or m.key.startswith(wal.directory + "/"))
        and m.key not in referenced
        and is_data(m.size)  # WAL fences (window or legacy empty) are kept on purpose
        and m.last_modified.timestamp() <= cutoff
    ]
    ctx.checks["gc_leaves_nothing_unreferenced"] += 1
    if left:
        raise ctx.violation(
            f"after GC, {len(left)} unreferenced object(s) older than min_age remain: {left[:5]}"
        )
