"""The cooperative moves the adversary needs material from (create, clone, split, tag, destroy,
re-create, removal by hand, compaction and GC of everything), used by the scheduler and by the
adversarial actors as interferences."""

from __future__ import annotations

from slate_ops import admin
from slate_ops.compaction import Compactor, LocalExecutor
from slate_ops.errors import DbNotFoundError, InvalidDeletionError, SlateOpsError, WalNotFlushedError
from slate_ops.gc import GarbageCollector
from slate_ops.objstore.base import ObjectStore
from tests.reliability.sim.adversary.context import AdvContext
from tests.reliability.sim.adversary.invariants import AdvInvariants
from tests.reliability.sim.adversary.model import PROCESS_REFUSALS, RESERVED, Member
from tests.reliability.sim.adversary.writers import WriterSessions
from tests.reliability.sim.runtime import COMPACTOR_OPTIONS


class DatabaseMoves:
    """Lifecycle moves on the family's databases; each keeps the model in step with what it did."""

    def __init__(self, ctx: AdvContext) -> None:
        self.ctx = ctx
        self.writers = WriterSessions(ctx)
        self.invariants = AdvInvariants(ctx)

    def create(self, path: str, kind: str) -> str:
        try:
            admin.create_db(path, self.ctx.inner)
        except Exception as error:
            outcome = self.ctx.refused("create_db", error, (SlateOpsError,))
            self.ctx.tick("admin", "create", outcome)
            return outcome
        self.ctx.members[path] = Member(path, kind, incarnation=self.ctx.incarnation(path))
        self.ctx.tick("admin", "create", f"ok {path or '<root>'}")
        return f"ok {path}"

    def clone(self) -> str:
        parents = self.ctx.live()
        if not parents:
            return "nothing to clone"
        parent = self.ctx.rng.choice(parents)
        path = self.ctx.new_path("plain")
        try:
            admin.create_clone(path, parent.path, self.ctx.inner, clock=self.ctx.clock)
        except Exception as error:
            outcome = self.ctx.refused("create_clone", error, (SlateOpsError,))
            self.ctx.tick("admin", "clone", outcome)
            return outcome
        self.ctx.members[path] = Member(
            path, "clone", settled=dict(parent.settled), lo=parent.lo, hi=parent.hi, parents=(parent.path,)
        )
        self.ctx.tick("admin", "clone", f"ok {path} of {parent.path or '<root>'}")
        return f"ok {path}"

    def split(self) -> str:
        member = self.ctx.rng.choice(self.ctx.live())
        return self.split_member(member)

    def split_member(self, member: Member) -> str:
        keys = member.keys()
        if len(keys) < 2:
            return "too narrow to split"
        at = self.ctx.rng.choice(keys[1:])
        targets = [self.ctx.new_path("plain"), self.ctx.new_path("plain")]
        try:
            admin.split(member.path, self.ctx.inner, [at], targets, clock=self.ctx.clock)
        except Exception as error:
            outcome = self.ctx.refused("split", error, (WalNotFlushedError, SlateOpsError))
            self.ctx.tick("admin", "split", outcome)
            return outcome
        for target, (lo, hi) in zip(targets, ((member.lo, at), (at, member.hi)), strict=True):
            content = {
                k: v
                for k, v in self.readable(member).items()
                if (lo is None or k >= lo) and (hi is None or k < hi)
            }
            self.ctx.members[target] = Member(
                target, "shard", settled=content, lo=lo, hi=hi, parents=(member.path,)
            )
        self.ctx.tick("admin", "split", f"ok {member.path or '<root>'} at {at.decode()}")
        return "split"

    def readable(self, member: Member) -> dict[bytes, bytes]:
        """What the source of a split holds: a fresh read, checked against its model."""
        return self.invariants.check_member(member)

    def tag(self) -> str:
        member = self.ctx.rng.choice(self.ctx.live())
        name = self.ctx.rng.choice(("t1", "t2"))
        content = self.tag_member(member, name)
        return "ok" if content is not None else "refused"

    def tag_member(self, member: Member, name: str) -> dict[bytes, bytes] | None:
        content = self.invariants.check_member(member)
        try:
            admin.create_tag(member.path, self.ctx.inner, name, replace=True, clock=self.ctx.clock)
        except Exception as error:
            self.ctx.tick("admin", f"tag {name}", self.ctx.refused("create_tag", error, (SlateOpsError,)))
            return None
        member.tags[name] = content
        self.ctx.tick("admin", f"tag {name}", f"ok {member.path or '<root>'}")
        return content

    def destroy_episode(self) -> str:
        live = self.ctx.live()
        root = self.ctx.members.get("")
        member = root if root in live and self.ctx.rng.random() < 0.3 else self.ctx.rng.choice(live)
        outcome = self.destroy(member, soft=True)
        if self.ctx.rng.random() < 0.5:
            outcome += "; " + self.destroy(member, soft=False)
        return outcome

    def destroy(self, member: Member, *, soft: bool) -> str:
        action = "destroy_soft" if soft else "destroy_hard"
        try:
            admin.destroy(member.path, self.ctx.inner, soft=soft, dry_run=False, clock=self.ctx.clock)
        except Exception as error:
            outcome = self.ctx.refused(action, error, (InvalidDeletionError, DbNotFoundError, SlateOpsError))
            self.ctx.tick("admin", action, f"{outcome} {member.path or '<root>'}")
            return outcome
        member.state = "soft" if soft else "deleted"
        if not soft:
            self.ctx.deleted_now(member)
        self.ctx.tick("admin", action, f"ok {member.path or '<root>'}")
        self.ctx.figures[f"{action}s"] += 1
        return f"{action} ok"

    def has_dependents(self, member: Member) -> bool:
        """Whether a checkpoint of ``member`` pins it for another database (a clone, a shard)."""
        latest = self.ctx.latest(member.path)
        return latest is not None and any((c.name or "").startswith("slate_ops/") for c in latest.checkpoints)

    def remove_by_hand(self, member: Member) -> str:
        """An operator deletes every object of the database's own directories with a tool that knows
        nothing of slate_ops (``aws s3 rm --recursive``): no tombstone, no fence, nothing left.

        The paused writer must acknowledge nothing after it and commit no manifest there, and a
        database created at the path later (the names episode may) must hold nothing old. The long
        run's seeds 2014 and 2017 found that it replayed the stale writer's refused WAL write (created
        before the confirmation that refused it); fixed in the writer, which now withdraws the WAL
        SSTs it wrote since its last acknowledgement when it finds its database deleted
        (``test_adversary.py::test_a_path_removed_by_hand_and_created_again_holds_nothing_old``)."""
        prefix = f"{member.path}/" if member.path else ""
        removed = 0
        for meta in list(self.ctx.inner.list(prefix)):
            parts = meta.key[len(prefix) :].split("/")
            if len(parts) == 2 and parts[0] in RESERVED:
                self.ctx.inner.delete(meta.key)
                removed += 1
        self.ctx.deleted_now(member)
        member.removed_by_hand = True
        self.ctx.figures["databases_removed_by_hand"] += 1
        self.ctx.tick("operator", "rm -r", f"ok {removed} objects of {member.path or '<root>'}")
        return f"removed {removed} objects by hand"

    def recreate(self, member: Member) -> str:
        try:
            admin.create_db(member.path, self.ctx.inner)
        except Exception as error:
            outcome = self.ctx.refused("create_db on a deleted path", error, (SlateOpsError,))
            self.ctx.tick("admin", "recreate", outcome)
            return outcome
        member.incarnation += 1
        member.state = "live"
        member.reset({})
        member.tags.clear()
        self.ctx.figures["paths_reused"] += 1
        self.ctx.tick("admin", "recreate", f"ok {member.path or '<root>'}")
        return "re-created"

    def l0_material(self, member: Member) -> None:
        for _ in range(self.ctx.rng.randint(1, 3)):
            self.writers.session(self.ctx.new_writer(member, "loader"), self.ctx.inner, 2, "flush_memtable")

    def collect(self, member: Member, store: ObjectStore | None = None) -> str:
        gc = GarbageCollector(
            member.path, store or self.ctx.inner, self.ctx.gc_options(), clock=self.ctx.clock
        )
        try:
            gc.run_once(dry_run=False)
        except Exception as error:
            return self.ctx.refused(f"GC of {member.path or '<root>'}", error, PROCESS_REFUSALS)
        if member.state == "soft" and self.ctx.gone(member.path):
            self.ctx.deleted_now(member)
            self.ctx.figures["gc_deleted_destroyed_dbs"] += 1
        return "ok"

    def collect_everything(self) -> None:
        for member in reversed(self.ctx.present()):
            self.ctx.tick("gc", "run_once", self.collect(member) + f" {member.path or '<root>'}")

    def maintain(self) -> str:
        for member in self.ctx.live():
            try:
                Compactor(
                    member.path,
                    self.ctx.inner,
                    COMPACTOR_OPTIONS,
                    LocalExecutor(threads=1, clock=self.ctx.clock),
                    clock=self.ctx.clock,
                ).run_once(full=True)
                outcome = "ok"
            except Exception as error:
                outcome = self.ctx.refused("compaction", error, PROCESS_REFUSALS)
            self.ctx.tick("compactor", "full", f"{outcome} {member.path or '<root>'}")
        self.ctx.clock.advance(max(self.ctx.config.grace_s, self.ctx.config.min_age_s) + 3600.0)
        self.collect_everything()
        return "ok"
