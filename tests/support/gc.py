"""GC helpers: a collector on a manual clock, unsafe min ages, keys and manifests as GC sees them,
and databases written in rounds (the tests use the ``clocked_memory_store`` fixture)."""

from __future__ import annotations

from datetime import timedelta

from slate_ops import Db
from slate_ops.gc import GarbageCollector, GcOptions
from slate_ops.manifest.model import Manifest
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import ManualRuntime
from tests.support.engine import quiet

MIN_AGE = 300.0  # SlateDB's default, the GcOptions default


def gc(store: ObjectStore, clock: ManualRuntime, path: str = "db", **options: object) -> GarbageCollector:
    return GarbageCollector(path, store, GcOptions.model_validate(options), clock=clock)


def unsafe(seconds: float, **options: object) -> GcOptions:
    """Every min age ``seconds`` (below the floor: tests only)."""
    return GcOptions.with_min_age(timedelta(seconds=seconds), allow_unsafe_min_age=True, **options)


def keys(store: ObjectStore, prefix: str = "db/") -> set[str]:
    return {m.key for m in store.list(prefix)}


def latest(store: ObjectStore, path: str = "db") -> tuple[int, Manifest]:
    current = ManifestStore(store, path).read_latest_required()
    return current.id, current.value


def write_rounds(
    store: ObjectStore, clock: ManualRuntime, rounds: int, *, path: str = "db", keys_per_round: int = 20
) -> dict[bytes, bytes]:
    """``rounds`` L0 SSTs (each after a WAL flush), 10 s apart; returns the model."""
    model: dict[bytes, bytes] = {}
    with Db.open(path, store, quiet(l0_max_ssts=1000), clock=clock) as db:
        for round_ in range(rounds):
            for i in range(keys_per_round):
                key, value = b"k%04d" % i, b"v%d-%d" % (round_, i)
                db.put(key, value)
                model[key] = value
            db.flush()
            db.flush_memtable()
            clock.advance(10)
    return model
