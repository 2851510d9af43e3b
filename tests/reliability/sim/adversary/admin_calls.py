"""Admin calls on the wrong objects: ``refresh_checkpoint`` (lifetimes from negative to a million
years) and ``delete_checkpoint`` on random checkpoint ids of random databases — final checkpoints of
clones and shards, tags, the user's own checkpoints, ids that do not exist — then the clock past
every expiry and GC of every database."""

from __future__ import annotations

import uuid

from slate_ops import admin
from slate_ops.errors import SlateOpsError
from tests.reliability.sim.adversary.context import AdvContext
from tests.reliability.sim.adversary.model import LIFETIMES, deleted
from tests.reliability.sim.adversary.moves import DatabaseMoves


class AdminCallsActor:
    """An operator calling checkpoint admin functions on checkpoints it does not own."""

    def __init__(self, ctx: AdvContext) -> None:
        self.ctx = ctx
        self.moves = DatabaseMoves(ctx)

    def admin(self) -> str:
        """refresh_checkpoint / delete_checkpoint on random checkpoint ids of random databases, then
        the clock past every expiry and GC of everything."""
        present = self.ctx.present()
        ids: list[tuple[uuid.UUID, str, str]] = []
        for m in present:
            latest = self.ctx.latest(m.path)
            if latest is not None and not deleted(latest):
                ids += [(c.id, c.name or type(c.metadata).__name__, m.path) for c in latest.checkpoints]
        calls = self.ctx.rng.randint(1, 4)
        done = []
        for _ in range(calls):
            target = self.ctx.rng.choice(present) if present else None
            path = target.path if target is not None else "nowhere"
            protected = [i for i in ids if i[1].startswith(("slate_ops/", "tag:"))]
            if protected and self.ctx.rng.random() < 0.5:  # what an operator must not be able to release
                checkpoint_id, what, owner = self.ctx.rng.choice(protected)
                path = owner
            elif ids and self.ctx.rng.random() < 0.85:
                checkpoint_id, what, owner = self.ctx.rng.choice(ids)
                if self.ctx.rng.random() < 0.8:
                    path = owner  # mostly at the database that holds it: the call would act
            else:
                checkpoint_id, what = uuid.UUID(int=self.ctx.rng.getrandbits(128)), "random"
            if self.ctx.rng.random() < 0.6:
                lifetime = self.ctx.rng.choice(LIFETIMES)
                action = f"refresh_checkpoint({what}, {lifetime})"
                try:
                    admin.refresh_checkpoint(
                        path, self.ctx.inner, checkpoint_id, lifetime, clock=self.ctx.clock
                    )
                    outcome = "ok"
                except Exception as error:
                    outcome = self.ctx.refused(action, error, (SlateOpsError,))
            else:
                action = f"delete_checkpoint({what})"
                try:
                    admin.delete_checkpoint(path, self.ctx.inner, checkpoint_id, dry_run=False)
                    outcome = "ok"
                except Exception as error:
                    outcome = self.ctx.refused(action, error, (SlateOpsError,))
            self.ctx.figures["admin_calls_" + outcome.split(" ", 1)[0].rstrip(":")] += 1
            self.ctx.tick("admin", action, f"{outcome} ({path or '<root>'})")
            done.append(outcome)
        # Protection must hold once time passes: everything that may expire does, GC runs.
        self.ctx.clock.advance(3600.0)
        self.moves.collect_everything()
        return f"ok {calls} calls: {', '.join(done)}"
