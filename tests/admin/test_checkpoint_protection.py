"""Protection at the API boundary (issue 19, item 3): a checkpoint that pins another database, or a
tag, cannot be given an expiry, shortened or deleted through ``refresh_checkpoint`` /
``delete_checkpoint`` (and so not through the CLI, which calls them); lifetimes are positive and
bounded. Every refusal writes nothing: the store's snapshot is unchanged.

On main before the fix, ``refresh_checkpoint(parent, final, 1s)`` committed an expiry on the clone's
final checkpoint and the parent's GC then deleted SSTs the clone reads
(:func:`test_refreshing_a_final_checkpoint_is_refused_and_the_clone_stays_readable`).
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from slate_ops import Db, admin
from slate_ops.admin.checkpoints import protection_of
from slate_ops.admin.clone import FINAL_CHECKPOINT_PREFIX
from slate_ops.admin.rescale import MERGE_CHECKPOINT_PREFIX, SPLIT_CHECKPOINT_PREFIX
from slate_ops.config import CheckpointOptions
from slate_ops.errors import CheckpointProtectedError, InvalidArgumentError, InvalidDurationError
from slate_ops.gc import GarbageCollector, GcOptions
from slate_ops.manifest.checkpoints import with_new_checkpoint
from slate_ops.manifest.model import Checkpoint
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import ManualRuntime
from tests.support.db_state import contents, manifest
from tests.support.engine import quiet
from tests.support.stores import snapshot

PARENT = "fam/parent"
CLONE = "fam/clone"
DAY = 86_400.0


def write(store: ObjectStore, path: str, clock: ManualRuntime, keys: range, tag: str) -> None:
    with Db.open(path, store, quiet(l0_max_ssts=1000), clock=clock) as db:
        for i in keys:
            db.put(f"k{i:04d}".encode(), f"{tag}{i}".encode())
        db.flush_memtable()


def final_checkpoint(store: ObjectStore, path: str, dependent: str) -> Checkpoint:
    (found,) = [c for c in manifest(store, path).checkpoints if c.name == FINAL_CHECKPOINT_PREFIX + dependent]
    return found


@pytest.fixture
def family(clocked_memory_store: MemoryStore, clock: ManualRuntime) -> dict[bytes, bytes]:
    """A parent with data and a clone of it reading the parent's SSTs in place; returns the clone's
    contents."""
    write(clocked_memory_store, PARENT, clock, range(50), "p")
    admin.create_clone(CLONE, PARENT, clocked_memory_store, clock=clock)
    return contents(clocked_memory_store, CLONE)


def collect(store: ObjectStore, path: str, clock: ManualRuntime) -> None:
    """GC of ``path`` a few times, each a day later: past every min age, so whatever is unprotected
    is really deleted."""
    for _ in range(3):
        clock.advance(DAY)
        GarbageCollector(path, store, GcOptions(), clock=clock).run_once(dry_run=False)


def test_refreshing_a_final_checkpoint_is_refused_and_the_clone_stays_readable(
    clocked_memory_store: MemoryStore, clock: ManualRuntime, family: dict[bytes, bytes]
) -> None:
    final = final_checkpoint(clocked_memory_store, PARENT, CLONE)
    before = snapshot(clocked_memory_store)
    with pytest.raises(CheckpointProtectedError) as refused:
        admin.refresh_checkpoint(PARENT, clocked_memory_store, final.id, timedelta(seconds=1), clock=clock)
    message = str(refused.value)
    assert repr(CLONE) in message and "destroy" in message and str(final.id) in message
    assert snapshot(clocked_memory_store) == before  # no manifest written
    # The adversary's next step: the parent rewrites everything, its GC runs past every min age.
    write(clocked_memory_store, PARENT, clock, range(50), "q")
    admin.compact(PARENT, clocked_memory_store, clock=clock)
    collect(clocked_memory_store, PARENT, clock)
    assert contents(clocked_memory_store, CLONE) == family
    assert final_checkpoint(clocked_memory_store, PARENT, CLONE).expire_time_s is None


def test_deleting_a_final_checkpoint_is_refused_in_the_dry_run_too(
    clocked_memory_store: MemoryStore, clock: ManualRuntime, family: dict[bytes, bytes]
) -> None:
    final = final_checkpoint(clocked_memory_store, PARENT, CLONE)
    before = snapshot(clocked_memory_store)
    for dry_run in (True, False):
        with pytest.raises(CheckpointProtectedError, match=f"'{CLONE}' depends on it"):
            admin.delete_checkpoint(PARENT, clocked_memory_store, final.id, dry_run=dry_run)
    assert snapshot(clocked_memory_store) == before
    # Refreshing it to "never expires" (what it already is) changes nothing it protects.
    assert (
        admin.refresh_checkpoint(PARENT, clocked_memory_store, final.id, None, clock=clock).expire_time_s
        is None
    )
    # The release the message names works: destroying the clone releases the final checkpoint.
    admin.destroy(CLONE, clocked_memory_store, soft=False, dry_run=False, clock=clock)
    assert all(c.id != final.id for c in manifest(clocked_memory_store, PARENT).checkpoints)


def test_shard_final_checkpoints_are_protected(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    write(clocked_memory_store, PARENT, clock, range(50), "p")
    admin.split(PARENT, clocked_memory_store, [b"k0025"], ["fam/left", "fam/right"], clock=clock)
    before = snapshot(clocked_memory_store)
    for shard in ("fam/left", "fam/right"):
        final = final_checkpoint(clocked_memory_store, PARENT, shard)
        with pytest.raises(CheckpointProtectedError, match=f"'{shard}' depends on it"):
            admin.refresh_checkpoint(PARENT, clocked_memory_store, final.id, timedelta(days=365), clock=clock)
        with pytest.raises(CheckpointProtectedError, match=f"'{shard}' depends on it"):
            admin.delete_checkpoint(PARENT, clocked_memory_store, final.id, dry_run=False)
    assert snapshot(clocked_memory_store) == before


def test_merge_target_final_checkpoints_are_protected(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    write(clocked_memory_store, "fam/a", clock, range(0, 10), "a")
    write(clocked_memory_store, "fam/b", clock, range(10, 20), "b")
    admin.merge(["fam/a", "fam/b"], clocked_memory_store, "fam/ab", clock=clock)
    before = snapshot(clocked_memory_store)
    for source in ("fam/a", "fam/b"):
        final = final_checkpoint(clocked_memory_store, source, "fam/ab")
        with pytest.raises(CheckpointProtectedError, match="'fam/ab' depends on it"):
            admin.delete_checkpoint(source, clocked_memory_store, final.id, dry_run=False)
    assert snapshot(clocked_memory_store) == before


def add_named(
    store: ObjectStore, path: str, name: str, lifetime: timedelta, clock: ManualRuntime
) -> uuid.UUID:
    """A checkpoint named as slate_ops names its own (``create_checkpoint`` refuses these names)."""
    manifests = ManifestStore(store, path)
    checkpoint_id = uuid.uuid4()
    options = CheckpointOptions(lifetime=lifetime, name=name)
    manifests.update(
        lambda c: with_new_checkpoint(c, options, checkpoint_id, clock.now(), manifests.location)
    )
    return checkpoint_id


@pytest.mark.parametrize(
    ("name", "dependents"),
    [
        (SPLIT_CHECKPOINT_PREFIX + "fam/x,fam/y", ("fam/x", "fam/y")),
        (MERGE_CHECKPOINT_PREFIX + "fam/xy", ("fam/xy",)),
        ("slate_ops/clone-source:fam/c2", ("fam/c2",)),
    ],
)
def test_operation_checkpoints_may_be_extended_but_not_shortened_or_deleted(
    clocked_memory_store: MemoryStore, clock: ManualRuntime, name: str, dependents: tuple[str, ...]
) -> None:
    admin.create_db(PARENT, clocked_memory_store)
    checkpoint_id = add_named(clocked_memory_store, PARENT, name, timedelta(minutes=15), clock)
    (checkpoint,) = [c for c in manifest(clocked_memory_store, PARENT).checkpoints if c.id == checkpoint_id]
    protection = protection_of(checkpoint)
    assert protection is not None and protection.dependents == dependents and not protection.never_expires
    before = snapshot(clocked_memory_store)
    with pytest.raises(CheckpointProtectedError, match="shorten") as refused:
        admin.refresh_checkpoint(
            PARENT, clocked_memory_store, checkpoint_id, timedelta(seconds=1), clock=clock
        )
    assert all(repr(d) in str(refused.value) for d in dependents)
    with pytest.raises(CheckpointProtectedError, match="delete"):
        admin.delete_checkpoint(PARENT, clocked_memory_store, checkpoint_id, dry_run=False)
    assert snapshot(clocked_memory_store) == before
    extended = admin.refresh_checkpoint(
        PARENT, clocked_memory_store, checkpoint_id, timedelta(hours=1), clock=clock
    )
    assert extended.expire_time_s == clock.now() + 3600


def test_a_tag_cannot_be_deleted_as_a_checkpoint(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    admin.create_db(PARENT, clocked_memory_store)
    tag = admin.create_tag(PARENT, clocked_memory_store, "v1", clock=clock)
    before = snapshot(clocked_memory_store)
    with pytest.raises(CheckpointProtectedError, match="delete-tag -n v1"):
        admin.delete_checkpoint(PARENT, clocked_memory_store, tag.checkpoint_id, dry_run=False)
    assert snapshot(clocked_memory_store) == before


def test_ordinary_checkpoints_stay_free(clocked_memory_store: MemoryStore, clock: ManualRuntime) -> None:
    admin.create_db(PARENT, clocked_memory_store)
    created = admin.create_checkpoint(
        PARENT, clocked_memory_store, CheckpointOptions(lifetime=timedelta(days=1)), clock=clock
    )
    refreshed = admin.refresh_checkpoint(
        PARENT, clocked_memory_store, created.id, timedelta(seconds=1), clock=clock
    )
    assert refreshed.expire_time_s == clock.now() + 1
    assert admin.delete_checkpoint(PARENT, clocked_memory_store, created.id, dry_run=False).id == created.id


@pytest.mark.parametrize("name", ["slate_ops/clone:fam/fake", "slate_ops/split:a,b", "slate_ops/anything"])
def test_slate_ops_checkpoint_names_are_reserved(clocked_memory_store: MemoryStore, name: str) -> None:
    admin.create_db(PARENT, clocked_memory_store)
    before = snapshot(clocked_memory_store)
    with pytest.raises(InvalidArgumentError, match="reserved"):
        admin.create_checkpoint(PARENT, clocked_memory_store, CheckpointOptions(name=name))
    assert snapshot(clocked_memory_store) == before


@pytest.mark.parametrize(
    ("lifetime", "words"),
    [
        (timedelta(0), "longer than zero"),
        (timedelta(seconds=-1), "longer than zero"),
        (timedelta(days=-3650), "longer than zero"),
        (timedelta(days=365.25 * 100 + 1), "maximum of 100 years"),
        (timedelta.max, "maximum of 100 years"),
    ],
)
def test_refresh_lifetimes_are_positive_and_bounded(
    clocked_memory_store: MemoryStore, clock: ManualRuntime, lifetime: timedelta, words: str
) -> None:
    admin.create_db(PARENT, clocked_memory_store)
    created = admin.create_checkpoint(PARENT, clocked_memory_store, clock=clock)
    before = snapshot(clocked_memory_store)
    with pytest.raises(InvalidDurationError, match=words):
        admin.refresh_checkpoint(PARENT, clocked_memory_store, created.id, lifetime, clock=clock)
    assert snapshot(clocked_memory_store) == before
    # The longest allowed lifetime is accepted.
    admin.refresh_checkpoint(
        PARENT, clocked_memory_store, created.id, timedelta(days=365.25 * 100), clock=clock
    )


@pytest.mark.parametrize(
    "lifetime", [timedelta(0), timedelta(seconds=-5), -5, 10**30, "1000000years", float("nan")]
)
def test_checkpoint_options_refuse_unbounded_lifetimes(lifetime: object) -> None:
    with pytest.raises(ValueError, match=r"longer than zero|maximum of 100 years"):
        CheckpointOptions(lifetime=lifetime)  # type: ignore[arg-type]
