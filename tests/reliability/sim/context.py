"""The simulation's shared world: what every actor reads and changes, with public names.

Actors (sim/actors/) and the checks (sim/checks.py) receive a :class:`SimContext`, never the
scheduler: the configuration, the one seeded runtime and the scheduler's random stream, the stores
(the fault-free inner one, and a new fault-injecting one per actor incarnation), the model of the
writer's history and what readers have seen of it, the checkpoints, tags and clones that must keep
their content, the trace and the counters, and the helpers that turn an error into a trace outcome
or an :class:`InvariantViolation`.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal, Protocol

from slate_ops.engine import Db, DbReader
from slate_ops.gc import GcOptions
from slate_ops.objstore import FaultInjectingStore, MemoryStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.wrappers import SimulatedCrash
from slate_ops.runtime import ManualRuntime
from tests.reliability.sim.runtime import (
    MAIN,
    READER_OPTIONS,
    START_TIME,
    InvariantViolation,
    Model,
    SimConfig,
    SimStore,
    TraceEntry,
    derive,
    is_injected,
    sim_runtime,
)

DB_DELETE_GRACE = timedelta(seconds=900)
"""GC's grace period for soft-destroyed databases in the simulation (the default is a day)."""


@dataclass
class Pinned:
    """A checkpoint or tag the simulation created, with the content it must read while it lives."""

    kind: Literal["checkpoint", "tag"]
    checkpoint_id: uuid.UUID
    content: dict[bytes, bytes]
    expire_time_s: int | None
    name: str | None = None

    def live(self, now: float, margin: float = 0.0) -> bool:
        return self.expire_time_s is None or self.expire_time_s > now + margin


@dataclass
class Clone:
    """A clone of main made by the admin actor."""

    path: str
    source: uuid.UUID | None  # the parent checkpoint, or None: an ephemeral one of the current state
    lo: int  # the prefix range of the parent's history the clone may hold, until it is read
    hi: int
    started_at: float
    state: Literal["creating", "live", "dropping"] = "creating"
    content: dict[bytes, bytes] = field(default_factory=dict)
    expected: dict[bytes, bytes] | None = None  # the source checkpoint's content


@dataclass
class OpenScan:
    """A scan started in one step and finished in a later one: a snapshot as of its start, which
    holds a pin on the checkpoint it reads (so GC keeps what it still has to read)."""

    iterator: Iterator[tuple[bytes, bytes]]
    seen: dict[bytes, bytes]
    lo: int  # the history prefix already seen when it started
    hi: int  # the writes issued when it started
    checkpoint_id: uuid.UUID
    step: int


class Family(Protocol):
    """The lifecycle actor's databases, as the rest of the simulation asks about them."""

    def paths(self) -> list[str]: ...

    def knows(self, path: str) -> bool: ...

    def check_all(self) -> None: ...


