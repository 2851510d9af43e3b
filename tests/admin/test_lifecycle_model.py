"""Stateful property test of a family of databases over their whole lifecycle (issue 12).

Random compositions of writes, clones (of clones and of merged databases too, of the current state
or of a tag), splits, merges (of adjacent shards, and of two clones of one parent taken at different
times), soft and hard destroys, full compactions, tags, rollbacks and GC of every database, on a
:class:`MemoryStore` whose ``last_modified`` follows a :class:`ManualRuntime`. After every rule:

* :func:`slate_ops.admin.check_references` finds nothing: every SST any live database can read
  exists, every external entry is pinned by its own final checkpoint, no two entries share one;
* every live, non-destroyed database reads exactly what a dict model says (a clone copies its
  parent's dict, a split restricts it, a merge unions), and so does every tag.

GC runs with the clock past every min age and grace period; a dry run first must report exactly
what the real run then deletes, expires and detaches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from slate_ops import Db, DbOptions, DbReader, ReaderOptions, admin
from slate_ops.admin.tags import TAG_PREFIX
from slate_ops.compaction import Compactor, CompactorOptions, LocalExecutor
from slate_ops.errors import InvalidDeletionError
from slate_ops.gc import GarbageCollector, GcOptions
from slate_ops.gc.report import GcReport
from slate_ops.manifest.model import KeyRange
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.runtime import ManualRuntime

WRITER = DbOptions(
    wal_flush_interval=timedelta(hours=1), manifest_poll_interval=timedelta(hours=1), l0_max_ssts=1000
)
READER = ReaderOptions(manifest_poll_interval=timedelta(hours=1), checkpoint_lifetime=timedelta(hours=3))
COMPACTOR = CompactorOptions(min_sources=2, target_sst_bytes=2048, max_subcompaction_bytes=1 << 30)
GC = GcOptions()  # as the crash-point workload: SlateDB's 300 s min ages, a day's grace
PAST_EVERYTHING = 2 * 86_400.0
"""How far the GC rule moves the clock: past every min age, ephemeral checkpoint and the grace."""

ROOT = "fam/root"
KEYS = [b"k%03d" % i for i in range(100)]
SPLIT_KEYS = [b"k%03d" % i for i in (12, 25, 37, 50, 62, 75, 87)]
MAX_DATABASES = 12
"""Rules that create databases stop here, so a run's invariant checks stay cheap."""

WHOLE = KeyRange()


@dataclass
class Model:
    """One database as its users know it."""

    contents: dict[bytes, bytes]
    key_range: KeyRange
    destroyed: bool = False  # soft: live until GC deletes it
    tags: dict[str, dict[bytes, bytes]] = field(default_factory=dict)
    unranged: bool = False  # its manifest has no visible_range (may take part in a merge of clones)


def pick(data: st.DataObject, items: list[str], label: str) -> str:
    """One of ``items`` (never empty), drawn with fixed constraints so replays keep their shape."""
    return items[data.draw(st.integers(min_value=0, max_value=1 << 16), label=label) % len(items)]


class LifecycleModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualRuntime()
        self.store = MemoryStore(now=lambda: datetime.fromtimestamp(self.clock.now(), UTC))
        self.dbs: dict[str, Model] = {}
        self.born: dict[str, int] = {ROOT: 0}  # creation order: GC runs newest (dependents) first
        self.counter = 0
        self.epoch = 0  # later keys of the merge-of-two-clones rule sort after every earlier key
        self.dbs[ROOT] = Model({}, WHOLE, unranged=True)
        self._write(ROOT, {k: b"root-" + k for k in KEYS[::3]}, [])

    # --- helpers -----------------------------------------------------------------------------------

    def tick(self, seconds: float = 1.0) -> None:
        self.clock.advance(seconds)

    def new_path(self, kind: str) -> str:
        self.counter += 1
        path = f"fam/{kind}{self.counter}"
        self.born[path] = self.counter
        return path

    def value(self) -> bytes:
        self.counter += 1
        return b"v%d" % self.counter

    def usable(self) -> list[str]:
        return sorted(p for p, m in self.dbs.items() if not m.destroyed)

    def room(self) -> bool:
        return len(self.dbs) < MAX_DATABASES

    def _write(self, path: str, puts: dict[bytes, bytes], deletes: list[bytes]) -> None:
        model = self.dbs[path]
        with Db.open(path, self.store, WRITER, clock=self.clock) as db:
            for k, v in puts.items():
                db.put(k, v)
            for k in deletes:
                db.delete(k)
            db.flush_memtable()  # split and merge need every write in L0
        model.contents.update(puts)
        for k in deletes:
            model.contents.pop(k, None)
        self.tick()

    def _clone(self, parent: str, tag: str | None = None) -> str | None:
        """A clone of the parent's current state, or of its tag ``tag``."""
        path = self.new_path("clone")
        checkpoint = None
        if tag is not None:
            latest = ManifestStore(self.store, parent).read_latest_required().value
            checkpoint = next(c.id for c in latest.checkpoints if c.name == TAG_PREFIX + tag)

        # Also when a database the parent reads is soft-destroyed: the clone's final checkpoint there
        # is made from the parent's own (a regression: it used to be refused half-way).
        admin.create_clone(path, parent, self.store, checkpoint, clock=self.clock)
        source = self.dbs[parent]
        contents = source.contents if tag is None else source.tags[tag]
        self.dbs[path] = Model(dict(contents), source.key_range, unranged=source.unranged)
        self.tick()
        return path

    def _compact(self, path: str) -> None:
        Compactor(path, self.store, COMPACTOR, LocalExecutor(threads=1), clock=self.clock).run_once(full=True)
        self.tick()

    def _merge(self, sources: list[str], *, unranged: bool) -> str | None:
        target = self.new_path("merged")
        admin.merge(sources, self.store, target, clock=self.clock)
        contents: dict[bytes, bytes] = {}
        for source in sources:
            contents |= self.dbs[source].contents
        ranges = [self.dbs[s].key_range for s in sources]
        hull = KeyRange(ranges[0].start, ranges[-1].end)
        self.dbs[target] = Model(contents, WHOLE if unranged else hull, unranged=unranged)
        self.tick()
        return target

    # --- writes, compaction ------------------------------------------------------------------------

    @precondition(lambda self: bool(self.usable()))
    @rule(data=st.data())
    def write(self, data: st.DataObject) -> None:
        path = pick(data, self.usable(), "database")
        model = self.dbs[path]
        in_range = [k for k in KEYS if model.key_range.contains(k)]
        ops = data.draw(
            st.lists(st.tuples(st.integers(0, 1 << 16), st.booleans()), min_size=1, max_size=8), label="ops"
        )
        puts: dict[bytes, bytes] = {}
        deletes: list[bytes] = []
        for index, delete in ops:
            k = in_range[index % len(in_range)]
            if delete:
                deletes.append(k)
                puts.pop(k, None)
            else:
                puts[k] = self.value()
                if k in deletes:
                    deletes.remove(k)
        self._write(path, puts, deletes)

    @precondition(lambda self: bool(self.usable()))
    @rule(data=st.data())
    def compact_full(self, data: st.DataObject) -> None:
        self._compact(pick(data, self.usable(), "database"))

    # --- clones, splits, merges --------------------------------------------------------------------

    @precondition(lambda self: bool(self.usable()) and self.room())
    @rule(data=st.data())
    def clone(self, data: st.DataObject) -> None:
        parent = pick(data, self.usable(), "parent")
        tags = sorted(self.dbs[parent].tags)
        from_tag = bool(tags) and data.draw(st.booleans(), label="from a tag")
        self._clone(parent, pick(data, tags, "tag") if from_tag else None)

    def splittable(self) -> list[str]:
        return [p for p in self.usable() if self._split_keys(p)]

    def _split_keys(self, path: str) -> list[bytes]:
        key_range = self.dbs[path].key_range
        return [k for k in SPLIT_KEYS if key_range.contains(k) and k != key_range.start]

    @precondition(lambda self: bool(self.splittable()) and self.room())
    @rule(data=st.data())
    def split(self, data: st.DataObject) -> None:
        source = pick(data, self.splittable(), "source")
        keys = self._split_keys(source)
        at = keys[data.draw(st.integers(0, 1 << 16), label="split key") % len(keys)]
        low, high = self.new_path("low"), self.new_path("high")
        admin.split(source, self.store, [at], [low, high], clock=self.clock)
        model = self.dbs[source]
        for path, key_range in (
            (low, KeyRange(model.key_range.start, at)),
            (high, KeyRange(at, model.key_range.end)),
        ):
            contents = {k: v for k, v in model.contents.items() if key_range.contains(k)}
            self.dbs[path] = Model(contents, key_range)
        self.tick()

    def adjacent_pairs(self) -> list[tuple[str, str]]:
        ranged = [p for p in self.usable() if not self.dbs[p].unranged]
        return [
            (a, b)
            for a in ranged
            for b in ranged
            if a != b
            and self.dbs[a].key_range.end is not None
            and self.dbs[a].key_range.end == self.dbs[b].key_range.start
        ]

    @precondition(lambda self: bool(self.adjacent_pairs()) and self.room())
    @rule(data=st.data())
    def merge_adjacent(self, data: st.DataObject) -> None:
        pairs = self.adjacent_pairs()
        a, b = pairs[data.draw(st.integers(0, 1 << 16), label="pair") % len(pairs)]
        self._merge([a, b], unranged=False)

    def clone_parents(self) -> list[str]:
        """Databases without a recorded range: two clones of one taken at different times can be
        merged once the parent's data moved past everything the first clone holds."""
        return [p for p in self.usable() if self.dbs[p].unranged]

    @precondition(lambda self: bool(self.clone_parents()) and len(self.dbs) + 3 <= MAX_DATABASES)
    @rule(data=st.data(), fresh=st.integers(1, 6))
    def merge_clones_taken_at_two_times(self, data: st.DataObject, fresh: int) -> None:
        """Clone the parent; replace all of its data by keys after every key it ever had and compact
        (tombstones dropped), clone it again, and merge both clones: disjoint data, and two entries
        for the parent in the merged database, taken from two different checkpoints."""
        parent = pick(data, self.clone_parents(), "parent")
        first = self._clone(parent)
        if first is None:
            return
        self.epoch += 1
        later = {b"z%03d-%03d" % (self.epoch, i): self.value() for i in range(fresh)}
        self._write(parent, later, sorted(self.dbs[parent].contents))
        self._compact(parent)
        second = self._clone(parent)
        assert second is not None
        self._merge([first, second], unranged=True)

    # --- destroy -----------------------------------------------------------------------------------

    @precondition(lambda self: bool(self.usable()))
    @rule(data=st.data())
    def soft_destroy(self, data: st.DataObject) -> None:
        path = pick(data, self.usable(), "database")
        admin.destroy(path, self.store, clock=self.clock, dry_run=False)
        self.dbs[path].destroyed = True
        self.tick()

    @precondition(lambda self: bool(self.dbs))
    @rule(data=st.data())
    def hard_destroy(self, data: st.DataObject) -> None:
        path = pick(data, sorted(self.dbs), "database")
        try:
            admin.destroy(path, self.store, soft=False, clock=self.clock, dry_run=False)
        except InvalidDeletionError:
            pass  # checkpoints still need it (tags, clones' final checkpoints, a compaction's)
        else:
            del self.dbs[path]
        self.tick()

    # --- tags and rollback -------------------------------------------------------------------------

    @precondition(lambda self: bool(self.usable()))
    @rule(data=st.data())
    def create_tag(self, data: st.DataObject) -> None:
        path = pick(data, self.usable(), "database")
        name = f"t{self.counter}"
        self.counter += 1
        admin.create_tag(path, self.store, name, clock=self.clock)
        self.dbs[path].tags[name] = dict(self.dbs[path].contents)
        self.tick()

    def tagged(self, usable_only: bool) -> list[str]:
        return [p for p in (self.usable() if usable_only else sorted(self.dbs)) if self.dbs[p].tags]

    @precondition(lambda self: bool(self.tagged(usable_only=False)))
    @rule(data=st.data())
    def delete_tag(self, data: st.DataObject) -> None:
        path = pick(data, self.tagged(usable_only=False), "database")
        name = pick(data, sorted(self.dbs[path].tags), "tag")
        admin.delete_tag(path, self.store, name, dry_run=False)
        del self.dbs[path].tags[name]
        self.tick()

    @precondition(lambda self: bool(self.tagged(usable_only=True)))
    @rule(data=st.data())
    def rollback(self, data: st.DataObject) -> None:
        path = pick(data, self.tagged(usable_only=True), "database")
        name = pick(data, sorted(self.dbs[path].tags), "tag")
        admin.rollback_to_tag(path, self.store, name, dry_run=False, clock=self.clock)
        self.dbs[path].contents = dict(self.dbs[path].tags[name])
        self.tick()

    # --- GC ----------------------------------------------------------------------------------------

    @rule()
    def gc_all(self) -> None:
        """GC of every database (newest first: dependents before what they read), the clock past
        every min age and the grace period; a dry run first reports exactly what the real run does."""
        self.clock.advance(PAST_EVERYTHING)
        for path in sorted(self.dbs, key=lambda p: -self.born[p]):
            gc = GarbageCollector(path, self.store, GC, clock=self.clock)
            planned = gc.run_once(dry_run=True)
            done = gc.run_once(dry_run=False)
            assert summary(planned) == summary(done), f"GC of {path}: the dry run differs from the real run"
            if done.destroyed:
                assert self.dbs[path].destroyed, f"GC deleted {path}, which was never destroyed"
                del self.dbs[path]
        self.tick()

    # --- invariants --------------------------------------------------------------------------------

    @invariant()
    def references_hold(self) -> None:
        problems = admin.check_references(self.store, now=self.clock.now())
        assert problems == [], "\n".join(map(str, problems))

    @invariant()
    def contents_match_the_model(self) -> None:
        for path, model in sorted(self.dbs.items()):
            latest = ManifestStore(self.store, path).read_latest()
            assert latest is not None, f"{path} has no manifest"
            assert latest.value.initialized, f"{path} is not initialised"
            assert (latest.value.destroyed_at_s is not None) == model.destroyed, path
            if model.destroyed:
                continue
            with DbReader.open(path, self.store, options=READER, clock=self.clock) as reader:
                got = dict(reader.scan())
            assert got == model.contents, f"{path}: {diff(got, model.contents)}"
            for name, expected in sorted(model.tags.items()):
                tag = next(c for c in latest.value.checkpoints if c.name == TAG_PREFIX + name)
                with DbReader.open(path, self.store, tag.id, READER, clock=self.clock) as reader:
                    got = dict(reader.scan())
                assert got == expected, f"{path} at tag {name}: {diff(got, expected)}"


def summary(report: GcReport) -> tuple[object, ...]:
    return (
        sorted(report.deleted_keys()),
        sorted(str(c.id) for c in report.checkpoints_expired),
        sorted(report.clones_detached),
        report.destroyed,
    )


def diff(got: dict[bytes, bytes], expected: dict[bytes, bytes]) -> str:
    keys = sorted(k for k in set(got) | set(expected) if got.get(k) != expected.get(k))
    return ", ".join(f"{k!r}: read {got.get(k)!r}, expected {expected.get(k)!r}" for k in keys[:5])


def run(steps: int, examples: int) -> None:
    options = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    run_state_machine_as_test(LifecycleModel, settings=options)


@pytest.mark.timeout(900)  # a failure shrinks for up to 5 minutes before it reports
def test_lifecycle_of_a_family_of_databases() -> None:
    run(steps=30, examples=25)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_lifecycle_of_a_family_of_databases_long() -> None:
    run(steps=60, examples=300)
