"""The compactor actor: compactions of main (some full), crashes part-way and takeovers (the old
compactor is then a zombie that must never commit)."""

from __future__ import annotations

from slate_ops.compaction import Compactor, LocalExecutor
from slate_ops.errors import CompactionConflictError, FencedError
from tests.reliability.sim.context import SimContext
from tests.reliability.sim.runtime import COMPACTOR_OPTIONS, MAIN, SimStore


class CompactorActor:
    def __init__(self, ctx: SimContext) -> None:
        self.ctx = ctx
        self.compactor: Compactor | None = None
        self.store: SimStore | None = None
        self.zombie: Compactor | None = None  # fenced by a takeover: its next run must be refused

    def step(self, forced: str | None) -> tuple[str, str]:
        ctx = self.ctx
        if self.zombie is not None:
            zombie, self.zombie = self.zombie, None
            try:
                report = zombie.run_once()
            except FencedError:
                return "zombie run", "refused: FencedError"
            except Exception as error:
                return "zombie run", ctx.outcome(error, (CompactionConflictError,))
            if report is not None:
                raise ctx.violation("a fenced compactor committed a compaction")
            return "zombie run", "ok nothing to do"
        if self.compactor is None:
            store = ctx.store_for("compactor")
            try:
                self.compactor = Compactor(
                    MAIN,
                    store,
                    COMPACTOR_OPTIONS,
                    LocalExecutor(threads=1, clock=ctx.clock),
                    clock=ctx.clock,
                )
            except Exception as error:
                return "open", ctx.outcome(error)
            self.store = store
            return "open", f"ok epoch={self.compactor.epoch}"
        action = ctx.doing(
            ctx.rng.choices(("run", "full", "crash_mid", "takeover"), weights=(70, 10, 8, 5))[0]
        )
        if action == "takeover":
            old, self.compactor = self.compactor, None
            outcome = self.step(None)[1]  # opens the new one, fencing the old
            if self.compactor is not None:
                self.zombie = old  # its next step must be refused
            return action, outcome
        compactor = self.compactor
        if action == "crash_mid":
            assert self.store is not None
            self.store.faulty.crash_after(ctx.rng.randrange(0, 12))
        try:
            report = compactor.run_once(full=action == "full")
            outcome = (
                "ok nothing to do"
                if report is None
                else (f"ok {report.kind} {len(report.input_ssts)}->{len(report.output_ssts)} SSTs")
            )
            if report is not None:
                ctx.figures["compactions"] += 1
        except Exception as error:
            outcome = ctx.outcome(error, (CompactionConflictError,))
        if action == "crash_mid" or outcome == "crashed":
            self.compactor = self.store = None
            ctx.figures["compactor_crashes"] += 1
            outcome += "; compactor process died"
        return action, outcome

    def drop(self) -> None:
        self.compactor = self.store = self.zombie = None
