"""The admin actor on main: checkpoints (also from another checkpoint), refreshes and deletes, tags,
clones and hard-destroyed clones. An interrupted clone, clone drop or tag is re-run until it completes."""

from __future__ import annotations

import math
from datetime import timedelta

from slate_ops import admin
from slate_ops.config import CheckpointOptions
from slate_ops.errors import (
    CheckpointExpiredError,
    CheckpointNotFoundError,
    CloneWalMissingError,
    DbNotFoundError,
    TagExistsError,
    TagNotFoundError,
)
from tests.reliability.sim.context import Clone, SimContext
from tests.reliability.sim.pins import resolve_clone, track_checkpoint
from tests.reliability.sim.runtime import MAIN, SimStore, TraceEntry

TAG_NAMES = tuple(f"t{i}" for i in range(5))


class AdminActor:
    def __init__(self, ctx: SimContext) -> None:
        self.ctx = ctx
        self.store: SimStore | None = None
        self.pending_tag: str | None = None  # an interrupted create_tag, to re-run
        self.tag_state: dict[str, str] = {}  # "absent", "present" (tracked in ctx.pinned) or "unknown"
        self.clone_counter = 0
        self._tag_name = ""  # the tag of the call in progress, and what was known of it before
        self._tag_expected = "absent"

    def step(self, forced: str | None) -> tuple[str, str]:
        ctx = self.ctx
        if self.store is None:
            self.store = ctx.store_for("admin")
        store = self.store
        pending = next((c for c in ctx.clones.values() if c.state != "live"), None)
        if pending is not None:
            action = "re-run " + ("clone" if pending.state == "creating" else "drop_clone")
        elif self.pending_tag is not None:
            action = "re-run tag"
        else:
            live_clones = sum(1 for c in ctx.clones.values() if c.state == "live")
            action = ctx.rng.choices(
                ("checkpoint", "checkpoint_from", "refresh", "delete_checkpoint", "tag", "delete_tag",
                 "clone", "drop_clone"),
                weights=(20, 4, 5, 6, 10, 6, 6 if live_clones < 3 else 0, 4 if live_clones else 0),
            )[0]  # fmt: skip
        ctx.doing(action)
        crash = ctx.crashes()
        if crash:
            store.faulty.crash_after(ctx.rng.randrange(0, 8))
        try:
            outcome = self._act(store, action.removeprefix("re-run "), pending)
        except Exception as error:
            outcome = self._error(action, error, pending)
        if crash or outcome == "crashed":
            self.store = None
            ctx.figures["admin_crashes"] += 1
            outcome += "; admin process died"
        return action, outcome

    def finish_interrupted(self, store: SimStore) -> None:
        """Re-run every interrupted clone, clone drop and tag: each must complete now."""
        ctx = self.ctx
        for clone in [c for c in ctx.clones.values() if c.state != "live"]:
            action = "clone" if clone.state == "creating" else "drop_clone"
            try:
                outcome = self._act(store, action, clone)
            except Exception as error:
                outcome = self._error(action, error, clone)
                if clone.state == "dropping":
                    outcome += "; " + self._act(store, "drop_clone", clone)
            ctx.trace.append(TraceEntry(ctx.step, "final", f"re-run {action}", outcome))
        if self.pending_tag is not None:
            outcome = self._act(store, "tag", None)
            ctx.trace.append(TraceEntry(ctx.step, "final", "re-run tag", outcome))

    def _act(self, store: SimStore, action: str, pending: Clone | None) -> str:
        ctx = self.ctx
        now = ctx.clock.now()
        live = [p for p in ctx.pinned.values() if p.kind == "checkpoint" and p.live(now, margin=60)]
        if action == "checkpoint":
            lo = ctx.seen_floor()
            lifetime = timedelta(seconds=ctx.rng.choice((60, 300, 900, 3600)))
            created = admin.create_checkpoint(
                MAIN, store, CheckpointOptions(lifetime=lifetime), clock=ctx.clock
            )
            track_checkpoint(ctx, "checkpoint", created.id, lo, ctx.model.issued, "admin")
            return f"ok manifest {created.manifest_id}"
        if action == "checkpoint_from":
            if not live:
                return "skipped: no live checkpoint"
            source = ctx.rng.choice(live)
            created = admin.create_checkpoint(
                MAIN, store, CheckpointOptions(lifetime=timedelta(seconds=600), source=source.checkpoint_id),
                clock=ctx.clock,
            )  # fmt: skip
            track_checkpoint(ctx, "checkpoint", created.id, 0, ctx.model.issued, "admin", source.content)
            return f"ok manifest {created.manifest_id}"
        if action == "refresh":
            if not live:
                return "skipped: no live checkpoint"
            target = ctx.rng.choice(live)
            # Until the call returns, the expiry is the earlier of the old and the new one.
            target.expire_time_s = min(target.expire_time_s or 2**62, math.ceil(now + 900))
            refreshed = admin.refresh_checkpoint(
                MAIN, store, target.checkpoint_id, timedelta(seconds=900), clock=ctx.clock
            )
            target.expire_time_s = refreshed.expire_time_s
            return "ok"
        if action == "delete_checkpoint":
            if not live:
                return "skipped: no live checkpoint"
            target = ctx.rng.choice(live)
            del ctx.pinned[target.checkpoint_id]  # whatever happens next, it is no longer relied on
            admin.delete_checkpoint(MAIN, store, target.checkpoint_id, dry_run=False)
            return "ok"
        if action == "tag":
            # An interrupted create is re-run with replace: it must then complete.
            name = self.pending_tag or ctx.rng.choice(TAG_NAMES)
            replace = self.pending_tag is not None or ctx.rng.random() < 0.3
            before = self._tag_expected = self.tag_state.get(name, "absent")
            self._tag_name = self.pending_tag = name
            if replace or before != "present":
                self._forget_tag(name, "unknown")  # until the call returns
            lo = ctx.seen_floor()
            tag = admin.create_tag(MAIN, store, name, replace=replace, clock=ctx.clock)
            self.pending_tag = None
            if before == "present" and not replace:
                raise ctx.violation(f"create_tag({name!r}) replaced an existing tag without replace=True")
            track_checkpoint(ctx, "tag", tag.checkpoint_id, lo, ctx.model.issued, f"tag {name}", name=name)
            self.tag_state[name] = "present"
            return f"ok {name}{' (replaced)' if replace else ''}"
        if action == "delete_tag":
            name = self._tag_name = ctx.rng.choice(TAG_NAMES)
            before = self._tag_expected = self.tag_state.get(name, "absent")
            self._forget_tag(name, "unknown")
            admin.delete_tag(MAIN, store, name, dry_run=False)
            if before == "absent":
                raise ctx.violation(f"delete_tag({name!r}) succeeded although no such tag exists")
            self.tag_state[name] = "absent"
            return f"ok {name}"
        if action == "clone":
            clone = pending
            if clone is None:
                self.clone_counter += 1
                parent = ctx.rng.choice(live) if live and ctx.rng.random() < 0.5 else None
                clone = Clone(
                    f"clone{self.clone_counter}",
                    None if parent is None else parent.checkpoint_id,
                    ctx.seen_floor(),
                    ctx.model.issued,
                    now,
                    expected=None if parent is None else parent.content,
                )
                ctx.clones[clone.path] = clone
            admin.create_clone(clone.path, MAIN, store, clone.source, clock=ctx.clock)
            clone.hi = max(clone.hi, ctx.model.issued)
            resolve_clone(ctx, clone)
            return f"ok {clone.path}"
        if action == "drop_clone":
            clone = pending or ctx.rng.choice([c for c in ctx.clones.values() if c.state == "live"])
            clone.state = "dropping"
            try:
                admin.destroy(clone.path, store, soft=False, clock=ctx.clock, dry_run=False)
            except DbNotFoundError:
                if pending is None:
                    raise
            del ctx.clones[clone.path]
            return f"ok {clone.path}"
        raise AssertionError(action)

    def _error(self, action: str, error: Exception, pending: Clone | None) -> str:
        ctx = self.ctx
        if pending is not None and pending.state == "creating" and self._clone_source_gone(pending, error):
            pending.state = "dropping"  # as the error says: destroy the clone and clone again
            return f"refused: {type(error).__name__}; the clone is dropped"
        name = self._tag_name
        if action == "delete_tag" and isinstance(error, TagNotFoundError):
            if self._tag_expected == "present":
                raise ctx.violation(f"delete_tag({name!r}) found no tag, but it was created") from error
            self.tag_state[name] = "absent"
            return "refused: TagNotFoundError"
        if action == "tag" and isinstance(error, TagExistsError):
            if self._tag_expected == "absent":
                raise ctx.violation(f"create_tag({name!r}) found a tag that was never created") from error
            self.pending_tag = None  # refused: nothing to re-run
            return "refused: TagExistsError"
        return ctx.outcome(error)

    def _clone_source_gone(self, clone: Clone, error: Exception) -> bool:
        """A clone re-run may fail only because its source checkpoint expired or was deleted meanwhile
        (the ephemeral one lives 5 minutes); then a WAL SST it covered may be gone too."""
        if not isinstance(error, CheckpointExpiredError | CheckpointNotFoundError | CloneWalMissingError):
            return False
        ctx = self.ctx
        if clone.source is None:
            return ctx.clock.now() - clone.started_at >= 300
        return clone.source not in ctx.pinned or not ctx.pinned[clone.source].live(ctx.clock.now())

    def _forget_tag(self, name: str, state: str) -> None:
        """Stop relying on the tag ``name`` (about to change); ``state`` is what is known meanwhile."""
        for pinned in list(self.ctx.pinned.values()):
            if pinned.kind == "tag" and pinned.name == name:
                del self.ctx.pinned[pinned.checkpoint_id]
        self.tag_state[name] = state
