"""The model of the lifecycle actor's family of databases (sim/actors/lifecycle.py): each member and
what it must read, its tags, and an operation in progress (re-run until it completes)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Literal

from slate_ops.manifest.model import KeyRange
from tests.reliability.sim.runtime import Model

LANES = b"abcdefgh"
FAMILY_KEYS = tuple(bytes([lane]) + b"%02d" % i for lane in LANES for i in range(10))
TAG_NAMES = ("x0", "x1", "x2")
CLONE_SOURCE_LIFETIME_S = 300.0  # admin.clone.EPHEMERAL_LIFETIME
RESCALE_SOURCE_LIFETIME_S = 900.0  # admin.rescale.SOURCE_LIFETIME

State = Literal["creating", "live", "rolling_back", "destroying", "destroyed", "gone"]


@dataclass
class FamilyTag:
    name: str
    checkpoint_id: uuid.UUID
    content: dict[bytes, bytes]
    data_keys: frozenset[bytes]


@dataclass(eq=False)
class Member:
    """One lifecycle database and what the simulation knows about it."""

    path: str
    kind: Literal["root", "clone", "shard", "merge"]
    parents: tuple[str, ...]
    lane: int  # the key lane most of its writes go to
    model: Model
    key_range: KeyRange | None = None
    # Every key any SST it reads may hold (a superset: inherited, written, even if lost or deleted):
    # two databases without ranges whose key hulls are disjoint have disjoint data.
    data_keys: set[bytes] = field(default_factory=set)
    state: State = "creating"
    wal_only: bool = False  # writes may be only in its WAL (split and merge refuse such a source)
    tags: dict[str, FamilyTag] = field(default_factory=dict)

    def describe(self) -> str:
        whence = f" of {'+'.join(self.parents)}" if self.parents else ""
        bounds = "" if self.key_range is None else f" {self.key_range}"
        return f"{self.kind}{whence}{bounds}, {self.state}"

    def writable_keys(self, universe: tuple[bytes, ...]) -> list[bytes]:
        return [k for k in universe if self.key_range is None or self.key_range.contains(k)]


@dataclass
class LifeOp:
    """An operation in progress: re-run with the same arguments until it completes."""

    kind: Literal["create", "clone", "split", "merge", "destroy", "tag", "delete_tag", "rollback", "abandon"]
    members: tuple[Member, ...]  # the new databases, or the one operated on
    sources: tuple[str, ...] = ()
    soft: bool = True
    tag: str | None = None
    checkpoint: uuid.UUID | None = None
    split_key: bytes | None = None
    started_at: float = 0.0
    lo: int = 0  # main's history prefix already seen when it started (main as a source)
    before: State = "live"  # the member's state before a destroy or rollback
    attempts: int = 0
    how: str = ""  # a merge: "adjacent", "disjoint" or "overlapping" (its sources' data may overlap)

    def label(self) -> str:
        return self.kind
