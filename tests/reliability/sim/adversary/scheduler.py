"""The adversarial run loop: the setup, a seeded choice of episode after episode until ``steps`` API
calls are spent, the invariants after each, and the result (trace, digest of trace and objects)."""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable
from datetime import UTC, datetime

from slate_ops.objstore import MemoryStore
from tests.reliability.sim.adversary.admin_calls import AdminCallsActor
from tests.reliability.sim.adversary.context import AdvContext
from tests.reliability.sim.adversary.invariants import AdvInvariants
from tests.reliability.sim.adversary.model import STRAYS, AdvConfig, AdvResult
from tests.reliability.sim.adversary.moves import DatabaseMoves
from tests.reliability.sim.adversary.names import HostileNamesActor
from tests.reliability.sim.adversary.paused_processes import PausedProcessesActor
from tests.reliability.sim.adversary.paused_writer import PausedWriterActor
from tests.reliability.sim.adversary.races import RaceActor
from tests.reliability.sim.runtime import TraceEntry, memoized_manifest_decoding


class Adversary:
    """One adversarial run (see the package docstring): the actors share one :class:`AdvContext`."""

    def __init__(self, config: AdvConfig) -> None:
        self.ctx = AdvContext(config)
        self.moves = DatabaseMoves(self.ctx)
        self.invariants = AdvInvariants(self.ctx)
        self.races = RaceActor(self.ctx)
        self.paused_writer = PausedWriterActor(self.ctx)
        self.paused_processes = PausedProcessesActor(self.ctx)
        self.admin_calls = AdminCallsActor(self.ctx)
        self.names = HostileNamesActor(self.ctx)

    def run(self) -> AdvResult:
        ctx = self.ctx
        started = time.monotonic()
        with contextlib.ExitStack() as stack:
            stack.enter_context(memoized_manifest_decoding())  # speed only
            ctx.inner = MemoryStore("adversary", now=lambda: datetime.fromtimestamp(ctx.clock.now(), UTC))
            for key, data in STRAYS.items():
                ctx.inner.put(key, data)
            self.moves.create("", "root")  # every other database is nested under it
            for _ in range(2):
                self.moves.create(ctx.new_path("plain"), "plain")
            while ctx.step < ctx.config.steps:
                ctx.episode += 1
                ctx.clock.advance(round(ctx.rng.uniform(0, 20), 3))
                self._one_episode()
                self.invariants.check_all()
            ctx.running = "final"
            self.moves.maintain()
            self.invariants.check_all()
            listing = [
                (m.key, hashlib.sha256(ctx.inner.get(m.key).data).hexdigest()) for m in ctx.inner.list("")
            ]
        ctx.figures["objects_at_end"] = len(listing)
        ctx.figures["databases_at_end"] = sum(m.state != "deleted" for m in ctx.members.values())
        digest = hashlib.sha256(repr(([tuple(vars(e).values()) for e in ctx.trace], listing)).encode())
        return AdvResult(
            ctx.config,
            ctx.trace,
            digest.hexdigest(),
            ctx.actions,
            ctx.checks,
            ctx.figures,
            time.monotonic() - started,
        )

    def _one_episode(self) -> None:
        ctx = self.ctx
        live = ctx.live()
        crowded = len([m for m in live if m.kind not in ("hostile",)]) >= ctx.config.family_size
        weights = {
            "session": 14 if live else 0,
            "race": 16 if live else 0,
            "paused_writer": (20 if crowded else 12) if live else 0,
            "paused_processes": 9 if live else 0,
            "admin": 10,
            "names": 6,
            "clone": 6 if live and not crowded else 0,
            "split": 5 if live and not crowded else 0,
            "tag": 5 if live else 0,
            "create": 0 if crowded else (12 if len(live) < 3 else 3),
            "destroy": (10 if crowded else 2) if live else 0,
            "maintain": 3,
        }
        episode = ctx.rng.choices(list(weights), weights=list(weights.values()))[0]
        ctx.running = episode
        handlers: dict[str, Callable[[], str]] = {
            "session": self.races.session_episode,
            "race": self.races.race,
            "paused_writer": self.paused_writer.paused_writer,
            "paused_processes": self.paused_processes.paused_processes,
            "admin": self.admin_calls.admin,
            "names": self.names.names,
            "clone": self.moves.clone,
            "split": self.moves.split,
            "tag": self.moves.tag,
            "create": lambda: self.moves.create(ctx.new_path("plain"), "plain"),
            "destroy": self.moves.destroy_episode,
            "maintain": self.moves.maintain,
        }
        outcome = handlers[episode]()
        ctx.figures[f"episodes_{episode}"] += 1
        ctx.trace.append(TraceEntry(ctx.step, "episode", episode, outcome))


def run_adversary(config: AdvConfig) -> AdvResult:
    return Adversary(config).run()
