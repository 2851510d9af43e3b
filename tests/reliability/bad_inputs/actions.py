"""Actions several groups share: the case's open writer or reader, a full scan, opening a writer, a
full compaction, a GC run."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta

from slate_ops import Db, DbReader
from slate_ops.compaction import Compactor
from slate_ops.gc import GarbageCollector, GcOptions
from tests.reliability.bad_inputs.catalogue import QUIET, QUIET_READER, Env


def db(env: Env) -> Db:
    result: Db = env.objects["db"]
    return result


def reader(env: Env) -> DbReader:
    result: DbReader = env.objects["reader"]
    return result


def read_all(path: str = "db", checkpoint: str | None = None) -> Callable[[Env], object]:
    """A reader's full scan (closed afterwards, which removes its own checkpoint)."""

    def action(env: Env) -> object:
        checkpoint_id = None if checkpoint is None else uuid.UUID(env.format(checkpoint))
        with DbReader.open(path, env.store, checkpoint_id, QUIET_READER) as r:
            return list(r.scan())

    return action


def open_writer(env: Env) -> object:
    Db.open("db", env.store, QUIET).close()
    return None


def compact_full(env: Env) -> object:
    compactor = Compactor("db", env.store)
    try:
        return compactor.run_once(full=True)
    finally:
        compactor.close()


def run_gc(*, dry_run: bool = False, only: str | None = None) -> Callable[[Env], object]:
    """One GC run; ``only``: just that resource, with a 1 ms minimum age, so it has work to do (other
    resources would delete their own garbage, which is not what the case is about)."""

    def action(env: Env) -> object:
        options = (
            None
            if only is None
            else GcOptions.with_min_age(
                timedelta(milliseconds=1), allow_unsafe_min_age=True, resources=frozenset({only})
            )
        )
        return GarbageCollector("db", env.store, options).run_once(dry_run=dry_run)

    return action
