"""A paused writer: it opens and writes, then is frozen (its timers are steps, so it only sees the
store when it calls it) across a destroy, GC past the grace period, re-creation, a split, a rollback,
a takeover or a removal by hand; then it resumes, writes, flushes and closes."""

from __future__ import annotations

from slate_ops import admin
from slate_ops.errors import SlateOpsError
from tests.reliability.sim.adversary.context import AdvContext
from tests.reliability.sim.adversary.model import Member
from tests.reliability.sim.adversary.moves import DatabaseMoves
from tests.reliability.sim.adversary.writers import WriterSessions


class PausedWriterActor:
    """A writer frozen across an interference (the scheduler's ``paused_writer`` episode)."""

    def __init__(self, ctx: AdvContext) -> None:
        self.ctx = ctx
        self.writers = WriterSessions(ctx)
        self.moves = DatabaseMoves(ctx)

    def paused_writer(self) -> str:
        """A writer opens, writes, then is frozen across an interference; then it resumes."""
        candidates = [m for m in self.ctx.live() if m.kind != "hostile"] or self.ctx.live()
        member = self.ctx.rng.choice(candidates)
        interference = self.ctx.rng.choice(
            ("soft", "soft_hard", "soft_gc", "hard_recreate", "split", "rollback", "takeover", "by_hand")
        )
        if interference == "by_hand" and self.moves.has_dependents(member):
            interference = "soft_hard"
        tag_content: dict[bytes, bytes] | None = None
        if interference == "rollback":
            tag_content = self.moves.tag_member(member, "pause")
            if tag_content is None:
                interference = "takeover"
        writer = self.ctx.new_writer(member, "paused")
        if not self.writers.open(writer, self.ctx.inner):
            return "refused: open"
        for _ in range(self.ctx.rng.randint(1, 3)):
            self.writers.write(writer, durable=self.ctx.rng.random() < 0.5)
        if interference == "split" or self.ctx.rng.random() < 0.3:
            self.writers.finish(writer, "flush_memtable")
        if writer.db is None:
            return "the writer was refused"
        self.ctx.figures[f"paused_writer_across_{interference}"] += 1
        done = self._interfere(member, interference, tag_content)
        # Resume: the writer never polled meanwhile.
        for _ in range(self.ctx.rng.randint(1, 2)):
            if writer.db is None:
                break
            self.writers.write(writer, durable=True)
        if writer.db is not None:
            self.writers.finish(writer, self.ctx.rng.choice(("flush", "close")))
        if writer.db is not None:
            self.writers.finish(writer, "close")
        if writer.fenced_seen:
            self.ctx.figures["paused_writers_fenced"] += 1
        return f"ok {member.path or '<root>'} across {interference}: {done}"

    def _interfere(self, member: Member, interference: str, tag_content: dict[bytes, bytes] | None) -> str:
        if interference == "takeover":
            other = self.ctx.new_writer(member, "takeover")
            self.writers.session(other, self.ctx.inner, self.ctx.rng.randint(1, 2), "close")
            return "taken over"
        if interference == "split":
            return self.moves.split_member(member)
        if interference == "rollback":
            assert tag_content is not None
            try:
                admin.rollback_to_tag(
                    member.path, self.ctx.inner, "pause", dry_run=False, clock=self.ctx.clock
                )
            except Exception as error:
                outcome = self.ctx.refused("rollback", error, (SlateOpsError,))
                self.ctx.tick("admin", "rollback", outcome)
                return outcome
            member.reset(tag_content)
            self.ctx.tick("admin", "rollback", "ok")
            return "rolled back"
        if interference == "by_hand":
            return self.moves.remove_by_hand(member)
        outcome = self.moves.destroy(member, soft=True)
        if interference == "soft":
            return outcome
        if interference == "soft_gc":
            self.ctx.clock.advance(self.ctx.config.grace_s + self.ctx.config.min_age_s + 1)
            return outcome + "; " + self.moves.collect(member)
        outcome += "; " + self.moves.destroy(member, soft=False)
        if interference == "hard_recreate" and member.state == "deleted":
            outcome += "; " + self.moves.recreate(member)
        return outcome
