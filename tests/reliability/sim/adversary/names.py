"""Hostile names: databases created, opened and cloned with a reserved directory name as the last
component (``a/wal``, ``a/manifest``, ``a/gc``, ...), nested at several depths, or at the root."""

from __future__ import annotations

from slate_ops import admin
from slate_ops.engine import Db
from slate_ops.errors import SlateOpsError
from tests.reliability.sim.adversary.context import AdvContext
from tests.reliability.sim.adversary.model import RESERVED, Member
from tests.reliability.sim.adversary.writers import WriterSessions
from tests.reliability.sim.runtime import WRITER_OPTIONS


class HostileNamesActor:
    """Creates, opens or clones a database under a hostile name, then writes to it."""

    def __init__(self, ctx: AdvContext) -> None:
        self.ctx = ctx
        self.writers = WriterSessions(ctx)

    def names(self) -> str:
        """Databases created, opened or cloned under hostile names."""
        present = [m for m in self.ctx.live() if m.kind != "hostile"]
        base = self.ctx.rng.choice(present).path if present and self.ctx.rng.random() < 0.8 else "x"
        reserved = self.ctx.rng.choice(RESERVED)
        candidates = [
            f"{base}/{reserved}" if base else reserved,
            reserved,
            self.ctx.new_path("nested", base),
            self.ctx.new_path("nested", self.ctx.new_path("nested", base)),
            "",
        ]
        name = self.ctx.rng.choice(candidates)
        existing = self.ctx.members.get(name)
        if existing is not None and existing.state != "deleted":
            name = self.ctx.new_path("nested", base)
        elif existing is not None and existing.removed_by_hand:
            self.ctx.figures["paths_removed_by_hand_created_again"] += 1
        kind = "root" if name == "" else ("hostile" if name.split("/")[-1] in RESERVED else "nested")
        how = self.ctx.rng.choice(("create_db", "open", "clone"))
        parent = self.ctx.rng.choice(present) if present else None
        try:
            if how == "create_db" or parent is None:
                admin.create_db(name, self.ctx.inner)
                self.ctx.members[name] = Member(name, kind, incarnation=self.ctx.incarnation(name))
            elif how == "open":
                Db.open(name, self.ctx.inner, WRITER_OPTIONS, clock=self.ctx.clock, background=False).close()
                self.ctx.members[name] = Member(name, kind, incarnation=self.ctx.incarnation(name))
            else:
                admin.create_clone(name, parent.path, self.ctx.inner, clock=self.ctx.clock)
                self.ctx.members[name] = Member(
                    name,
                    kind,
                    settled=dict(parent.settled),
                    lo=parent.lo,
                    hi=parent.hi,
                    incarnation=self.ctx.incarnation(name),
                    parents=(parent.path,),
                )
        except Exception as error:
            outcome = self.ctx.refused(f"{how}({name!r})", error, (SlateOpsError,))
            self.ctx.figures[f"names_refused_{kind}"] += 1
            self.ctx.tick("names", how, f"{outcome} {name!r}")
            return f"{outcome} {name!r}"
        self.ctx.figures[f"names_accepted_{kind}"] += 1
        self.ctx.tick("names", how, f"ok {name!r}")
        member = self.ctx.members[name]
        if member.kind != "clone" and self.ctx.rng.random() < 0.8:
            self.writers.session(
                self.ctx.new_writer(member, "names-writer"),
                self.ctx.inner,
                self.ctx.rng.randint(1, 3),
                "close",
            )
        return f"ok {how} {name!r}"
