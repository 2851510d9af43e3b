"""The adversarial simulation's vocabulary: its configuration and result, the model of a database of
the family (:class:`Member`) and of a writer process (:class:`Writer`), and the errors each move may
be refused with."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from slate_ops.engine import Db
from slate_ops.errors import SlateOpsError
from slate_ops.manifest.model import Manifest
from tests.reliability.sim.interleave import TaskOutcome
from tests.reliability.sim.runtime import TraceEntry

KEYS = tuple(b"k%02d" % i for i in range(16))
RESERVED = ("wal", "manifest", "compacted", "compactions", "gc")
STRAYS = {
    "README": b"objects that belong to no database",
    "backup/2026-11-01.tar": b"a backup",
    "notes/wal/00000000000000000001.sst": b"looks like a WAL SST of a database named notes",
}
REPLAY = (
    "SLATE_OPS_ADV_SEED={seed} SLATE_OPS_ADV_STEPS={steps} "
    "pytest tests/reliability/test_adversary.py -k replay -s"
)
MemberState = Literal["live", "soft", "deleted"]


@dataclass(frozen=True)
class AdvConfig:
    """One adversarial run; ``steps`` counts API calls of every actor."""

    seed: int
    steps: int = 300
    min_age_s: float = 120.0  # GC's min_age for every namespace
    grace_s: float = 900.0  # GC's grace period for destroyed databases
    family_size: int = 7  # live databases the scheduler keeps at most (besides hostile ones)
    max_calls: int = 600  # store calls of one task in one episode before it counts as livelock
    trace_tail: int = 40

    def replay_command(self) -> str:
        return REPLAY.format(seed=self.seed, steps=self.steps)


@dataclass
class AdvResult:
    """What one adversarial run did (tests/reliability/results/adversary*.json)."""

    config: AdvConfig
    trace: list[TraceEntry]
    digest: str
    actions: Counter[str]
    checks: Counter[str]
    figures: Counter[str]
    duration_s: float

    def summary(self) -> str:
        c = self.config
        return "\n".join(
            [
                f"adversary seed {c.seed}: {c.steps} steps in {self.duration_s:.1f}s, "
                f"{len(self.trace)} trace entries, digest {self.digest[:16]}",
                "  checks: " + ", ".join(f"{k}={v}" for k, v in sorted(self.checks.items())),
                "  figures: " + ", ".join(f"{k}={v}" for k, v in sorted(self.figures.items())),
            ]
        )

    def to_json(self) -> dict[str, Any]:
        c = self.config
        return {
            "seed": c.seed,
            "steps": c.steps,
            "duration_s": round(self.duration_s, 2),
            "trace_entries": len(self.trace),
            "digest": self.digest,
            "checks": dict(sorted(self.checks.items())),
            "operations": dict(sorted(self.actions.items())),
            "figures": dict(sorted(self.figures.items())),
        }


@dataclass(eq=False)
class Member:
    """A database of the family and the model of what it must read."""

    path: str
    kind: str  # root, plain, nested, hostile, clone, shard
    state: MemberState = "live"
    settled: dict[bytes, bytes] = field(default_factory=dict)
    # Writes since the model last settled: (global index, key, value or None for a delete, writer).
    writes: list[tuple[int, bytes, bytes | None, str]] = field(default_factory=list)
    acked: dict[bytes, int] = field(default_factory=dict)  # key -> index of its latest acknowledged write
    lo: bytes | None = None  # a shard's range [lo, hi)
    hi: bytes | None = None
    tags: dict[str, dict[bytes, bytes]] = field(default_factory=dict)
    incarnation: int = 0  # bumped when the path is deleted and created again
    removed_by_hand: bool = False  # its objects deleted outside slate_ops (no tombstone)
    parents: tuple[str, ...] = ()

    def keys(self) -> list[bytes]:
        return [k for k in KEYS if (self.lo is None or k >= self.lo) and (self.hi is None or k < self.hi)]

    def allowed(self, key: bytes) -> set[bytes | None]:
        """The values a fresh reader may see for ``key``: the latest acknowledged write or any write
        issued after it; without an acknowledged write, the settled value or any write."""
        floor = self.acked.get(key)
        issued = [(i, v) for i, k, v, _ in self.writes if k == key]
        if floor is None:
            return {self.settled.get(key), *(v for _, v in issued)}
        return {v for i, v in issued if i >= floor}

    def reset(self, content: dict[bytes, bytes]) -> None:
        self.settled = dict(content)
        self.writes.clear()
        self.acked.clear()


@dataclass(eq=False)
class Writer:
    """A writer process of the simulation."""

    name: str
    member: Member
    incarnation: int
    db: Db | None = None
    epoch: int = 0
    issued: list[int] = field(default_factory=list)  # global indexes of its writes
    acked: int = 0  # writes acknowledged so far
    fenced_seen: bool = False
    acked_at: int = 0  # interleaved store calls made before its last acknowledgement


WRITER_REFUSALS: tuple[type[BaseException], ...] = (SlateOpsError,)
"""Opening a writer may be refused by a typed error (fenced meanwhile, the database destroyed)."""
WRITE_REFUSALS: tuple[type[BaseException], ...] = (SlateOpsError,)
"""A write, flush or close may fail with a typed error: fenced, destroyed, deleted, closed."""
PROCESS_REFUSALS: tuple[type[BaseException], ...] = (SlateOpsError,)
"""A stale compactor or GC fails with a typed error (fenced, boundary, conflict, a deleted version)."""
GONE_ERRORS = ("DbDestroyedError", "DbDeletedError", "NamespaceDeletedError")
LIFETIMES = (
    timedelta(seconds=1),
    timedelta(seconds=-5),
    timedelta(0),
    timedelta(minutes=10),
    None,
    timedelta(days=365 * 1_000_000),
)


def deleted(manifest: Manifest) -> bool:
    return getattr(manifest, "deleted_at_s", None) is not None


def task_errors(outcomes: dict[str, TaskOutcome]) -> str:
    failed = {n: type(o.error).__name__ for n, o in outcomes.items() if o.error is not None}
    return "" if not failed else f"(errors: {failed})"
