"""The lifecycle actor: a family of databases that is cloned, split, merged, written, tagged, rolled
back, compacted, garbage collected and destroyed (issue 12; part of tests/reliability/simulation.py).

The family starts from ``main`` (whose writer, reader, compactor, GC and admin actors run as before)
and from empty databases the actor creates. Every lifecycle database has a model: a clone starts
from its parent's content (or a tag's), a shard from its source's restricted to its key range, a
merged database from the union of its sources'; writes to it (writer sessions of a few puts,
deletes and batches, some with ``await_durable``) extend it. A session ends with a clean close, an
L0 flush and close, or a crash; after a crash the store is settled at once: a fresh reader must see a
prefix of the session's writes at least as long as the acknowledged one, and the model keeps that
prefix (the next writer recovers exactly what the reader saw: nobody else writes these databases).

Operations: create, write, clone (of main, of any member — clones of clones, of shards, of merged
databases — from the current state or from a tag), split (any initialised database, a key from its
range), merge (shards with adjacent ranges; databases without ranges whose data is disjoint, e.g.
two clones of one parent taken at different times; a pair whose data may overlap, where the typed
refusal is the expected outcome), soft and hard destroy of any member (a hard destroy refused with
``InvalidDeletionError`` while checkpoints exist is an expected outcome), tags, rollback to a tag,
compaction, GC of one database (detaching external databases it no longer reads, deleting it once
destroyed and due), and ``maintain_all``: a full compaction of every live database, the clock past
every grace period and min age, then GC of every database, dependents first.

Faults are those of the simulation: the actor's store injects errors and lost responses, stalls let
other actors run in the middle of an operation, and a step may crash part-way. An interrupted
operation is *pending*: the actor's next step re-runs it with the same arguments (create, clone,
split, merge, destroy, tag and rollback are idempotent and resumable by design) until it completes.
One whose ephemeral source checkpoint expired meanwhile is abandoned as the error says: its new
databases are hard-destroyed.

After every lifecycle step, ``check_references`` runs over every database and the databases the
step touched read exactly their models (sim/invariants.py); the full sweep every ``check_every``
steps reads all of them, their tags, and runs ``verify_db``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from slate_ops import admin
from slate_ops.compaction import Compactor, LocalExecutor
from slate_ops.errors import (
    CheckpointExpiredError,
    CheckpointNotFoundError,
    CompactionConflictError,
    DbNotFoundError,
    InvalidDeletionError,
    OverlappingSourcesError,
    TagExistsError,
    TagNotFoundError,
    WalNotFlushedError,
)
from slate_ops.gc import GarbageCollector
from slate_ops.manifest.model import KeyRange
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore.wrappers import SimulatedCrash
from tests.reliability.sim import invariants
from tests.reliability.sim.actors.family_writer import FamilyWriterActor
from tests.reliability.sim.actors.gc import collect
from tests.reliability.sim.family import (
    CLONE_SOURCE_LIFETIME_S,
    FAMILY_KEYS,
    LANES,
    RESCALE_SOURCE_LIFETIME_S,
    TAG_NAMES,
    FamilyTag,
    LifeOp,
    Member,
)
from tests.reliability.sim.runtime import (
    COMPACTOR_OPTIONS,
    MAIN,
    InvariantViolation,
    Model,
    SimStore,
    TraceEntry,
    diff,
)

if TYPE_CHECKING:
    from tests.reliability.sim.context import SimContext


class Lifecycle:
    """The lifecycle actor of one simulation (see the module docstring)."""

    def __init__(self, ctx: SimContext) -> None:
        self.ctx = ctx
        self.members: dict[str, Member] = {}
        self.pending: LifeOp | None = None
        self.store: SimStore | None = None
        self._counter = 0
        self._armed = False  # a crash is due part-way through this step (the process dies after it)
        self._touched: list[Member] = []
        self.universe = tuple(sorted((*FAMILY_KEYS, *ctx.keys)))
        self.writer = FamilyWriterActor(ctx)  # its writer sessions (sim/actors/family_writer.py)

    # --- what the rest of the simulation asks ----------------------------------------------------

    def paths(self) -> list[str]:
        """Every lifecycle database that exists and is not being created or hard-destroyed."""
        return [m.path for m in self.members.values() if m.state not in ("creating", "destroying", "gone")]

    def knows(self, path: str) -> bool:
        member = self.members.get(path)
        return member is not None and member.state != "gone"

    def live(self) -> list[Member]:
        return [m for m in self.members.values() if m.state == "live"]

    def check_all(self) -> None:
        """The full sweep: every live database reads its model, its tags theirs; verify_db."""
        for member in self.live():
            invariants.check_member(self.ctx, member)
            invariants.check_tags(self.ctx, member)
            invariants.verify_member(self.ctx, member)

    # --- one step ----------------------------------------------------------------------------------

    def step(self, forced: str | None) -> tuple[str, str]:
        ctx = self.ctx
        if self.store is None:
            self.store = ctx.store_for("lifecycle")
        store = self.store
        self._touched = []
        pending = self.pending
        action = "re-run " + pending.label() if pending is not None else (forced or self._choose())
        ctx.doing(action)
        self._armed = ctx.crashes()
        if self._armed:
            store.faulty.crash_after(ctx.rng.randrange(0, 14))
        crashes = ctx.faults["crash:lifecycle"]
        try:
            outcome = self._act(store, action)
        except InvariantViolation:
            raise
        except Exception as error:
            outcome = self._error(action, error)
        if self._armed or ctx.faults["crash:lifecycle"] > crashes:
            self.store = None
            ctx.figures["lifecycle_crashes"] += 1
            outcome += "; lifecycle process died"
        self._check_after()
        return action, outcome

    def _choose(self) -> str:
        ctx = self.ctx
        live = self.live()
        n = len(live)
        cap = ctx.config.family_size
        room = n < cap
        crowded = n >= cap - 1
        present = [m for m in self.members.values() if m.state in ("live", "destroyed")]
        tagged = [m for m in live if m.tags]
        top_level = len(ctx.running) == 1  # not inside another actor's stalled request
        weights = {
            "create": (8 if n < 2 else 3) if room else 0,
            "write": 30 if live else 0,
            "clone": 9 if room else 0,
            "split": 9 if room else 0,
            "merge": 9 if self._merge_candidates() else 0,
            "destroy_soft": (10 if crowded else 3) if live else 0,
            "destroy_hard": (8 if crowded else 3) if present else 0,
            "tag": 4 if live else 0,
            "delete_tag": 1 if tagged else 0,
            "rollback": 3 if tagged else 0,
            "compact": 8 if live else 0,
            "gc": 8 if present else 0,
            "maintain_all": 2 if top_level else 0,
        }
        return ctx.rng.choices(list(weights), weights=list(weights.values()))[0]

    def _act(self, store: SimStore, action: str) -> str:
        if action.startswith("re-run "):
            assert self.pending is not None
            return self._run(store, self.pending)
        handlers: dict[str, Callable[[SimStore], str]] = {
            "create": self._create,
            "write": self._write_action,
            "clone": self._clone,
            "split": self._split,
            "merge": self._merge,
            "destroy_soft": lambda s: self._destroy(s, soft=True),
            "destroy_hard": lambda s: self._destroy(s, soft=False),
            "tag": self._tag,
            "delete_tag": self._delete_tag,
            "rollback": self._rollback,
            "compact": self._compact,
            "gc": self._gc,
            "maintain_all": self._maintain_all,
        }
        return handlers[action](store)

    def _error(self, action: str, error: Exception) -> str:
        """An error of a first run or a re-run: pending stays for a re-run unless it is settled here."""
        op = self.pending
        expired = isinstance(error, CheckpointExpiredError | CheckpointNotFoundError)
        if op is not None and expired and self._source_gone(op, error):
            return self._abandon(op, error)
        if (
            op is not None
            and op.kind == "destroy"
            and not op.soft
            and isinstance(error, InvalidDeletionError)
        ):
            # Refused by its first check: nothing was marked; the database is as it was.
            for member in op.members:
                member.state = op.before
            self.pending = None
            return f"refused: {type(error).__name__}"
        if op is not None and op.kind == "merge" and isinstance(error, OverlappingSourcesError):
            a, b = (self.members[p] for p in op.sources)
            if op.how != "overlapping":
                raise self.ctx.violation(
                    f"merge of {a.path} and {b.path} ({op.how}: key hulls {_hull(a.data_keys)} and "
                    f"{_hull(b.data_keys)}) refused as overlapping"
                ) from error
            if not self._exists(op.members[0].path):  # refused before anything was written
                self._forget_new(op)
                self.ctx.figures["family_merges_refused_overlapping"] += 1
                return "refused: OverlappingSourcesError (expected: their data may overlap)"
        if op is not None and op.kind in ("split", "merge") and isinstance(error, WalNotFlushedError):
            if not any(s == MAIN or self.members[s].wal_only for s in op.sources):
                raise self.ctx.violation(
                    f"the {op.kind} of {' and '.join(op.sources)} was refused for writes only in a WAL, "
                    "although their last writers flushed every write to L0"
                ) from error
            if all(m.state == "creating" and not self._exists(m.path) for m in op.members):
                self._forget_new(op)
                return f"refused: {type(error).__name__}"
            if MAIN in op.sources:
                return f"refused: {type(error).__name__}; re-run later"  # main's writer flushes
        return self.ctx.outcome(error)

    # --- running an operation (first run and re-runs) -------------------------------------------

    def _run(self, store: SimStore, op: LifeOp) -> str:
        ctx = self.ctx
        clock = ctx.clock
        op.attempts += 1
        if op.kind == "create":
            admin.create_db(op.members[0].path, store, exist_ok=True)
            self.pending = None
            return self._resolve_new(op)
        if op.kind == "clone":
            admin.create_clone(op.members[0].path, op.sources[0], store, op.checkpoint, clock=clock)
            self.pending = None
            return self._resolve_new(op)
        if op.kind == "split":
            assert op.split_key is not None
            admin.split(op.sources[0], store, [op.split_key], [m.path for m in op.members], clock=clock)
            self.pending = None
            return self._resolve_new(op)
        if op.kind == "merge":
            admin.merge(list(op.sources), store, op.members[0].path, clock=clock)
            self.pending = None
            return self._resolve_new(op)
        if op.kind == "abandon":
            for member in op.members:
                self._hard_destroy_path(store, member)
            self.pending = None
            return "ok abandoned " + ", ".join(m.path for m in op.members)
        member = op.members[0]
        if op.kind == "destroy":
            try:
                report = admin.destroy(member.path, store, soft=op.soft, clock=clock, dry_run=False)
            except DbNotFoundError:
                if op.soft or op.attempts == 1:
                    raise
                report = None  # an earlier run finished before its response was lost
            self.pending = None
            self._touched.append(member)
            if op.soft:
                member.state = "destroyed"
                ctx.figures["family_soft_destroys"] += 1
                return "ok soft"
            self._forget_member(member)
            self._check_deleted(member.path)
            ctx.figures["family_hard_destroys"] += 1
            return f"ok hard, {0 if report is None else len(report.deleted)} objects deleted"
        if op.kind == "tag":
            assert op.tag is not None
            tag = admin.create_tag(member.path, store, op.tag, replace=True, clock=clock)
            self.pending = None
            member.tags[op.tag] = FamilyTag(
                op.tag, tag.checkpoint_id, dict(member.model.current), frozenset(member.data_keys)
            )
            self._touched.append(member)
            ctx.figures["family_tags"] += 1
            return f"ok {op.tag}"
        if op.kind == "delete_tag":
            assert op.tag is not None
            try:
                admin.delete_tag(member.path, store, op.tag, dry_run=False)
                outcome = f"ok {op.tag}"
            except TagNotFoundError:
                outcome = f"ok {op.tag} (already gone)"
            self.pending = None
            return outcome
        if op.kind == "rollback":
            assert op.tag is not None
            target = member.tags[op.tag]
            admin.rollback_to_tag(member.path, store, op.tag, dry_run=False, clock=clock)
            self.pending = None
            member.model = Model(target.content)
            member.data_keys = set(target.data_keys)
            member.wal_only = False
            member.state = "live"
            self._touched.append(member)
            ctx.figures["family_rollbacks"] += 1
            return f"ok to {op.tag}"
        raise AssertionError(op.kind)

    def _source_gone(self, op: LifeOp, error: Exception) -> bool:
        """A re-run refused because the operation's ephemeral source checkpoint expired meanwhile."""
        now = self.ctx.clock.now()
        if op.kind == "clone" and op.checkpoint is None:
            return now - op.started_at >= CLONE_SOURCE_LIFETIME_S
        if op.kind in ("split", "merge"):
            return now - op.started_at >= RESCALE_SOURCE_LIFETIME_S
        return False

    def _abandon(self, op: LifeOp, error: Exception) -> str:
        """As the error says: destroy what the operation created, and forget it."""
        self.pending = LifeOp("abandon", op.members, started_at=self.ctx.clock.now())
        self.ctx.figures["family_abandoned"] += 1
        return f"refused: {type(error).__name__}; its databases are destroyed"

    def _hard_destroy_path(self, store: SimStore, member: Member) -> None:
        with contextlib.suppress(DbNotFoundError):
            admin.destroy(member.path, store, soft=False, clock=self.ctx.clock, dry_run=False)
        self._forget_member(member)
        self._check_deleted(member.path)

    def _forget_member(self, member: Member) -> None:
        member.state = "gone"
        member.tags.clear()

    def _forget_new(self, op: LifeOp) -> None:
        for member in op.members:
            member.state = "gone"
            self.members.pop(member.path, None)
        self.pending = None

    def _exists(self, path: str) -> bool:
        return ManifestStore(self.ctx.inner, path).read_latest() is not None

    # --- resolving new databases ------------------------------------------------------------------

    def _resolve_new(self, op: LifeOp) -> str:
        """Read every database the operation created: each must hold exactly what it was made from
        (from main: main's history at one prefix no earlier than what was seen when it started)."""
        ctx = self.ctx
        observed = {m.path: invariants.read(ctx, m.path, what=f"the new {m.path}") for m in op.members}
        from_main = bool(op.sources) and op.sources[0] == MAIN and op.kind in ("clone", "split")
        if from_main:
            whole: dict[bytes, bytes] = {}
            for member in op.members:
                outside = [k for k in observed[member.path] if not self._in_range(member, k)]
                if outside:
                    raise ctx.violation(f"{member.path} holds keys outside its range {member.key_range}")
                whole.update(observed[member.path])
            hi = ctx.model.issued
            ctx.checks["family_created_as_made"] += 1
            prefix = ctx.model.first_match(whole, min(op.lo, hi), hi)
            if prefix is None:
                raise ctx.violation(
                    f"the {op.kind} of main into {[m.path for m in op.members]} holds no prefix of main's "
                    f"history in [{op.lo}, {hi}]: vs the newest state {diff(whole, ctx.model.current)}"
                )
            for member in op.members:
                member.model = Model(observed[member.path])
        for member in op.members:
            ctx.checks["family_created_as_made"] += 1
            if observed[member.path] != member.model.current:
                raise ctx.violation(
                    f"{member.path} ({member.describe()}) differs from what it was made from: "
                    f"{diff(observed[member.path], member.model.current)}"
                )
            recorded = ManifestStore(ctx.inner, member.path).read_latest_required().value.visible_range
            if recorded != member.key_range:
                raise ctx.violation(
                    f"{member.path} has the key range {recorded}, expected {member.key_range}"
                )
            member.state = "live"
            self._touched.append(member)
        ctx.figures[f"family_{op.kind}s" + (f"_{op.how}" if op.how else "")] += 1
        ctx.figures[
            f"family_{op.kind}s_of_{'+'.join(sorted(self._kind(p) for p in op.sources)) or 'nothing'}"
        ] += 1
        if op.kind == "merge" and self._siblings(op.sources):
            ctx.figures["family_merges_of_two_clones_of_one_parent"] += 1
        return "ok " + ", ".join(m.path for m in op.members) + (f" ({op.how})" if op.how else "")

    def _siblings(self, paths: tuple[str, ...]) -> bool:
        """Clones of one parent (taken at different times)."""
        sources = [self.members[p] for p in paths]
        return all(m.kind == "clone" for m in sources) and len({m.parents for m in sources}) == 1

    def _empty_unranged(self, member: Member) -> bool:
        return member.key_range is None and not member.data_keys

    def _kind(self, path: str) -> str:
        """What a source is, for the figures: main, root, clone, shard or merge."""
        return "main" if path == MAIN else self.members[path].kind

    def _in_range(self, member: Member, key: bytes) -> bool:
        return member.key_range is None or member.key_range.contains(key)

    def _new_member(
        self,
        kind: Literal["root", "clone", "shard", "merge"],
        parents: tuple[str, ...],
        content: dict[bytes, bytes],
        key_range: KeyRange | None,
        data_keys: set[bytes],
        wal_only: bool = False,
    ) -> Member:
        self._counter += 1
        member = Member(
            f"fam/f{self._counter:03d}",
            kind,
            parents,
            self.ctx.rng.randrange(len(LANES)),
            Model(content),
            key_range,
            data_keys,
            wal_only=wal_only,
        )
        self.members[member.path] = member
        return member

    def _source(self, path: str) -> tuple[dict[bytes, bytes], set[bytes], KeyRange | None, bool]:
        """A source's content (main: its newest state, replaced once read), data keys, range, WAL."""
        if path == MAIN:
            return dict(self.ctx.model.current), set(self.ctx.keys), None, True
        member = self.members[path]
        return dict(member.model.current), set(member.data_keys), member.key_range, member.wal_only

    def _start(self, op: LifeOp) -> str:
        self.pending = op
        return self._run(self._require_store(), op)

    def _require_store(self) -> SimStore:
        assert self.store is not None
        return self.store

    # --- the actions --------------------------------------------------------------------------------

    def _create(self, store: SimStore) -> str:
        ctx = self.ctx
        member = self._new_member("root", (), {}, None, set())
        outcome = self._start(LifeOp("create", (member,), started_at=ctx.clock.now()))
        if self.pending is None and len(self.live()) < ctx.config.family_size and ctx.rng.random() < 0.5:
            # Fork it while it is empty: this clone and a clone taken once the root holds data hold
            # disjoint data (each writes its own lane), so the two can be merged.
            outcome += "; fork " + self._clone(store, member.path)
        return outcome

    def _clone(self, store: SimStore, parent: str | None = None) -> str:
        ctx = self.ctx
        if parent is None:
            # Empty databases without a range are cloned more often (see _create).
            parents = [MAIN, *(m.path for m in self.live())]
            weights = [1 if p == MAIN else 6 if self._empty_unranged(self.members[p]) else 2 for p in parents]
            parent = ctx.rng.choices(parents, weights=weights)[0]
        content, data_keys, key_range, wal_only = self._source(parent)
        checkpoint = None
        if parent != MAIN and self.members[parent].tags and ctx.rng.random() < 0.3:
            tag = ctx.rng.choice(list(self.members[parent].tags.values()))
            checkpoint, content, data_keys = tag.checkpoint_id, dict(tag.content), set(tag.data_keys)
            wal_only = True  # the tag may hold writes still only in the WAL
        child = self._new_member("clone", (parent,), content, key_range, data_keys, wal_only)
        op = LifeOp(
            "clone",
            (child,),
            (parent,),
            checkpoint=checkpoint,
            started_at=ctx.clock.now(),
            lo=ctx.seen_floor(),
        )
        return self._start(op)

    def _split(self, store: SimStore) -> str:
        ctx = self.ctx
        source = ctx.rng.choice([MAIN, *(m.path for m in self.live())])
        content, data_keys, key_range, wal_only = self._source(source)
        whole = key_range or KeyRange()
        candidates = [k for k in self.universe[1:] if whole.contains(k) and k != whole.start]
        if not candidates:
            return "skipped: no split key inside the range"
        if source != MAIN and wal_only and ctx.rng.random() < 0.85:
            flushed = self.writer.flush_source(store, self.members[source], self._touched)
            if flushed is not None:
                return f"{flushed} (flushing {source if isinstance(source, str) else source.path} first)"
        key = ctx.rng.choice(candidates)
        ranges = (KeyRange(whole.start, key), KeyRange(key, whole.end))
        shards = tuple(
            self._new_member(
                "shard",
                (source,),
                {k: v for k, v in content.items() if r.contains(k)},
                r,
                {k for k in data_keys if r.contains(k)},
            )
            for r in ranges
        )
        op = LifeOp(
            "split", shards, (source,), split_key=key, started_at=ctx.clock.now(), lo=ctx.seen_floor()
        )
        return self._start(op)  # refusals: see _error

    def _merge_candidates(self) -> list[tuple[Member, Member, str]]:
        live = self.live()
        pairs: list[tuple[Member, Member, str]] = []
        for a in live:
            for b in live:
                if a is b:
                    continue
                if a.key_range is not None and b.key_range is not None:
                    if a.key_range.end is not None and a.key_range.end == b.key_range.start:
                        pairs.append((a, b, "adjacent"))
                elif a.key_range is None and b.key_range is None and a.path < b.path:
                    disjoint = _hulls_disjoint(a.data_keys, b.data_keys)
                    pairs.append((a, b, "disjoint" if disjoint else "overlapping"))
        return pairs

    def _merge(self, store: SimStore) -> str:
        ctx = self.ctx
        groups: dict[str, list[tuple[Member, Member, str]]] = {}
        for pair in self._merge_candidates():
            groups.setdefault(pair[2], []).append(pair)
        weights = {"disjoint": 45, "adjacent": 40, "overlapping": 15}
        kinds = [k for k in weights if k in groups]
        chosen = ctx.rng.choices(kinds, weights=[weights[k] for k in kinds])[0]
        candidates = groups[chosen]
        siblings = [p for p in candidates if self._siblings((p[0].path, p[1].path))]
        if siblings and ctx.rng.random() < 0.6:  # two clones of one parent taken at different times
            candidates = siblings
        a, b, how = ctx.rng.choice(candidates)
        for source in (a, b):
            if source.wal_only:
                flushed = self.writer.flush_source(store, source, self._touched)
                if flushed is not None:
                    return f"{flushed} (flushing {source if isinstance(source, str) else source.path} first)"
        shared = a.model.current.keys() & b.model.current.keys()
        if how != "overlapping" and shared:
            raise ctx.violation(f"the models of {a.path} and {b.path} share keys {sorted(shared)[:4]}")
        key_range = None
        if how == "adjacent":
            assert a.key_range is not None and b.key_range is not None
            key_range = KeyRange(a.key_range.start, b.key_range.end)
        content = {**a.model.current, **b.model.current}
        target = self._new_member("merge", (a.path, b.path), content, key_range, a.data_keys | b.data_keys)
        op = LifeOp("merge", (target,), (a.path, b.path), started_at=ctx.clock.now(), how=how)
        return self._start(op)  # refusals: see _error

    def _destroy(self, store: SimStore, *, soft: bool) -> str:
        ctx = self.ctx
        if soft:
            choices = self.live()
        else:
            choices = [m for m in self.members.values() if m.state in ("live", "destroyed")]
        member = ctx.rng.choice(choices)
        op = LifeOp("destroy", (member,), soft=soft, started_at=ctx.clock.now(), before=member.state)
        member.state = "destroying"
        return self._start(op)

    def _tag(self, store: SimStore) -> str:
        ctx = self.ctx
        member = ctx.rng.choice(self.live())
        name = ctx.rng.choice(TAG_NAMES)
        replace = ctx.rng.random() < 0.5
        existed = name in member.tags
        if not replace:
            try:
                created = admin.create_tag(member.path, store, name, clock=ctx.clock)
            except TagExistsError:
                if not existed:
                    raise ctx.violation(
                        f"create_tag({name!r}) on {member.path} found a tag never created"
                    ) from None
                return "refused: TagExistsError"
            except Exception:
                member.tags.pop(name, None)  # it may or may not exist now: settled by a re-run
                self.pending = LifeOp("tag", (member,), tag=name, started_at=ctx.clock.now())
                raise
            if existed:
                raise ctx.violation(
                    f"create_tag({name!r}) on {member.path} replaced a tag without replace=True"
                )
            member.tags[name] = FamilyTag(
                name, created.checkpoint_id, dict(member.model.current), frozenset(member.data_keys)
            )
            self._touched.append(member)
            ctx.figures["family_tags"] += 1
            return f"ok {name}"
        member.tags.pop(name, None)
        return self._start(LifeOp("tag", (member,), tag=name, started_at=ctx.clock.now()))

    def _delete_tag(self, store: SimStore) -> str:
        ctx = self.ctx
        member = ctx.rng.choice([m for m in self.live() if m.tags])
        name = ctx.rng.choice(sorted(member.tags))
        del member.tags[name]  # from now on it is not relied on
        return self._start(LifeOp("delete_tag", (member,), tag=name, started_at=ctx.clock.now()))

    def _rollback(self, store: SimStore) -> str:
        ctx = self.ctx
        member = ctx.rng.choice([m for m in self.live() if m.tags])
        name = ctx.rng.choice(sorted(member.tags))
        member.state = "rolling_back"
        return self._start(LifeOp("rollback", (member,), tag=name, started_at=ctx.clock.now()))

    def _compact(self, store: SimStore) -> str:
        ctx = self.ctx
        member = ctx.rng.choice(self.live())
        full = ctx.rng.random() < 0.5
        self._touched.append(member)
        return self._compact_one(store, member, full=full)

    def _compact_one(self, store: SimStore, member: Member, *, full: bool) -> str:
        ctx = self.ctx
        try:
            compactor = Compactor(
                member.path,
                store,
                COMPACTOR_OPTIONS,
                LocalExecutor(threads=1, clock=ctx.clock),
                clock=ctx.clock,
            )
            report = compactor.run_once(full=full)
        except SimulatedCrash:
            raise
        except Exception as error:
            return ctx.outcome(error, (CompactionConflictError,))
        if report is None:
            return "ok nothing to do"
        ctx.figures["family_compactions"] += 1
        return f"ok {report.kind} {len(report.input_ssts)}->{len(report.output_ssts)} SSTs"

    def _gc(self, store: SimStore) -> str:
        ctx = self.ctx
        member = ctx.rng.choice([m for m in self.members.values() if m.state in ("live", "destroyed")])
        dry_run = ctx.rng.random() < 0.15
        return (
            self._collect(store, member, dry_run=dry_run)
            + f" ({member.path}{', dry run' if dry_run else ''})"
        )

    def _collect(self, store: SimStore, member: Member, *, dry_run: bool) -> str:
        ctx = self.ctx
        gc = GarbageCollector(member.path, store, ctx.gc_options(), clock=ctx.clock)
        outcome = collect(ctx, gc, member.path, dry_run=dry_run, store=store)
        if not dry_run and not self._exists(member.path):
            if member.state != "destroyed":
                raise ctx.violation(
                    f"GC deleted {member.path} ({member.describe()}), which was not destroyed"
                )
            self._forget_member(member)
        return outcome

    def _maintain_all(self, store: SimStore) -> str:
        """A full compaction of every live database, the clock past every grace period and min age,
        then GC of every database, dependents first."""
        ctx = self.ctx
        compacted = 0
        for member in self.live():
            outcome = self._compact_one(store, member, full=True)
            ctx.trace.append(TraceEntry(ctx.step, "lifecycle", f"  compact {member.path}", outcome))
            self._touched.append(member)
            compacted += outcome.startswith("ok ") and "nothing" not in outcome
        options = ctx.gc_options()
        ctx.clock.advance(
            max(options.db_delete_grace, options.compacted_min_age, options.wal_min_age).total_seconds() + 1
        )
        collected, failed = self.collect_everything(store)
        ctx.figures["family_maintain_all"] += 1
        return f"ok compacted {compacted}, collected {collected} databases" + (
            f" ({failed} failed)" if failed else ""
        )

    def collect_everything(self, store: SimStore) -> tuple[int, int]:
        """GC of every database the simulation knows: lifecycle databases newest first (a clone's
        GC releases its checkpoints on its parents), the admin actor's clones, then main."""
        ctx = self.ctx
        collected = failed = 0
        for member in reversed([m for m in self.members.values() if m.state in ("live", "destroyed")]):
            outcome = self._collect(store, member, dry_run=False)
            ctx.trace.append(TraceEntry(ctx.step, "lifecycle", f"  gc {member.path}", outcome))
            collected += 1
            failed += not outcome.startswith("ok")
            if outcome.startswith("crashed"):
                raise SimulatedCrash("the lifecycle process died during GC of every database")
        for path in [MAIN, *(c.path for c in ctx.clones.values() if c.state == "live")][::-1]:
            gc = GarbageCollector(path, store, ctx.gc_options(), clock=ctx.clock)
            outcome = collect(ctx, gc, path, dry_run=False, store=store)
            ctx.trace.append(TraceEntry(ctx.step, "lifecycle", f"  gc {path}", outcome))
            collected += 1
            failed += not outcome.startswith("ok")
            if outcome.startswith("crashed"):
                raise SimulatedCrash("the lifecycle process died during GC of every database")
        return collected, failed

    # --- writer sessions ---------------------------------------------------------------------------

    def _write_action(self, store: SimStore) -> str:
        member = self.ctx.rng.choice(self.live())
        self._touched.append(member)
        self.writer.armed = self._armed
        try:
            return self.writer.session(store, member) + f" ({member.path})"
        finally:
            self._armed = self.writer.armed

    # --- checks after a step ------------------------------------------------------------------------

    def _check_after(self) -> None:
        invariants.check_reachable(self.ctx)
        for member in dict.fromkeys(self._touched):
            if member.state == "live":
                invariants.check_member(self.ctx, member)

    def _check_deleted(self, path: str) -> None:
        """A finished hard destroy leaves only what a deletion keeps by design (the tombstone and the
        fences: :func:`invariants.deletion_leftovers`), nothing a re-run would still delete, and no
        database a reader opens."""
        ctx = self.ctx
        ctx.checks["hard_destroy_leaves_only_fences"] += 1
        left = invariants.deletion_leftovers(ctx.inner, path)
        if left:
            raise ctx.violation(
                f"a finished hard destroy of {path} left {len(left)} objects it does not keep: {left[:4]}"
            )
        if ManifestStore(ctx.inner, path).read_current() is None:
            return  # the path never held a database (an abandoned operation created nothing)
        rerun = admin.destroy(path, ctx.inner, soft=False, dry_run=True, clock=ctx.clock)
        if rerun.deleted:
            raise ctx.violation(
                f"a finished hard destroy of {path} left work for a re-run: {list(rerun.deleted)[:4]}"
            )
        try:
            ctx.oracle_read(path)
        except DbNotFoundError:
            return
        raise ctx.violation(f"a reader opened {path} after its hard destroy finished")

    # --- the end ------------------------------------------------------------------------------------

    def finish(self, store: SimStore) -> None:
        """Faults off: finish the pending operation, then three rounds of full compaction, the clock
        past every grace period, and GC of everything; every destroyed database GC may delete must be
        gone, and every live one reads its model."""
        ctx = self.ctx
        self.store = store
        for _ in range(3):
            if self.pending is None:
                break
            action = "re-run " + self.pending.label()
            try:
                outcome = self._act(store, action)
            except InvariantViolation:
                raise
            except Exception as error:
                outcome = self._error(action, error)
            ctx.trace.append(TraceEntry(ctx.step, "final", f"lifecycle {action}", outcome))
        if self.pending is not None:
            raise ctx.violation(
                f"the interrupted {self.pending.kind} did not complete when re-run without faults"
            )
        for _ in range(3):
            outcome = self._maintain_all(store)
            ctx.trace.append(TraceEntry(ctx.step, "final", "lifecycle maintain_all", outcome))
        invariants.check_reachable(ctx)
        for member in self.members.values():
            if member.state == "destroyed":
                invariants.check_destroyed_reclaimed(ctx, member)
        self.check_all()


def _hull(keys: set[bytes]) -> tuple[bytes, bytes] | None:
    return (min(keys), max(keys)) if keys else None


def _hulls_disjoint(a: set[bytes], b: set[bytes]) -> bool:
    ha, hb = _hull(a), _hull(b)
    return ha is None or hb is None or ha[1] < hb[0] or hb[1] < ha[0]