class SimContext:
    """One run's shared state and helpers (see the module docstring)."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        # Called before every store request of an actor: the scheduler's stalls (which may run
        # another actor's step inside the request).
        self.on_request: Callable[[str, str], None] = lambda actor, op: None
        self.clock: ManualRuntime = sim_runtime(config.seed)
        self.rng = random.Random(derive(config.seed, "scheduler"))
        self.trace: list[TraceEntry] = []
        self.actions: Counter[str] = Counter()
        self.faults: Counter[str] = Counter()
        self.checks: Counter[str] = Counter()
        self.figures: Counter[str] = Counter()
        self.step = 0
        self.running: list[str] = []  # "actor.action" of the steps in progress, outermost first
        self.inner: ObjectStore = MemoryStore("sim")  # replaced by the scheduler's run()
        self.keys = [b"k%02d" % i for i in range(config.keys)]
        self.values = 0  # values written so far (each value is unique)
        self.incarnations: Counter[str] = Counter()
        self.family: Family | None = None  # the lifecycle actor, once it exists

        # The expected state: the writer's history, and what readers have seen of it.
        self.model = Model()
        self.reader_floor = 0  # the tailing reader has seen the history up to this prefix
        self.oracle_floor = 0  # fresh readers have seen the history up to this prefix
        self.pinned: dict[uuid.UUID, Pinned] = {}
        self.clones: dict[str, Clone] = {}

        # The processes on main whose loaded state GC must keep, and their open scans.
        self.db: Db | None = None
        self.reader: DbReader | None = None
        self.writer_scan: OpenScan | None = None
        self.reader_scan: OpenScan | None = None

    # --- processes and faults -----------------------------------------------------------------

    def store_for(self, actor: str) -> SimStore:
        """A new process of ``actor``: its own seeded fault-injecting store."""
        self.incarnations[actor] += 1
        faulty = FaultInjectingStore(
            self.inner, seed=derive(self.config.seed, actor, str(self.incarnations[actor]))
        )
        c = self.config
        for op in ("get", "head", "put", "list", "delete"):
            if c.error_rate:
                faulty.fail(op, times=None, probability=c.error_rate)
            if c.latency_s:
                faulty.latency(op, c.latency_s)
        if c.lost_response_rate:
            faulty.fail_after("put", times=None, probability=c.lost_response_rate)
        return SimStore(self, actor, faulty)

    def before_request(self, actor: str, op: str) -> None:
        """The :class:`~tests.reliability.sim.runtime.RequestHook` of every actor's store."""
        self.on_request(actor, op)

    def crashes(self) -> bool:
        """Whether this step crashes part-way (drawn from the scheduler's stream)."""
        return self.rng.random() < self.config.crash_rate

    def doing(self, action: str) -> str:
        """Name the action of the innermost running step (for a violation's message)."""
        self.running[-1] = f"{self.running[-1].split('.', 1)[0]}.{action}"
        return action

    def gc_options(self) -> GcOptions:
        return GcOptions.with_min_age(
            timedelta(seconds=self.config.min_age_s), db_delete_grace=DB_DELETE_GRACE
        )

    # --- keys and values ----------------------------------------------------------------------

    def key(self) -> bytes:
        if self.rng.random() < 0.5:
            return self.rng.choice(self.keys[:6])
        return self.rng.choice(self.keys)

    def value(self) -> bytes:
        self.values += 1
        return b"v%07d:" % self.values + b"x" * self.rng.randrange(0, 150)

    # --- the expected state -------------------------------------------------------------------

    def seen_floor(self) -> int:
        """Every write up to here is durable: acknowledged, or already seen by a reader."""
        return max(self.model.durable, self.reader_floor, self.oracle_floor)

    def known(self, path: str) -> bool:
        """Whether ``path`` is a database the simulation still knows (GC of it is checked)."""
        return path == MAIN or path in self.clones or (self.family is not None and self.family.knows(path))

    def known_paths(self) -> list[str]:
        """Every database that exists and is not half-created or half-destroyed: main, the admin
        actor's live clones and the lifecycle databases."""
        clones = [c.path for c in self.clones.values() if c.state == "live"]
        return [MAIN, *clones, *(self.family.paths() if self.family is not None else [])]

    def oracle_read(self, path: str, checkpoint_id: uuid.UUID | None = None) -> dict[bytes, bytes]:
        """A fresh reader on the fault-free store (it runs no step and injects nothing)."""
        reader = DbReader.open(
            path, self.inner, checkpoint_id, READER_OPTIONS, clock=self.clock, background=False
        )
        try:
            return dict(reader.scan())
        finally:
            reader.close()

    # --- outcomes and violations --------------------------------------------------------------

    def record(self, actor: str, action: str, outcome: str) -> None:
        self.trace.append(TraceEntry(self.step, actor, action, outcome))

    def violation(self, what: str) -> InvariantViolation:
        tail = "\n".join(str(e) for e in self.trace[-self.config.trace_tail :])
        running = " > ".join(self.running) or "checks"
        message = (
            f"simulation seed {self.config.seed} violated an invariant at step {self.step} "
            f"(clock +{self.clock.now() - START_TIME:.1f}s, running {running}):\n  {what}\n"
            f"replay: {self.config.replay_command()}\n"
            f"last {min(len(self.trace), self.config.trace_tail)} trace entries "
            "(step, actor, action, outcome):\n"
            f"{tail}"
        )
        return InvariantViolation(message, list(self.trace))

    def outcome(self, error: Exception, expected: tuple[type[Exception], ...] = ()) -> str:
        """The trace outcome of an error that is allowed here; a violation for any other."""
        if isinstance(error, InvariantViolation):
            raise error
        if isinstance(error, SimulatedCrash):
            return "crashed"
        if is_injected(error):
            return f"failed: injected {type(error).__name__}"
        if isinstance(error, expected):
            return f"refused: {type(error).__name__}"
        raise self.violation(
            f"{' > '.join(self.running) or 'final'} raised an unexpected {type(error).__name__}: {error}"
        ) from error
